package log

import (
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/epochs"
	"github.com/partlog/partlog/internal/producer"
	"github.com/partlog/partlog/internal/vfs"
	"github.com/partlog/partlog/segment"
)

// The opening part without a Partition: segments written on an in-memory
// directory, an opening over it with the offsets a test says its
// checkpoints held, and a policy that records what it is asked.

const openingDir = "/o/t-0"

// askedPolicy records every event it is asked about and answers answer.
type askedPolicy struct {
	events []RecoveryEvent
	answer error
}

func (a *askedPolicy) OnCorruption(ev RecoveryEvent) error {
	a.events = append(a.events, ev)
	return a.answer
}

// newTestOpening returns an opening of openingDir on mem, asking pol,
// whose checkpoints held nothing.
func newTestOpening(t *testing.T, mem *vfs.MemFS, pol RecoveryPolicy) *opening {
	t.Helper()
	require.NoError(t, mem.MkdirAll(openingDir, 0o755))
	cfg := Config{FS: mem, Recovery: pol, SegmentIndexBytes: memTestIndexBytes, IndexIntervalBytes: -1, Logger: slog.New(slog.DiscardHandler)}
	cfg.ensureDefaults()
	o := newOpening(openingDir, &cfg, cfg.segmentConfig(), partitionFiles{fs: mem, dir: openingDir, logger: cfg.Logger}, false)
	o.epochs = epochs.New(mem, filepath.Join(openingDir, leaderEpochCheckpointFile))
	return o
}

// testSegment creates the segment at base in o's directory holding a
// batch of n records at each span's base, sealed unless active, with the
// reference the caller releases (release).
func testSegment(t *testing.T, o *opening, base int64, active bool, spans ...span) *segment.Segment {
	t.Helper()
	batches := make([]batch.Batch, len(spans))
	for i, s := range spans {
		batches[i] = s.batch(t)
	}
	return createTestSegment(t, o.fs, o.dir, o.segCfg, base, active, batches...)
}

// TestOpeningEndsShort: after a crash, a sealed segment above the
// recovery point whose batches end before the next segment's base lost
// its unsynced tail, and the log ends there; unless the missing offsets
// are explained (no recovery point: flushed whole; the log start or the
// cleaner checkpoint at or past the next base; an empty last segment,
// which settleEmptyTail decides about).
func TestOpeningEndsShort(t *testing.T) {
	tests := []struct {
		name string
		// next is the second segment: its base and its batches (none:
		// empty); third adds a last segment at 40.
		next      []span
		nextBase  int64
		third     bool
		saved     savedOffsets
		i         int
		wantShort bool
	}{
		{name: "gap above the recovery point", nextBase: 20, next: []span{{20, 5}}, saved: savedOffsets{haveRecoveryPoint: true}, wantShort: true},
		{name: "no recovery point", nextBase: 20, next: []span{{20, 5}}},
		{name: "batches reach the next base", nextBase: 10, next: []span{{10, 5}}, saved: savedOffsets{haveRecoveryPoint: true}},
		{name: "the last segment", nextBase: 20, next: []span{{20, 5}}, saved: savedOffsets{haveRecoveryPoint: true}, i: 1},
		{name: "log start at the next base", nextBase: 20, next: []span{{20, 5}},
			saved: savedOffsets{haveRecoveryPoint: true, logStart: 20, haveLogStart: true}},
		{name: "log start inside the gap", nextBase: 20, next: []span{{20, 5}},
			saved: savedOffsets{haveRecoveryPoint: true, logStart: 15, haveLogStart: true}, wantShort: true},
		{name: "cleaner checkpoint at the next base", nextBase: 20, next: []span{{20, 5}},
			saved: savedOffsets{haveRecoveryPoint: true, cleanerAt: 20}},
		{name: "cleaner checkpoint below the next base", nextBase: 20, next: []span{{20, 5}},
			saved: savedOffsets{haveRecoveryPoint: true, cleanerAt: 19}, wantShort: true},
		{name: "empty last segment after the gap", nextBase: 20, saved: savedOffsets{haveRecoveryPoint: true}},
		{name: "empty segment after the gap, not the last", nextBase: 20, third: true,
			saved: savedOffsets{haveRecoveryPoint: true}, wantShort: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newTestOpening(t, vfs.NewMem(), DefaultRecovery{})
			if tt.saved.cleanerAt == 0 {
				tt.saved.cleanerAt = -1
			}
			o.saved = tt.saved
			list := []*segment.Segment{
				testSegment(t, o, 0, false, span{0, 10}),
				testSegment(t, o, tt.nextBase, !tt.third, tt.next...),
			}
			if tt.third {
				list = append(list, testSegment(t, o, 40, true, span{40, 1}))
			}
			release(t, list)
			assert.Equal(t, tt.wantShort, o.endsShort(list, tt.i))
		})
	}
}

// TestOpeningSettleEmptyTail: an empty last segment after an offset gap
// goes (a follower's roll or a restart a crash interrupted), and an empty
// one before it after a gap too; one at or below the log start offset
// stays and every segment before it goes, with the leader epochs below
// it; one after a gap holding the log start offset stays, and so does any
// segment that holds a batch or follows without a gap.
func TestOpeningSettleEmptyTail(t *testing.T) {
	tests := []struct {
		name     string
		segs     [][]span // the segments after the first ([0, 10)): bases 20, 30, ...
		contig   bool     // the second segment starts at 10 instead of 20
		logStart int64    // -1: no checkpoint
		epochAt  int64    // a leader epoch entry's start, -1: none
		want     []int64
		// wantEpoch: the epoch entry stays.
		wantEpoch bool
		wantDirty bool
	}{
		{name: "one segment", logStart: -1, epochAt: -1, want: []int64{0}},
		{name: "empty after no gap", segs: [][]span{nil}, contig: true, logStart: -1, epochAt: 0, want: []int64{0, 10}, wantEpoch: true},
		{name: "empty after a gap", segs: [][]span{nil}, logStart: -1, epochAt: 0, want: []int64{0}, wantEpoch: true, wantDirty: true},
		{name: "two empty after gaps", segs: [][]span{nil, nil}, logStart: -1, epochAt: 0, want: []int64{0}, wantEpoch: true, wantDirty: true},
		{name: "batch after a gap", segs: [][]span{{{25, 1}}}, logStart: -1, epochAt: -1, want: []int64{0, 20}},
		{name: "log start at the empty segment", segs: [][]span{nil}, logStart: 20, epochAt: 0, want: []int64{20}, wantDirty: true},
		{name: "log start at the empty segment, epochs above", segs: [][]span{nil}, logStart: 20, epochAt: 20, want: []int64{20}, wantEpoch: true, wantDirty: true},
		{name: "log start at the empty segment without a gap", segs: [][]span{nil}, contig: true, logStart: 10, epochAt: -1, want: []int64{10}, wantDirty: true},
		{name: "log start inside the gap", segs: [][]span{nil}, logStart: 15, epochAt: 0, want: []int64{0, 20}, wantEpoch: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newTestOpening(t, vfs.NewMem(), DefaultRecovery{})
			if tt.logStart >= 0 {
				o.saved.logStart, o.saved.haveLogStart = tt.logStart, true
			}
			if tt.epochAt >= 0 {
				o.epochs.Observe(3, tt.epochAt)
			}
			list := []*segment.Segment{testSegment(t, o, 0, len(tt.segs) == 0, span{0, 10})}
			for i, batches := range tt.segs {
				b := int64(20 + 10*i)
				if tt.contig && i == 0 {
					b = 10
				}
				list = append(list, testSegment(t, o, b, i == len(tt.segs)-1, batches...))
			}
			all := bases(list)
			got, err := o.settleEmptyTail(list)
			require.NoError(t, err)
			release(t, got) // settleEmptyTail closed the segments it removed
			assert.Equal(t, tt.want, bases(got))
			_, hasEpoch := o.epochs.First()
			assert.Equal(t, tt.wantEpoch, hasEpoch, "leader epoch entry kept")
			assert.Equal(t, tt.wantDirty, o.dirDirty, "directory dirty")
			// A removed segment's files are gone.
			for _, b := range all {
				name := segment.FileName(b, segment.LogSuffix)
				_, err := o.fs.Stat(filepath.Join(openingDir, name))
				assert.Equal(t, slices.Contains(tt.want, b), err == nil, "%s exists", name)
			}
		})
	}
}

// TestOpeningCheckDirAsksOrRefuses: checkDir reads the directory and
// decides before anything is written. Damage no policy may accept (a gap
// between segments nothing explains, offsets missing below the first
// segment, a sealed segment cut short that was flushed whole, a recovery
// point past the log end after a clean shutdown) is refused without
// asking; a contradiction a policy may accept (a log start or recovery
// point or producer snapshot past the log end, an empty last segment
// after a gap after a crash) is asked about, with the event saying
// whether it is a checkpoint's and a torn tail, and the policy's refusal
// is Open's error. Either way no file changes.
func TestOpeningCheckDirAsksOrRefuses(t *testing.T) {
	type layout struct {
		firstBase  int64 // base of the first segment, of 10 records
		second     int64 // base of the second segment (0: none)
		secondN    int64 // its records (0: empty)
		junk       bool  // bytes after the first segment's batch
		snapshotAt int64 // a producer snapshot file (0: none)
		saved      savedOffsets
		clean      bool
	}
	rp := func(o int64) savedOffsets {
		return savedOffsets{recoveryPoint: o, haveRecoveryPoint: true, cleanerAt: -1}
	}
	tests := []struct {
		name   string
		layout layout
		// refused: the error wraps ErrRecoveryRefused and the policy was
		// not asked. Otherwise ask, when set, is the event's file and
		// kind (checkpoint, torn tail).
		refused              bool
		ask                  string
		askCheckpoint        bool
		askTornTail          bool
		wantDistrustLogStart bool
	}{
		{name: "contiguous segments", layout: layout{second: 10, secondN: 5, clean: true, saved: rp(15)}},
		{name: "gap nothing explains", layout: layout{second: 20, secondN: 5, clean: true, saved: rp(25)}, refused: true},
		{name: "gap the cleaner checkpoint explains",
			layout: layout{second: 20, secondN: 5, clean: true, saved: savedOffsets{recoveryPoint: 25, haveRecoveryPoint: true, cleanerAt: 20}}},
		{name: "gap below the log start",
			layout: layout{second: 20, secondN: 5, clean: true, saved: savedOffsets{recoveryPoint: 25, haveRecoveryPoint: true, logStart: 20, haveLogStart: true, cleanerAt: -1}}},
		{name: "offsets missing below the first segment",
			layout: layout{firstBase: 10, clean: true, saved: savedOffsets{logStart: 5, haveLogStart: true, cleanerAt: -1}}, refused: true},
		{name: "first segment at the log start",
			layout: layout{firstBase: 10, clean: true, saved: savedOffsets{logStart: 10, haveLogStart: true, cleanerAt: -1}}},
		{name: "sealed segment cut short, flushed whole", layout: layout{second: 10, secondN: 5, junk: true, clean: true, saved: rp(15)}, refused: true},
		{name: "recovery point past the log end after a clean shutdown", layout: layout{clean: true, saved: rp(100)}, refused: true},
		{name: "recovery point past the log end after a crash", layout: layout{saved: rp(100)},
			ask: recoveryPointCheckpointFile, askCheckpoint: true, askTornTail: true},
		{name: "log start past the log end",
			layout: layout{clean: true, saved: savedOffsets{logStart: 100, haveLogStart: true, cleanerAt: -1}},
			ask:    logStartOffsetCheckpointFile, askCheckpoint: true, wantDistrustLogStart: true},
		{name: "producer snapshot past the log end after a clean shutdown", layout: layout{clean: true, snapshotAt: 100, saved: rp(10)},
			ask: producer.SnapshotFileName(100), askCheckpoint: true},
		{name: "producer snapshot past the log end after a crash", layout: layout{snapshotAt: 100, saved: rp(10)},
			ask: producer.SnapshotFileName(100), askCheckpoint: true, askTornTail: true},
		{name: "producer snapshot at the log end", layout: layout{clean: true, snapshotAt: 10, saved: rp(10)}},
		{name: "empty last segment after a gap after a crash", layout: layout{second: 20, saved: rp(0)},
			ask: segment.FileName(20, segment.LogSuffix), askTornTail: true},
		{name: "empty last segment after a gap the recovery point reaches", layout: layout{second: 20, saved: rp(20)}},
		{name: "empty last segment after a gap after a clean shutdown", layout: layout{second: 20, clean: true, saved: rp(10)}, refused: true},
	}
	for _, tt := range tests {
		for _, answer := range []error{nil, errors.New("no")} {
			t.Run(tt.name, func(t *testing.T) {
				mem := vfs.NewMem()
				pol := &askedPolicy{answer: answer}
				o := newTestOpening(t, mem, pol)
				l := tt.layout
				first := testSegment(t, o, l.firstBase, l.second == 0, span{l.firstBase, 10})
				list := []*segment.Segment{first}
				if l.second > 0 {
					var batches []span
					if l.secondN > 0 {
						batches = []span{{l.second, l.secondN}}
					}
					list = append(list, testSegment(t, o, l.second, true, batches...))
				}
				release(t, list)
				if l.junk {
					f, err := mem.OpenReadWrite(first.LogPath())
					require.NoError(t, err)
					_, err = f.WriteAt(make([]byte, 100), first.Size())
					require.NoError(t, err)
					require.NoError(t, f.Close())
				}
				if l.snapshotAt > 0 {
					require.NoError(t, producer.WriteSnapshotFile(mem, openingDir, l.snapshotAt, nil, true))
				}
				o.saved = l.saved
				before := memFiles(t, mem, openingDir)

				dc, err := o.checkDir(l.clean)
				assert.Equal(t, before, memFiles(t, mem, openingDir), "checkDir wrote nothing")
				switch {
				case tt.refused:
					require.ErrorIs(t, err, ErrRecoveryRefused)
					assert.Empty(t, pol.events, "refused without asking the policy")
				case tt.ask == "":
					require.NoError(t, err)
					assert.Empty(t, pol.events)
				default:
					require.Len(t, pol.events, 1)
					ev := pol.events[0]
					assert.Equal(t, tt.ask, filepath.Base(ev.File))
					assert.Equal(t, tt.askCheckpoint, ev.Checkpoint, "event names a checkpoint")
					assert.Equal(t, tt.askTornTail, ev.TornTail, "event is a torn tail")
					if answer != nil {
						require.ErrorIs(t, err, answer, "the policy's refusal is Open's error")
						return
					}
					require.NoError(t, err)
					assert.Equal(t, tt.wantDistrustLogStart, dc.distrustLogStart)
				}
			})
		}
	}
}

// TestOpeningReadCheckpoints: a checkpoint that does not parse goes to the
// policy as a checkpoint event, and on acceptance the open goes on without
// it; a recovery point that does not parse after a clean shutdown is not
// asked about (the log end is the recovery point). The high watermark
// checkpoint is read only when the high watermark is the embedder's.
func TestOpeningReadCheckpoints(t *testing.T) {
	tests := []struct {
		name      string
		bad       string // the checkpoint file written unparsable
		clean     bool
		readHW    bool
		wantAsked bool
	}{
		{name: "log start", bad: logStartOffsetCheckpointFile, wantAsked: true},
		{name: "recovery point after a crash", bad: recoveryPointCheckpointFile, wantAsked: true},
		{name: "recovery point after a clean shutdown", bad: recoveryPointCheckpointFile, clean: true},
		{name: "high watermark", bad: highWatermarkCheckpointFile, readHW: true, wantAsked: true},
		{name: "high watermark not read", bad: highWatermarkCheckpointFile},
		{name: "leader epochs", bad: leaderEpochCheckpointFile, wantAsked: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := vfs.NewMem()
			pol := &askedPolicy{}
			o := newTestOpening(t, mem, pol)
			o.readHighWatermark = tt.readHW
			for _, name := range []string{logStartOffsetCheckpointFile, recoveryPointCheckpointFile, highWatermarkCheckpointFile} {
				require.NoError(t, writeOffsetCheckpoint(mem, openingDir, name, 7))
			}
			writeMemFile(t, mem, filepath.Join(openingDir, tt.bad), "0\n1\nnot a checkpoint\n")
			if tt.clean {
				require.NoError(t, checkpoint.MarkCleanShutdown(mem, openingDir))
			}
			clean, err := o.readCheckpoints(false)
			require.NoError(t, err)
			assert.Equal(t, tt.clean, clean)
			if !tt.wantAsked {
				assert.Empty(t, pol.events)
			} else {
				require.Len(t, pol.events, 1)
				assert.True(t, pol.events[0].Checkpoint)
				assert.Equal(t, tt.bad, filepath.Base(pol.events[0].File))
			}
			s := o.saved
			assert.Equal(t, tt.bad != logStartOffsetCheckpointFile, s.haveLogStart)
			assert.Equal(t, tt.bad != recoveryPointCheckpointFile, s.haveRecoveryPoint)
			assert.Equal(t, tt.readHW && tt.bad != highWatermarkCheckpointFile, s.haveHighWatermark)

			// The policy's refusal is the open's error.
			pol.answer, pol.events = errors.New("no"), nil
			o = newTestOpening(t, mem, pol)
			o.readHighWatermark = tt.readHW
			_, err = o.readCheckpoints(false)
			if tt.wantAsked {
				require.ErrorIs(t, err, pol.answer)
			} else {
				require.NoError(t, err)
			}
		})
	}
}
