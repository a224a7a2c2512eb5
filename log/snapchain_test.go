package log

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/partlog/partlog/internal/vfs"
	"github.com/partlog/partlog/segment"
)

// chainRig drives the snapshot chain (state.go) the way the partition does,
// without one: real segments on MemFS, a current snapshot the rig owns a
// reference on, splices that publish successors, and readers' references
// on any snapshot. A segment that leaves the list is marked deleted and
// loses its owner's reference (as deleteSegmentFiles does), so its files
// exist exactly as long as the chain keeps it: alive reports that.
type chainRig struct {
	t    require.TestingT
	fs   *vfs.MemFS
	cur  *segments
	all  []*segment.Segment // every segment made, in creation order
	next int64              // the next roll's base offset
}

func newChainRig(t require.TestingT, n int) *chainRig {
	r := &chainRig{t: t, fs: vfs.NewMem()}
	require.NoError(t, r.fs.MkdirAll("/p-0", 0o755))
	list := make([]*segment.Segment, n)
	for i := range list {
		list[i] = r.create()
	}
	r.cur = newSegments(list)
	return r
}

// create makes a segment at the next roll base, owned by the rig.
func (r *chainRig) create() *segment.Segment {
	return r.createAt(r.nextBase())
}

func (r *chainRig) nextBase() int64 {
	b := r.next
	r.next += 1 << 20
	return b
}

func (r *chainRig) createAt(base int64) *segment.Segment {
	// Small indexes: MemFS holds every byte of thousands of segments.
	seg, err := segment.Create(r.fs, "/p-0", base, segment.Config{MaxIndexBytes: 240, MaxSegmentBytes: 1 << 20})
	require.NoError(r.t, err)
	r.all = append(r.all, seg)
	return seg
}

// splice publishes cur.list[lo:hi] replaced by mid and drops the owner's
// reference on the removed segments, then on the old snapshot.
func (r *chainRig) splice(lo, hi int, mid ...*segment.Segment) {
	old := r.cur
	removed := slices.Clone(old.list[lo:hi])
	r.cur = old.splice(lo, hi, mid)
	require.NoError(r.t, old.unref())
	for _, seg := range removed {
		require.NoError(r.t, seg.MarkDeleted())
		require.NoError(r.t, seg.Unref())
	}
}

// acquire takes a reader's reference on the current snapshot.
func (r *chainRig) acquire() *segments {
	require.True(r.t, r.cur.tryRef())
	return r.cur
}

// close ends the chain as Partition.Close does: the owner lets go of the
// current segments and of the current snapshot.
func (r *chainRig) close() {
	for _, seg := range r.cur.list {
		require.NoError(r.t, seg.MarkDeleted())
		require.NoError(r.t, seg.Unref())
	}
	r.cur.retire()
	require.NoError(r.t, r.cur.unref())
}

// alive reports whether seg's files still exist (a deleted segment's are
// removed by its last Unref).
func (r *chainRig) alive(seg *segment.Segment) bool {
	_, err := r.fs.Stat(seg.LogPath())
	return err == nil
}

// TestSnapChainSegmentInRangeOfSnapshots: a segment in snapshots S1..S2
// (entered by a roll, removed by retention) stays open while any snapshot
// at or before S2 is held, in either release order, and is released by the
// last of them.
func TestSnapChainSegmentInRangeOfSnapshots(t *testing.T) {
	for _, order := range []string{"oldest-first", "newest-first"} {
		t.Run(order, func(t *testing.T) {
			r := newChainRig(t, 1)
			s0 := r.acquire()
			b := r.create()
			r.splice(1, 1, b) // S1 = [a b]
			s1 := r.acquire()
			r.splice(2, 2, r.create()) // S2 = [a b c]
			s2 := r.acquire()
			r.splice(0, 2) // S3 = [c]: a and b leave
			s3 := r.acquire()
			a := r.all[0]
			require.True(t, r.alive(a))
			require.True(t, r.alive(b))
			require.NoError(t, s3.unref()) // newer than both: changes nothing
			require.True(t, r.alive(a) && r.alive(b))
			first, second := s0, s2
			if order == "newest-first" {
				first, second = s2, s0
			}
			require.NoError(t, first.unref())
			require.True(t, r.alive(a) && r.alive(b), "a snapshot holding them is still held")
			require.NoError(t, s1.unref())
			require.True(t, r.alive(a) && r.alive(b))
			require.NoError(t, second.unref())
			require.False(t, r.alive(a), "released with the last snapshot that holds it")
			require.False(t, r.alive(b))
			require.True(t, r.alive(r.all[2]))
			c := r.all[2]
			r.close()
			require.False(t, r.alive(c))
		})
	}
}

// TestSnapChainLongChainOutOfOrder: 2,000 snapshots, each held by a reader
// while the next is published, released newest first but for the oldest;
// then the oldest's release finalizes the whole chain in one (iterative)
// walk and releases every segment retention removed meanwhile.
func TestSnapChainLongChainOutOfOrder(t *testing.T) {
	const n = 2000
	r := newChainRig(t, 1)
	held := []*segments{r.acquire()}
	for i := range n {
		r.splice(len(r.cur.list), len(r.cur.list), r.create())
		if i%2 == 1 {
			r.splice(0, 1) // retention drops the oldest
		}
		held = append(held, r.acquire())
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rest := held[1:]
	rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	for _, s := range rest {
		require.NoError(t, s.unref())
	}
	for _, seg := range r.all {
		require.True(t, r.alive(seg), "segment %d released while the oldest snapshot is held", seg.BaseOffset())
	}
	require.NoError(t, held[0].unref())
	for _, seg := range r.all {
		require.Equal(t, slices.Contains(r.cur.list, seg), r.alive(seg), "segment %d", seg.BaseOffset())
	}
	r.close()
	for _, seg := range r.all {
		require.False(t, r.alive(seg))
	}
}

// TestSnapChainModel checks the chain against a model under random
// histories of rolls, retention, truncation, replacement (compaction),
// restarts and readers taking and releasing snapshot references in any
// order: after every step a segment is open exactly when it is in the
// current list or in a snapshot at or after the oldest snapshot a reader
// holds (links finalize in publication order), so a reader can always use
// every segment of its snapshot, and nothing outlives the chain.
func TestSnapChainModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		r := newChainRig(rt, rapid.IntRange(1, 4).Draw(rt, "segments"))
		gen := 0                           // index of the current snapshot
		last := map[*segment.Segment]int{} // last snapshot index holding a segment
		held := map[*segments]int{}        // readers' snapshots and their index
		var order []*segments              // held, in acquisition order
		note := func() {
			for _, seg := range r.cur.list {
				last[seg] = gen
			}
		}
		note()
		check := func() {
			oldest := gen + 1
			for _, i := range held {
				oldest = min(oldest, i)
			}
			for _, seg := range r.all {
				want := slices.Contains(r.cur.list, seg) || oldest <= last[seg]
				if got := r.alive(seg); got != want {
					rt.Fatalf("segment %d alive %v, want %v (oldest held snapshot %d, last snapshot holding it %d, current %d)",
						seg.BaseOffset(), got, want, oldest, last[seg], gen)
				}
			}
			for s := range held {
				for _, seg := range s.list {
					if !r.alive(seg) {
						rt.Fatalf("segment %d of a held snapshot released", seg.BaseOffset())
					}
				}
			}
		}
		publish := func(lo, hi int, mid ...*segment.Segment) {
			r.splice(lo, hi, mid...)
			gen++
			note()
		}
		rt.Repeat(map[string]func(*rapid.T){
			"roll": func(*rapid.T) {
				publish(len(r.cur.list), len(r.cur.list), r.create())
			},
			"retention": func(rt *rapid.T) {
				if len(r.cur.list) < 2 {
					rt.Skip("one segment")
				}
				publish(0, rapid.IntRange(1, len(r.cur.list)-1).Draw(rt, "n"))
			},
			"truncate": func(rt *rapid.T) {
				if len(r.cur.list) < 2 {
					rt.Skip("one segment")
				}
				publish(rapid.IntRange(1, len(r.cur.list)-1).Draw(rt, "keep"), len(r.cur.list))
			},
			"replace": func(rt *rapid.T) {
				n := len(r.cur.list)
				lo := rapid.IntRange(0, n-1).Draw(rt, "lo")
				hi := rapid.IntRange(lo+1, n).Draw(rt, "hi")
				// One replacement just above the first replaced base:
				// below every later segment's, and a new file name.
				publish(lo, hi, r.createAt(r.cur.list[lo].BaseOffset()+1))
			},
			"restart": func(*rapid.T) {
				publish(0, len(r.cur.list), r.create())
			},
			"acquire": func(*rapid.T) {
				s := r.acquire()
				if _, ok := held[s]; ok {
					// A second reader of the same snapshot.
					order = append(order, s)
					return
				}
				held[s] = gen
				order = append(order, s)
			},
			"release": func(rt *rapid.T) {
				if len(order) == 0 {
					rt.Skip("no reader")
				}
				i := rapid.IntRange(0, len(order)-1).Draw(rt, "reader")
				s := order[i]
				order = slices.Delete(order, i, i+1)
				if !slices.Contains(order, s) {
					delete(held, s)
				}
				require.NoError(rt, s.unref())
			},
			"": func(*rapid.T) { check() },
		})
		for _, s := range order {
			require.NoError(rt, s.unref())
		}
		r.close()
		for _, seg := range r.all {
			require.False(rt, r.alive(seg), "segment %d outlived the chain", seg.BaseOffset())
		}
	})
}
