package log_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// TestAppendAssignedGaps is the follower path over offset gaps (a
// compacted leader's log): what AppendAssigned accepts and refuses, what
// reads return in and around the gaps, where segments start, and that a
// clean reopen and a crash after a sync give the same log (laws 1, 3, 4
// as they read for followers).
func TestAppendAssignedGaps(t *testing.T) {
	const huge = int64(math.MaxInt32) + 5
	cases := []struct {
		name string
		sets [][]assigned
		// wantErr is the error of the last set (nil: every set appends).
		wantErr error
		end     int64
		batches [][2]int64
		// bases are the segments' base offsets (nil: not checked).
		bases []int64
	}{
		{name: "first batch above the end of an empty log", sets: [][]assigned{{{base: 5, n: 3}}},
			end: 8, batches: [][2]int64{{5, 7}}, bases: []int64{0}},
		{name: "gaps inside a record set", sets: [][]assigned{{{base: 0, n: 2}, {base: 10, n: 1}, {base: 40, n: 5}}},
			end: 45, batches: [][2]int64{{0, 1}, {10, 10}, {40, 44}}},
		{name: "gaps between record sets", sets: [][]assigned{{{base: 0, n: 2}}, {{base: 7, n: 1}}, {{base: 8, n: 1}}, {{base: 30, n: 2}}},
			end: 32, batches: [][2]int64{{0, 1}, {7, 7}, {8, 8}, {30, 31}}},
		{name: "a compacted batch with fewer records than offsets", sets: [][]assigned{{{base: 3, delta: 9}, {base: 20, n: 1}}},
			end: 21, batches: [][2]int64{{3, 12}, {20, 20}}},
		{name: "a record set below the log end", sets: [][]assigned{{{base: 0, n: 2}}, {{base: 1, n: 1}}},
			wantErr: plog.ErrUnexpectedOffset, end: 2, batches: [][2]int64{{0, 1}}},
		{name: "a batch inside the previous one", sets: [][]assigned{{{base: 0, n: 3}, {base: 2, n: 1}}},
			wantErr: plog.ErrUnexpectedOffset, end: 0},
		{name: "a batch at the previous one's last offset after a gap", sets: [][]assigned{{{base: 4, n: 3}, {base: 6, n: 1}}},
			wantErr: plog.ErrUnexpectedOffset, end: 0},
		{name: "a gap past a segment's 32-bit relative offsets", sets: [][]assigned{{{base: 0, n: 2}, {base: 2 + huge, n: 3}}},
			end: 5 + huge, batches: [][2]int64{{0, 1}, {2 + huge, 4 + huge}}, bases: []int64{0, 4 + huge - math.MaxInt32}},
		{name: "a huge gap on an empty log", sets: [][]assigned{{{base: huge, n: 1}}},
			end: huge + 1, batches: [][2]int64{{huge, huge}}, bases: []int64{0, huge - math.MaxInt32}},
		{name: "a 2^31-offset batch past a huge gap", sets: [][]assigned{{{base: 0, n: 1}}, {{base: huge, delta: math.MaxInt32}}},
			wantErr: plog.ErrUnexpectedOffset, end: 1, batches: [][2]int64{{0, 0}}, bases: []int64{0}},
		{name: "a 2^31-offset batch after a gap refuses the whole record set", sets: [][]assigned{{{base: 0, n: 1}, {base: 5, delta: math.MaxInt32}}},
			wantErr: plog.ErrUnexpectedOffset, end: 0, bases: []int64{0}},
		{name: "a 2^31-offset batch without a gap", sets: [][]assigned{{{base: 0, n: 1}, {base: 1, delta: math.MaxInt32}}},
			end: 2 + math.MaxInt32, batches: [][2]int64{{0, 0}, {1, 1 + math.MaxInt32}}, bases: []int64{0, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			const dir = "/data/follower-0"
			cfg := plog.Config{FS: mem, SegmentBytes: 1 << 20, SegmentIndexBytes: memIndexBytes}
			p, err := plog.Open(dir, cfg)
			require.NoError(t, err)
			defer func() { _ = p.Close() }()
			for i, s := range c.sets {
				before := p.LogEndOffset()
				end, err := p.AppendAssigned(recordSet(t, 3, s...))
				if i == len(c.sets)-1 && c.wantErr != nil {
					require.ErrorIs(t, err, c.wantErr)
					require.Equal(t, before, end)
					continue
				}
				require.NoError(t, err)
				require.Equal(t, p.LogEndOffset(), end)
			}
			check := func(p *plog.Partition) {
				t.Helper()
				require.NoError(t, p.Verify())
				require.Equal(t, c.end, p.LogEndOffset())
				require.Equal(t, int64(0), p.LogStartOffset())
				var all [][2]int64
				for o := int64(0); o < p.LogEndOffset(); {
					r, err := p.ReadFromFollower(o, math.MaxInt32)
					require.NoError(t, err)
					got := batchesIn(t, r.Bytes())
					require.NoError(t, r.Close())
					if len(got) == 0 {
						break
					}
					all = append(all, got...)
					o = got[len(got)-1][1] + 1
				}
				require.Equal(t, c.batches, all)
				// A read anywhere returns the first batch ending at or
				// after the offset: in a gap, the batch after it.
				for _, b := range c.batches {
					for _, o := range []int64{b[0] - 1, b[0], b[1]} {
						if o < 0 {
							continue
						}
						r, err := p.ReadFromFollower(o, 1)
						require.NoError(t, err)
						got := batchesIn(t, r.Bytes())
						require.NoError(t, r.Close())
						require.NotEmpty(t, got, "read at %d", o)
						require.True(t, got[0][1] >= o && got[0][0] <= max(o, b[0]), "read at %d got %v", o, got)
					}
				}
				if c.bases != nil {
					var bases []int64
					for _, s := range p.SegmentInfos() {
						bases = append(bases, s.BaseOffset)
					}
					require.Equal(t, c.bases, bases)
				}
			}
			check(p)
			require.NoError(t, p.Sync())
			crashed := mem.CrashClone(vfs.CrashOptions{Seed: 1})
			require.NoError(t, p.Close())
			p, err = plog.Open(dir, cfg)
			require.NoError(t, err)
			check(p)
			q, err := plog.Open(dir, plog.Config{FS: crashed, SegmentBytes: 1 << 20, SegmentIndexBytes: memIndexBytes, Recovery: plog.StrictRecovery{}})
			require.NoError(t, err)
			defer func() { _ = q.Close() }()
			check(q)
		})
	}
}

// TestAppendAssignedGapCrashAtEveryOp crashes a follower's appends across
// offset gaps (small ones inside a segment, rolls at the log end, and
// rolls past a segment's 32-bit relative offsets, whose new segment starts
// above the log end) at every filesystem operation in turn: the clone
// must reopen holding
// every acknowledged record set, as a prefix of the appended batches, its
// log ending anywhere from the last kept batch's end to the first lost
// batch's base.
func TestAppendAssignedGapCrashAtEveryOp(t *testing.T) {
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 17))
	const dir = "/kafka/gap-op-0"
	cfg := func(fs vfs.FS) plog.Config {
		// Manual roll flush: one goroutine does every operation, in
		// one order.
		return plog.WithManualRollFlush(plog.Config{FS: fs, FlushMessages: 1, SegmentBytes: 1500, IndexIntervalBytes: 100, SegmentIndexBytes: 240})
	}
	var sets [][]byte
	next := int64(0)
	for i := range 24 {
		var bs []assigned
		for range 1 + i%2 {
			switch i % 6 {
			case 1, 4:
				next += int64(1 + i)
			case 3:
				next += math.MaxInt32 + int64(i)
			}
			n := 1 + i%4
			bs = append(bs, assigned{base: next, n: n})
			next += int64(n)
		}
		sets = append(sets, recordSet(t, int32(i/5), bs...))
	}
	crashAtEveryOp(t, crashWalk[*int]{
		// The walk's shared value counts the record sets acknowledged
		// before the crash.
		setup: func(*testing.T, vfs.FS) *int { return new(int) },
		run: func(t *testing.T, fs vfs.FS, acked *int, crashed func() bool) {
			p, err := plog.Open(dir, cfg(fs))
			require.NoError(t, err)
			for i, s := range sets {
				_, err := p.AppendAssigned(s)
				require.NoError(t, err)
				if !crashed() {
					*acked = i + 1
				}
			}
			require.NoError(t, p.Close())
		},
		options:     randomCrash(rng),
		mayEndEarly: true,
		check: func(t *testing.T, acked *int, state *vfs.MemFS, at crashPoint) {
			p, err := plog.Open(dir, cfg(state))
			require.NoError(t, err, "%s: reopen", at)
			m := logtest.NewModel(0, false)
			m.SyncEveryAppend = true
			for i, s := range sets {
				if i == *acked {
					m.SyncEveryAppend = false
				}
				require.NoError(t, m.Append(s))
			}
			require.NoError(t, m.Crash(p.LogEndOffset(), p.HighWatermark()), "%s", at)
			require.NoError(t, logtest.Check(p, m))
			// The recovered log takes the next record set.
			_, err = p.AppendAssigned(recordSet(t, 9, assigned{base: p.LogEndOffset() + 3, n: 2}))
			require.NoError(t, err)
			require.NoError(t, p.Verify())
			require.NoError(t, p.Close())
		},
	})
}

// TestGapRollCrashThenAppendAtEnd: a follower's append across a 2^31-offset
// gap rolls to a new segment above the log end; a crash loses the batch
// but keeps the new, empty segment (the roll persisted the recovery point
// at its base). Whatever the reopened log's end, the next append there,
// from a leader (no gap) or a follower, must leave a directory that
// reopens, cleanly and after a crash, with the same batches: no segment
// may follow an offset gap that none of its batches shows
// (TestStateMachine found a leader append at the empty segment's base
// refused on the next Open as "offsets [0, 1) are missing").
func TestGapRollCrashThenAppendAtEnd(t *testing.T) {
	for _, c := range []struct {
		name  string
		first int64 // the log's records before the gap: [0, first)
	}{
		{"empty log", 0},
		{"three records", 3},
	} {
		for _, leader := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/leader=%v", c.name, leader), func(t *testing.T) {
				const dir = "/kafka/gap-crash-0"
				mem := vfs.NewMem()
				cfg := plog.WithManualRollFlush(plog.Config{FS: mem, SegmentBytes: 1500, SegmentIndexBytes: memIndexBytes})
				p, err := plog.Open(dir, cfg)
				require.NoError(t, err)
				if c.first > 0 {
					_, err = p.AppendAssigned(recordSet(t, 0, assigned{base: 0, n: int(c.first)}))
					require.NoError(t, err)
				}
				// Last offset first+2^31: the roll's segment starts at
				// first+1, above the log end.
				gapBase := c.first + math.MaxInt32
				end, err := p.AppendAssigned(recordSet(t, 0, assigned{base: gapBase, n: 2}))
				require.NoError(t, err)
				require.Equal(t, gapBase+2, end)
				require.Len(t, p.SegmentInfos(), 2)

				// Nothing unsynced survives: the gap batch is lost.
				clone := mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 0, Seed: 1})
				require.NoError(t, p.Close())
				cfg.FS = clone
				p, err = plog.Open(dir, cfg)
				require.NoError(t, err)
				m := logtest.NewModel(0, false)
				if c.first > 0 {
					require.NoError(t, m.Append(recordSet(t, 0, assigned{base: 0, n: int(c.first)})))
				}
				require.NoError(t, m.Append(recordSet(t, 0, assigned{base: gapBase, n: 2})))
				require.NoError(t, m.Crash(p.LogEndOffset(), p.HighWatermark()))
				require.NoError(t, logtest.Check(p, m))

				at := p.LogEndOffset()
				if leader {
					b := logtest.MakeBatch(2, 10, 1_700_000_000_500, 7)
					base, err := p.AppendBatch(b)
					require.NoError(t, err)
					require.Equal(t, at, base)
					require.NoError(t, m.AppendBatch(b, base))
				} else {
					set := recordSet(t, 1, assigned{base: at, n: 2})
					_, err := p.AppendAssigned(set)
					require.NoError(t, err)
					require.NoError(t, m.Append(set))
				}
				require.NoError(t, logtest.Check(p, m))
				require.NoError(t, p.Verify())

				// A crash after a sync, then a clean reopen.
				require.NoError(t, p.Sync())
				m.Sync()
				clone = clone.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 0, Seed: 2})
				require.NoError(t, p.Close())
				cfg.FS = clone
				p, err = plog.Open(dir, cfg)
				require.NoError(t, err, "reopen after a crash")
				require.NoError(t, m.Crash(p.LogEndOffset(), p.HighWatermark()))
				require.NoError(t, logtest.Check(p, m))
				require.NoError(t, p.Close())
				p, err = plog.Open(dir, cfg)
				require.NoError(t, err, "clean reopen")
				m.Reopen()
				require.NoError(t, logtest.Check(p, m))
				require.NoError(t, p.Verify())
				require.NoError(t, p.Close())
			})
		}
	}
}
