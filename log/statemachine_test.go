package log_test

import (
	"errors"
	"github.com/stretchr/testify/require"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
	"pgregory.net/rapid"
)

// TestStateMachine is the metamorphic test: random histories of appends
// (single and concurrent), follower appends, reads at random offsets and
// sizes, time lookups, rolls, truncations, DeleteRecords, high watermark
// moves and reopens, under random small configurations (tiny segments and
// indexes so rolls of every kind happen, mmap on and off, the OS and the
// in-memory filesystem, every flush policy), checked against logtest's
// model after every step. On the in-memory filesystem it also crashes:
// CrashClone keeps the synced state and a random part of what was not
// synced (torn at random), the partition reopens from the clone, and the
// log must end in [synced prefix, appended end] on a batch boundary with
// every kept batch byte for byte (logtest.Model.Crash, then Check). It
// also crashes inside an operation (crashDuring: just before the k-th
// filesystem operation of a truncation, a restart, a DeleteRecordsBefore,
// a retention deletion, a segment rewrite, a roll or a sync): the log
// reopened from that state must be one a crash before the operation or
// after it may leave, or for a truncation a prefix of the old log down to
// its new end (any prefix for a restart below the log end), and keep that
// state through the next clean reopen.
// Rerun a failure with -rapid.seed=N (rapid prints it).
func TestStateMachine(t *testing.T) {
	crashes := 0
	defer func() { t.Logf("%d crash points", crashes) }()
	rounds := 3 // of -rapid.checks histories each (100 by default)
	if testing.Short() || raceEnabled {
		rounds = 1
	}
	for range rounds {
		stateMachineRound(t, &crashes)
	}
}

func stateMachineRound(t *testing.T, crashes *int) {
	rapid.Check(t, func(rt *rapid.T) {
		manual := rapid.Bool().Draw(rt, "manualHighWatermark")
		cfg := plog.Config{
			SegmentBytes:             int64(rapid.IntRange(600, 16<<10).Draw(rt, "segmentBytes")),
			SegmentIndexBytes:        rapid.SampledFrom([]int{24, 48, 240, 10 << 20}).Draw(rt, "segmentIndexBytes"),
			IndexIntervalBytes:       rapid.SampledFrom([]int{1, 100, 1000, 4096}).Draw(rt, "indexIntervalBytes"),
			DisableAutoHighWatermark: manual,
			DisableMmap:              rapid.Bool().Draw(rt, "disableMmap"),
		}
		cfg.FlushMessages = rapid.SampledFrom([]int64{0, 1, 7}).Draw(rt, "flushMessages")
		// Write-behind: off; on with a timer that fires between the
		// operations (100 us), so that crashes also find the buffer
		// written by the timer; or on with a timer that never fires in a
		// check (the buffer is written by the calls that need it).
		cfg.WriteBehind = rapid.SampledFrom([]time.Duration{0, 100 * time.Microsecond, time.Hour}).Draw(rt, "writeBehind")
		// Removed when the check ends: kept until the test ended, a long
		// run (-rapid.checks) held every check's files.
		parent := t.TempDir()
		rt.Cleanup(func() { _ = os.RemoveAll(parent) })
		dir := filepath.Join(parent, "events-3")
		var mem *vfs.MemFS
		// Crashes inside an operation (crashDuring).
		var midOp midOpCrash
		if rapid.IntRange(0, 3).Draw(rt, "fs") > 0 { // mostly MemFS: crashes need it
			mem = vfs.NewMem()
			cfg.FS = midOp.wrap(mem)
			dir = "/data/events-3"
		}
		p, err := plog.Open(dir, cfg)
		require.NoError(rt, err)
		defer func() {
			if p != nil { // nil after a refused reopen, which the check reports
				_ = p.Close()
			}
		}()
		m := logtest.NewModel(0, manual)
		m.SyncEveryAppend = cfg.FlushMessages == 1
		ts := int64(1_700_000_000_000)

		epoch := int32(0) // the leader epoch of follower batches
		genBatch := func(rt *rapid.T) []byte {
			n := rapid.IntRange(1, 25).Draw(rt, "records")
			size := rapid.IntRange(0, 300).Draw(rt, "valueSize")
			ts += rapid.Int64Range(-5000, 5000).Draw(rt, "timeStep")
			return logtest.MakeBatch(n, size, ts, byte(n))
		}
		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				b := genBatch(rt)
				want := m.LogEndOffset()
				base, err := p.AppendBatch(b)
				if int64(len(b)) > cfg.SegmentBytes {
					require.ErrorIs(rt, err, plog.ErrBatchTooLarge)
					return
				}
				require.NoError(rt, err)
				require.Equal(rt, want, base)
				require.NoError(rt, m.AppendBatch(b, base))
			},
			"appendConcurrent": func(rt *rapid.T) {
				k := rapid.IntRange(2, 5).Draw(rt, "appenders")
				bs := make([][]byte, k)
				for i := range bs {
					bs[i] = genBatch(rt)
					if int64(len(bs[i])) > cfg.SegmentBytes {
						rt.Skip("batch larger than a segment")
					}
				}
				bases := make([]int64, k)
				errs := make([]error, k)
				var wg sync.WaitGroup
				for i := range bs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						bases[i], errs[i] = p.AppendBatch(bs[i])
					}()
				}
				wg.Wait()
				order := make([]int, k)
				for i := range order {
					order[i] = i
					require.NoError(rt, errs[i])
				}
				slices.SortFunc(order, func(a, b int) int { return int(bases[a] - bases[b]) })
				for _, i := range order {
					require.NoError(rt, m.AppendBatch(bs[i], bases[i])) // checks contiguity
				}
			},
			"appendAssigned": func(rt *rapid.T) {
				var set []byte
				next := m.LogEndOffset()
				for i := rapid.IntRange(1, 3).Draw(rt, "batches"); i > 0; i-- {
					b := batch.Batch(genBatch(rt))
					if int64(len(b)) > cfg.SegmentBytes {
						rt.Skip("batch larger than a segment")
					}
					// Gaps, as in a compacted leader's log: mostly none,
					// some small, a few past a segment's 32-bit relative
					// offsets (a roll across the gap).
					switch rapid.IntRange(0, 9).Draw(rt, "gapKind") {
					case 7, 8:
						next += rapid.Int64Range(1, 40).Draw(rt, "gap")
					case 9:
						next += rapid.Int64Range(math.MaxInt32-30, math.MaxInt32+40).Draw(rt, "hugeGap")
					}
					b.SetBaseOffset(next)
					// Mostly the current epoch, sometimes a newer or an
					// older one (the cache keeps only higher ones).
					epoch += int32(rapid.IntRange(-1, 2).Draw(rt, "epochStep") / 2)
					b.SetPartitionLeaderEpoch(max(epoch, -1))
					next = b.NextOffset()
					set = append(set, b...)
				}
				end, err := p.AppendAssigned(set)
				require.NoError(rt, err)
				require.Equal(rt, next, end)
				require.NoError(rt, m.Append(set))
			},
			"read": func(rt *rapid.T) {
				o := rapid.Int64Range(m.LogStartOffset()-2, m.LogEndOffset()+2).Draw(rt, "offset")
				maxBytes := rapid.IntRange(0, 6000).Draw(rt, "maxBytes")
				follower := rapid.Bool().Draw(rt, "follower")
				read, bound := p.ReadFrom, m.HighWatermark()
				if follower {
					read, bound = p.ReadFromFollower, m.LogEndOffset()
				}
				r, err := read(o, maxBytes)
				if o < m.LogStartOffset() || o > m.LogEndOffset() {
					require.ErrorIs(rt, err, plog.ErrOffsetOutOfRange)
					return
				}
				require.NoError(rt, err)
				defer r.Close()
				want, ok := batchFrom(m, o)
				if o >= bound || !ok || want.LastOffset >= bound {
					require.Empty(rt, r.Bytes(), "read at %d returned %d bytes past the bound %d", o, len(r.Bytes()), bound)
					return
				}
				got := r.Bytes()
				require.True(rt, len(got) >= len(want.Bytes), "short read")
				require.Equal(rt, want.Bytes, got[:len(want.Bytes)])
				next := checkRecordsFrom(rt, r, o)
				require.True(rt, next <= bound, "read past the bound")
				if len(got) > len(want.Bytes) {
					require.True(rt, len(got) <= maxBytes, "%d bytes for maxBytes %d", len(got), maxBytes)
				}
			},
			"offsetForTimestamp": func(rt *rapid.T) {
				target := rapid.Int64Range(ts-20000, ts+20000).Draw(rt, "timestamp")
				got, ok, err := p.OffsetForTimestamp(target)
				require.NoError(rt, err)
				want, wantOK := m.OffsetForTimestamp(target)
				require.Equal(rt, wantOK, ok)
				if ok {
					require.Equal(rt, want, got)
				}
			},
			"roll": func(rt *rapid.T) {
				require.NoError(rt, p.Roll())
			},
			"truncate": func(rt *rapid.T) {
				o := rapid.Int64Range(m.LogStartOffset()-3, m.LogEndOffset()+1).Draw(rt, "truncateTo")
				err, merr := p.TruncateTo(o), m.TruncateTo(o)
				if merr != nil {
					require.ErrorIs(rt, err, plog.ErrOffsetOutOfRange)
					return
				}
				require.NoError(rt, err)
			},
			"assignEpochStartOffset": func(rt *rapid.T) {
				// An election: a new epoch at the log end, or a stale or
				// repeated one, or at a wrong offset.
				latest := int32(-1)
				if es := m.LeaderEpochs(); len(es) > 0 {
					latest = es[len(es)-1].Epoch
				}
				e := latest + int32(rapid.IntRange(-2, 2).Draw(rt, "assignEpoch"))
				o := m.LogEndOffset() + int64(rapid.SampledFrom([]int{0, 0, 0, -1, 1}).Draw(rt, "assignAt"))
				err, merr := p.AssignEpochStartOffset(e, o), m.AssignEpochStartOffset(e, o)
				switch {
				case errors.Is(merr, plog.ErrUnexpectedOffset):
					require.ErrorIs(rt, err, plog.ErrUnexpectedOffset)
				case errors.Is(merr, plog.ErrStaleLeaderEpoch):
					require.ErrorIs(rt, err, plog.ErrStaleLeaderEpoch)
				default:
					require.NoError(rt, err)
					epoch = max(epoch, e)
				}
			},
			"truncateFullyAndStartAt": func(rt *rapid.T) {
				// A follower behind its leader's log start restarts above
				// its end; TruncateTo below the log start restarts below.
				o := m.LogEndOffset() + rapid.Int64Range(-3, 40).Draw(rt, "restartAt")
				if rapid.IntRange(0, 9).Draw(rt, "restartFar") == 0 {
					o += math.MaxInt32
				}
				err, merr := p.TruncateFullyAndStartAt(o), m.TruncateFullyAndStartAt(o)
				if merr != nil {
					require.ErrorIs(rt, err, plog.ErrOffsetOutOfRange)
					return
				}
				require.NoError(rt, err)
			},
			"deleteRecords": func(rt *rapid.T) {
				o := rapid.Int64Range(m.LogStartOffset()-1, m.HighWatermark()+1).Draw(rt, "deleteBefore")
				err, merr := p.DeleteRecordsBefore(o), m.DeleteRecordsBefore(o)
				if merr != nil {
					require.ErrorIs(rt, err, plog.ErrOffsetOutOfRange)
					return
				}
				require.NoError(rt, err)
			},
			"setHighWatermark": func(rt *rapid.T) {
				if !manual {
					rt.Skip("automatic high watermark")
				}
				o := rapid.Int64Range(m.LogStartOffset()-1, m.LogEndOffset()+1).Draw(rt, "highWatermark")
				err, merr := p.SetHighWatermark(o), m.SetHighWatermark(o)
				if merr != nil {
					require.ErrorIs(rt, err, plog.ErrOffsetOutOfRange)
					return
				}
				require.NoError(rt, err)
			},
			"rewriteSegments": func(rt *rapid.T) {
				// What compaction does when it keeps every record: copy
				// sealed segments below the high watermark into one new
				// segment and swap it in.
				segs, err := p.Segments()
				require.NoError(rt, err)
				defer func() {
					for _, s := range segs {
						require.NoError(rt, s.Unref())
					}
				}()
				hw := p.HighWatermark()
				n := 0
				for n+1 < len(segs) && segs[n+1].BaseOffset() <= hw {
					n++
				}
				if n == 0 {
					rt.Skip("no sealed segment below the high watermark")
				}
				from := rapid.IntRange(0, n-1).Draw(rt, "from")
				to := rapid.IntRange(from+1, n).Draw(rt, "to")
				if err := rewriteSegments(rt, p, segs[from:to]); err != nil {
					rt.Skip("the rewritten segment does not fit one segment: " + err.Error())
				}
			},
			"deleteSegments": func(rt *rapid.T) {
				segs, err := p.Segments()
				require.NoError(rt, err)
				defer func() {
					for _, s := range segs {
						require.NoError(rt, s.Unref())
					}
				}()
				k := rapid.IntRange(1, len(segs)).Draw(rt, "segmentsToDelete")
				err = p.DeleteSegments(segs[:k])
				if k == len(segs) || segs[k].BaseOffset() > m.HighWatermark() {
					require.ErrorIs(rt, err, plog.ErrSegmentsChanged)
					return
				}
				require.NoError(rt, err)
				require.NoError(rt, m.DeleteSegmentsBefore(segs[k].BaseOffset()))
			},
			"sync": func(rt *rapid.T) {
				require.NoError(rt, p.Sync())
				m.Sync()
			},
			"crash": func(rt *rapid.T) {
				if mem == nil {
					rt.Skip("crashes need the in-memory filesystem")
				}
				opts := vfs.CrashOptions{
					UnsyncedDataPercent: rapid.IntRange(0, 100).Draw(rt, "unsyncedDataPercent"),
					TornPercent:         rapid.IntRange(0, 100).Draw(rt, "tornPercent"),
					Seed:                rapid.Uint64().Draw(rt, "crashSeed"),
					OrderedEntries:      rapid.Bool().Draw(rt, "orderedEntries"),
				}
				clone := mem.CrashClone(opts)
				_ = p.Close() // on the filesystem that "lost power"
				mem, cfg.FS = clone, midOp.wrap(clone)
				var err error
				p, err = plog.Open(dir, cfg)
				require.NoError(rt, err)
				require.NoError(rt, m.Crash(p.LogEndOffset(), p.HighWatermark()))
				*crashes++
			},
			"crashDuring": func(rt *rapid.T) {
				// A crash just before the k-th filesystem operation of a
				// truncation, a restart, a DeleteRecordsBefore, a roll or
				// a sync: the log reopened from what it left must be
				// what a crash before the operation or one after it may
				// leave (law 4: a prefix; never a mix).
				if mem == nil {
					rt.Skip("crashes need the in-memory filesystem")
				}
				before := m.Clone()
				opts := vfs.CrashOptions{
					UnsyncedDataPercent: rapid.IntRange(0, 100).Draw(rt, "unsyncedDataPercent"),
					TornPercent:         rapid.IntRange(0, 100).Draw(rt, "tornPercent"),
					Seed:                rapid.Uint64().Draw(rt, "crashSeed"),
				}
				k := rapid.Int64Range(0, 40).Draw(rt, "crashAtOp")
				op := rapid.SampledFrom([]string{"truncate", "restart", "deleteRecords", "deleteSegments", "rewriteSegments", "roll", "sync"}).Draw(rt, "crashDuringOp")
				var segs []*segment.Segment // held only by the segment operations
				if op == "deleteSegments" || op == "rewriteSegments" {
					var serr error
					segs, serr = p.Segments()
					require.NoError(rt, serr)
					defer func() {
						for _, s := range segs {
							require.NoError(rt, s.Unref())
						}
					}()
				}
				midOp.arm(mem, k, opts)
				var err, merr error
				restartBelowEnd := false // law 4: a prefix of the old log may be left
				switch op {
				case "truncate":
					o := rapid.Int64Range(m.LogStartOffset()-3, m.LogEndOffset()).Draw(rt, "truncateTo")
					restartBelowEnd = o < m.LogStartOffset()
					err, merr = p.TruncateTo(o), m.TruncateTo(o)
				case "restart":
					o := m.LogEndOffset() + rapid.Int64Range(-3, 40).Draw(rt, "restartAt")
					restartBelowEnd = o < m.LogEndOffset()
					err, merr = p.TruncateFullyAndStartAt(o), m.TruncateFullyAndStartAt(o)
				case "deleteRecords":
					o := rapid.Int64Range(m.LogStartOffset(), m.HighWatermark()).Draw(rt, "deleteBefore")
					err, merr = p.DeleteRecordsBefore(o), m.DeleteRecordsBefore(o)
				case "deleteSegments":
					k := rapid.IntRange(1, len(segs)).Draw(rt, "segmentsToDelete")
					err = p.DeleteSegments(segs[:k])
					if k == len(segs) || segs[k].BaseOffset() > m.HighWatermark() {
						require.ErrorIs(rt, err, plog.ErrSegmentsChanged)
						err = nil
					} else {
						merr = m.DeleteSegmentsBefore(segs[k].BaseOffset())
					}
				case "rewriteSegments":
					// As the rewriteSegments action: a swap that keeps
					// every record changes nothing a reader sees.
					hw := p.HighWatermark()
					n := 0
					for n+1 < len(segs) && segs[n+1].BaseOffset() <= hw {
						n++
					}
					if n > 0 {
						from := rapid.IntRange(0, n-1).Draw(rt, "from")
						to := rapid.IntRange(from+1, n).Draw(rt, "to")
						_ = rewriteSegments(rt, p, segs[from:to]) // a segment too small for the copy: nothing swapped
					}
				case "roll":
					err = p.Roll()
				case "sync":
					err = p.Sync()
					m.Sync()
				}
				clone := midOp.disarm()
				if merr != nil {
					require.ErrorIs(rt, err, plog.ErrOffsetOutOfRange)
				} else {
					require.NoError(rt, err)
				}
				if clone == nil {
					return // the operation ended before its k-th filesystem operation
				}
				_ = p.Close()
				mem, cfg.FS = clone, midOp.wrap(clone)
				var oerr error
				p, oerr = plog.Open(dir, cfg)
				require.NoError(rt, oerr)
				// Either model may describe the crash: the one before the
				// operation or the one after it; for a truncation, also a
				// prefix of the old log down to the new end (segments go
				// newest first), and for a restart below the log end (a
				// TruncateTo whose batch holds the log start is one) any
				// prefix of the old log.
				cands := []*logtest.Model{before, m}
				lo := m.LogEndOffset()
				if restartBelowEnd {
					lo = before.LogStartOffset()
				}
				if end := p.LogEndOffset(); (op == "truncate" || restartBelowEnd) && end >= lo && end <= before.LogEndOffset() {
					prefix := before.Clone()
					if prefix.TruncateTo(end) == nil {
						cands = append(cands, prefix)
					}
				}
				var errs []error
				for _, cand := range cands {
					c := cand.Clone()
					cerr := c.Crash(p.LogEndOffset(), p.HighWatermark())
					if cerr == nil {
						cerr = logtest.Check(p, c)
					}
					if cerr == nil {
						*m = *c
						*crashes++
						return
					}
					errs = append(errs, cerr)
				}
				require.NoError(rt, errors.Join(errs...), "crash at operation %d of %s", k, op)
			},
			"reopen": func(rt *rapid.T) {
				require.NoError(rt, p.Close())
				var err error
				p, err = plog.Open(dir, cfg)
				require.NoError(rt, err)
				m.Reopen()
			},
			"": func(rt *rapid.T) {
				require.NoError(rt, logtest.Check(p, m))
			},
		})
	})
}

// midOpCrash takes what a crash leaves just before the k-th filesystem
// operation once armed (TestStateMachine's crashDuring), counting the
// operations of every goroutine; the history goes on on the live
// filesystem.
type midOpCrash struct {
	mu    sync.Mutex
	mem   *vfs.MemFS
	left  int64 // operations before the crash; -1: disarmed
	opts  vfs.CrashOptions
	taken *vfs.MemFS
}

// wrap returns mem behind an injector that calls c's hook.
func (c *midOpCrash) wrap(mem *vfs.MemFS) *vfs.Injector {
	c.mu.Lock()
	c.left = -1
	c.mu.Unlock()
	in := vfs.NewInjector(mem)
	in.SetHook(func(vfs.Op) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.left == 0 && c.taken == nil {
			c.taken = c.mem.CrashClone(c.opts)
		}
		if c.left >= 0 {
			c.left--
		}
		return nil
	})
	return in
}

// arm sets the crash before the k-th operation from now on mem.
func (c *midOpCrash) arm(mem *vfs.MemFS, k int64, opts vfs.CrashOptions) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mem, c.left, c.opts, c.taken = mem, k, opts, nil
}

// disarm ends the crash window and returns what the crash left, nil when
// it did not come.
func (c *midOpCrash) disarm() *vfs.MemFS {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.left = -1
	taken := c.taken
	c.taken = nil
	return taken
}
