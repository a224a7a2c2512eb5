package log_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// smBatch is one batch a replayed state machine action draws: its record
// count, value size, timestamp step, and for appendAssigned its gap and
// epoch step.
type smBatch struct {
	records, valueSize int
	timeStep           int64
	gap                int64
	epochStep          int
}

// smReplay drives a partition and the model with the state machine's
// actions (statemachine_test.go) from fixed values instead of rapid's
// draws, so a failure rapid found can be kept as a deterministic test.
type smReplay struct {
	t     *testing.T
	cfg   plog.Config
	mem   *vfs.MemFS
	dir   string
	p     *plog.Partition
	m     *logtest.Model
	ts    int64
	epoch int32
	// holdFlush leaves the flush of the rolls from now on undone, as a
	// crash before the background flush ran finds it.
	holdFlush bool
}

func newSMReplay(t *testing.T, cfg plog.Config) *smReplay {
	r := &smReplay{t: t, cfg: cfg, mem: vfs.NewMem(), dir: "/data/events-3", ts: 1_700_000_000_000}
	r.cfg.FS = r.mem
	r.cfg = plog.WithManualRollFlush(r.cfg)
	p, err := plog.Open(r.dir, r.cfg)
	require.NoError(t, err)
	r.p = p
	t.Cleanup(func() {
		if r.p != nil {
			_ = r.p.Close()
		}
	})
	r.m = logtest.NewModel(0, cfg.DisableAutoHighWatermark)
	r.m.SyncEveryAppend = cfg.FlushMessages == 1
	r.check()
	return r
}

// check runs the background flush of the rolls so far (whose timing
// TestStateMachine leaves to the scheduler) unless holdFlush, then checks
// the partition against the model.
func (r *smReplay) check() {
	if !r.holdFlush {
		require.NoError(r.t, r.p.FlushRolled())
	}
	require.NoError(r.t, logtest.Check(r.p, r.m))
}

func (r *smReplay) gen(b smBatch) []byte {
	r.ts += b.timeStep
	return logtest.MakeBatch(b.records, b.valueSize, r.ts, byte(b.records))
}

// skipped replays the draws of an action rapid skipped: only the
// timestamps move.
func (r *smReplay) skipped(bs ...smBatch) {
	for _, b := range bs {
		r.gen(b)
	}
}

func (r *smReplay) append(b smBatch) {
	data := r.gen(b)
	want := r.m.LogEndOffset()
	base, err := r.p.AppendBatch(data)
	require.NoError(r.t, err)
	require.Equal(r.t, want, base)
	require.NoError(r.t, r.m.AppendBatch(data, base))
	r.check()
}

func (r *smReplay) appendAssigned(bs ...smBatch) {
	var set []byte
	next := r.m.LogEndOffset()
	for _, sb := range bs {
		b := batch.Batch(r.gen(sb))
		next += sb.gap
		b.SetBaseOffset(next)
		r.epoch += int32(sb.epochStep / 2)
		b.SetPartitionLeaderEpoch(max(r.epoch, -1))
		next = b.NextOffset()
		set = append(set, b...)
	}
	end, err := r.p.AppendAssigned(set)
	require.NoError(r.t, err)
	require.Equal(r.t, next, end)
	require.NoError(r.t, r.m.Append(set))
	r.check()
}

func (r *smReplay) read(o int64, maxBytes int, follower bool) {
	read := r.p.ReadFrom
	if follower {
		read = r.p.ReadFromFollower
	}
	rec, err := read(o, maxBytes)
	if o < r.m.LogStartOffset() || o > r.m.LogEndOffset() {
		require.ErrorIs(r.t, err, plog.ErrOffsetOutOfRange)
	} else {
		require.NoError(r.t, err)
		rec.Close()
	}
	r.check()
}

// rewrite is the state machine's rewriteSegments of segments [from, to)
// (rewriteSegments).
func (r *smReplay) rewrite(from, to int) {
	segs, err := r.p.Segments()
	require.NoError(r.t, err)
	defer func() {
		for _, s := range segs {
			require.NoError(r.t, s.Unref())
		}
	}()
	if rewriteSegments(r.t, r.p, segs[from:to]) == nil {
		r.check()
	}
}

func (r *smReplay) roll() {
	require.NoError(r.t, r.p.Roll())
	r.check()
}

func (r *smReplay) sync() {
	require.NoError(r.t, r.p.Sync())
	r.m.Sync()
	r.check()
}

func (r *smReplay) truncateFullyAndStartAt(o int64) {
	require.NoError(r.t, r.p.TruncateFullyAndStartAt(o))
	require.NoError(r.t, r.m.TruncateFullyAndStartAt(o))
	r.check()
}

func (r *smReplay) deleteRecords(o int64) {
	require.NoError(r.t, r.p.DeleteRecordsBefore(o))
	require.NoError(r.t, r.m.DeleteRecordsBefore(o))
	r.check()
}

func (r *smReplay) offsetForTimestamp(target int64) {
	got, ok, err := r.p.OffsetForTimestamp(target)
	require.NoError(r.t, err)
	want, wantOK := r.m.OffsetForTimestamp(target)
	require.Equal(r.t, wantOK, ok)
	if ok {
		require.Equal(r.t, want, got)
	}
	r.check()
}

// reopen closes the partition cleanly and opens it again: nothing changes.
func (r *smReplay) reopen() {
	require.NoError(r.t, r.p.Close())
	r.p = nil
	p, err := plog.Open(r.dir, r.cfg)
	require.NoError(r.t, err)
	r.p = p
	r.m.Reopen()
	r.check()
}

func (r *smReplay) crash(opts vfs.CrashOptions) {
	clone := r.mem.CrashClone(opts)
	_ = r.p.Close()
	r.p = nil
	r.mem, r.cfg.FS = clone, clone
	p, err := plog.Open(r.dir, r.cfg)
	require.NoError(r.t, err)
	r.p = p
	require.NoError(r.t, r.m.Crash(p.LogEndOffset(), p.HighWatermark()))
	r.check()
}

// TestStateMachineReplayGapAfterCrash replays the TestStateMachine history
// that once ended in a refused reopen: after a crash, Open said offsets
// [29, 42) were missing between two segments, although the gap was one a
// follower's append left. The log rolls across a gap of 2^31 offsets to a
// segment at 42 (the batch's last offset - (2^31-1)), moving the recovery
// point there with that batch unsynced, then rolls again at 2147483690;
// the crash comes before that roll's flush. Each case is a crash that
// loses segment 42's batch, the only sign of the gap [29, 42): Open must
// cut the log there and remove the empty segment, so that the log ends at
// 29 and a clean reopen keeps it so.
func TestStateMachineReplayGapAfterCrash(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts vfs.CrashOptions
	}{
		// rapid's case: the newest segment keeps its batches (Open
		// refused the gap before segment 42, not the last one).
		{"later segment kept", vfs.CrashOptions{UnsyncedDataPercent: 86, TornPercent: 16, Seed: 0x43d029b}},
		// The newest segment's file stays, empty: Open removed it and
		// left segment 42 empty at the end (log end 42), which the
		// reopen then removed (log end 29).
		{"later segment empty", vfs.CrashOptions{UnsyncedDataPercent: 30, Seed: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := replayGapHistory(t)
			r.crash(tc.opts)
			require.Equal(t, int64(29), r.p.LogEndOffset())
			r.reopen()
		})
	}
}

// replayGapHistory replays TestStateMachine's history up to its last
// crash (TestStateMachineReplayGapAfterCrash).
func replayGapHistory(t *testing.T) *smReplay {
	r := newSMReplay(t, plog.Config{
		SegmentBytes:       622,
		SegmentIndexBytes:  240,
		IndexIntervalBytes: 4096,
	})
	r.appendAssigned(
		smBatch{records: 3, valueSize: 6, timeStep: -3, epochStep: 1},
		smBatch{records: 2, valueSize: 2, timeStep: 416, epochStep: -1},
		smBatch{records: 14, valueSize: 24, timeStep: -4247, epochStep: 1},
	)
	r.read(-2, 12, false)
	r.rewrite(0, 1)
	r.roll()
	r.rewrite(1, 2)
	r.roll()
	r.skipped(smBatch{timeStep: -20}, smBatch{timeStep: 17}, smBatch{timeStep: -7}) // appendConcurrent
	r.read(16, 1264, true)
	r.rewrite(0, 2) // does not fit: leaves a .cleaned file
	r.truncateFullyAndStartAt(r.m.LogEndOffset() - 1)
	r.append(smBatch{records: 1, valueSize: 4, timeStep: 109})
	r.read(19, 8, true)
	r.truncateFullyAndStartAt(r.m.LogEndOffset() - 1)
	r.appendAssigned(smBatch{records: 9, valueSize: 1, timeStep: -4676, epochStep: -1})
	r.sync()
	r.roll()
	r.append(smBatch{records: 2, valueSize: 75, timeStep: 12})
	r.deleteRecords(17)
	r.skipped(smBatch{timeStep: 44}, smBatch{timeStep: 1}, smBatch{timeStep: -1}, smBatch{timeStep: -1}, smBatch{timeStep: 0})
	r.skipped(smBatch{timeStep: -34})
	r.offsetForTimestamp(1699999975354)
	r.rewrite(0, 1)
	r.sync()
	r.crash(vfs.CrashOptions{UnsyncedDataPercent: 3, TornPercent: 75, Seed: 0x3})
	// The rolls from here on are not flushed (the roll across the gap
	// flushes below its segment itself).
	r.holdFlush = true
	r.appendAssigned(smBatch{records: 1, valueSize: 11, timeStep: 1, gap: 2147483660, epochStep: 1})
	r.appendAssigned(
		smBatch{records: 23, valueSize: 0, timeStep: -4043},
		smBatch{records: 5, valueSize: 2, timeStep: -1},
	)
	return r
}
