package log_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// TestCrashAfterRollBeforeFlush is the recovery rule for the unsynced
// region: a roll leaves the flush of the segment it seals to the
// background, so a crash before that flush can leave a sealed segment
// above the recovery point cut short (its unsynced tail lost, at a batch
// boundary or inside a batch) while the next segment's file exists with
// batches in it. Open must then cut the log at the first segment that
// ends early and remove every later one: the log is a prefix of what was
// appended (every synced batch, here none above the recovery point, is
// there). A segment whose batches reach the next one's base lost nothing:
// bytes after them are cut and the later segments stay. The same damage
// below the recovery point (after the rolls' flush ran) is real damage and
// refused, under every policy.
func TestCrashAfterRollBeforeFlush(t *testing.T) {
	const dir = "/kafka/roll-crash-0"
	build := func(t *testing.T, flushRolls bool) (*vfs.MemFS, *logtest.Model, []plog.SegmentInfo) {
		return crashedAfterRolls(t, dir, flushRolls)
	}
	seg1 := func(infos []plog.SegmentInfo) string {
		return filepath.Join(dir, segment.FileName(infos[1].BaseOffset, segment.LogSuffix))
	}
	// batchEnds returns the byte positions where segment 1's batches end.
	batchEnds := func(t *testing.T, fs *vfs.MemFS, infos []plog.SegmentInfo) []int64 {
		f, err := fs.Open(seg1(infos))
		require.NoError(t, err)
		defer f.Close()
		st, err := f.Stat()
		require.NoError(t, err)
		data := make([]byte, st.Size())
		_, err = f.ReadAt(data, 0)
		require.NoError(t, err)
		var ends []int64
		for pos := int64(0); len(data) > 0; {
			b, rest, err := batch.Parse(data)
			require.NoError(t, err)
			pos += int64(len(b))
			ends = append(ends, pos)
			data = rest
		}
		require.GreaterOrEqual(t, len(ends), 2)
		return ends
	}
	truncate := func(t *testing.T, fs *vfs.MemFS, path string, size int64) {
		f, err := fs.OpenReadWrite(path)
		require.NoError(t, err)
		require.NoError(t, f.Truncate(size))
		require.NoError(t, f.Sync())
		require.NoError(t, f.Close())
	}
	appendBytes := func(t *testing.T, fs *vfs.MemFS, path string, b []byte) {
		f, err := fs.OpenReadWrite(path)
		require.NoError(t, err)
		st, err := f.Stat()
		require.NoError(t, err)
		_, err = f.WriteAt(b, st.Size())
		require.NoError(t, err)
		require.NoError(t, f.Sync())
		require.NoError(t, f.Close())
	}

	type damage struct {
		name string
		do   func(t *testing.T, fs *vfs.MemFS, infos []plog.SegmentInfo)
		// lost: the log must end at segment 1's first batch end (a
		// prefix); else nothing is lost.
		lost bool
	}
	damages := []damage{
		{"short at a batch boundary", func(t *testing.T, fs *vfs.MemFS, infos []plog.SegmentInfo) {
			truncate(t, fs, seg1(infos), batchEnds(t, fs, infos)[0])
		}, true},
		{"torn inside a batch", func(t *testing.T, fs *vfs.MemFS, infos []plog.SegmentInfo) {
			truncate(t, fs, seg1(infos), batchEnds(t, fs, infos)[0]+17)
		}, true},
		{"complete, zeros after its batches", func(t *testing.T, fs *vfs.MemFS, infos []plog.SegmentInfo) {
			appendBytes(t, fs, seg1(infos), make([]byte, 300))
		}, false},
	}
	for _, d := range damages {
		t.Run(d.name, func(t *testing.T) {
			for _, pol := range []struct {
				name   string
				policy plog.RecoveryPolicy
				opens  bool
			}{
				{"default", plog.DefaultRecovery{}, true},
				{"strict, torn tails allowed", plog.StrictRecovery{AllowTornTail: true}, true},
				{"strict", plog.StrictRecovery{}, false},
			} {
				t.Run(pol.name, func(t *testing.T) {
					state, m, infos := build(t, false)
					d.do(t, state, infos)
					var events []plog.RecoveryEvent
					p, err := plog.Open(dir, plog.Config{FS: state, SegmentIndexBytes: memIndexBytes, Recovery: recordingPolicy{&events, pol.policy}})
					if !pol.opens {
						require.ErrorIs(t, err, plog.ErrRecoveryRefused)
						require.ErrorIs(t, err, base.ErrCorrupt)
						return
					}
					require.NoError(t, err)
					defer p.Close()
					require.NotEmpty(t, events)
					for _, ev := range events {
						assert.True(t, ev.TornTail, "above the recovery point the end of a segment is a torn tail: %+v", ev)
						assert.Equal(t, seg1(infos), ev.File)
					}
					want := m.LogEndOffset()
					if d.lost {
						want = infos[1].BaseOffset + 2 // its first batch
						assert.Equal(t, len(infos)-2, events[0].LaterSegments, "every later segment removed")
						assert.Len(t, p.SegmentInfos(), 2)
					} else {
						assert.Zero(t, events[0].LaterSegments, "a complete segment keeps the later ones")
						assert.Len(t, p.SegmentInfos(), len(infos))
					}
					require.Equal(t, want, p.LogEndOffset())
					require.NoError(t, m.Crash(p.LogEndOffset(), p.HighWatermark()), "a prefix of what was appended")
					require.NoError(t, logtest.Check(p, m))
					// The log goes on from there.
					off, err := p.AppendBatch(logtest.MakeBatch(1, 5, 2000, 1))
					require.NoError(t, err)
					require.Equal(t, want, off)
				})
			}
		})
	}

	// Below the recovery point (the rolls' flush ran: every sealed
	// segment was durable) a short sealed segment is damage, whatever the
	// policy.
	for _, d := range damages[:2] {
		t.Run("below the recovery point: "+d.name, func(t *testing.T) {
			state, _, infos := build(t, true)
			d.do(t, state, infos)
			_, err := plog.Open(dir, plog.Config{FS: state, SegmentIndexBytes: memIndexBytes})
			require.ErrorIs(t, err, plog.ErrRecoveryRefused)
			require.ErrorIs(t, err, base.ErrCorrupt)
		})
	}
}

// TestCrashKeepsCompactedSegmentAboveRecoveryPoint: a crashed directory
// Kafka wrote may hold segments its cleaner rewrote above its recovery
// point (Kafka's cleaner, unlike partlog's Compact, does not move the
// recovery point first). Such a segment ends before the next one's base,
// and may have offset gaps inside, yet lost nothing: the cleaner synced it
// before it replaced the old one, and the cleaner checkpoint reaching the
// next base says so. Open must keep it and every later segment under every
// policy; the unsynced-region rule (TestCrashAfterRollBeforeFlush) must
// still cut a short segment the checkpoint does not cover.
func TestCrashKeepsCompactedSegmentAboveRecoveryPoint(t *testing.T) {
	const dir = "/kafka/compacted-crash-0"
	build := func(t *testing.T) (*vfs.MemFS, *logtest.Model, []plog.SegmentInfo) {
		return crashedAfterRolls(t, dir, false) // every segment above the recovery point
	}
	seg1 := func(infos []plog.SegmentInfo) string {
		return filepath.Join(dir, segment.FileName(infos[1].BaseOffset, segment.LogSuffix))
	}
	rewrite := func(t *testing.T, fs *vfs.MemFS, infos []plog.SegmentInfo, keep func(i, n int) bool) {
		keepBatches(t, fs, seg1(infos), keep)
	}
	cleaned := func(t *testing.T, fs *vfs.MemFS, upTo int64) {
		topic, part := checkpoint.EntryName(dir)
		require.NoError(t, checkpoint.WriteOffset(fs, filepath.Join(dir, plog.CleanerCheckpointFile), topic, part, upTo))
	}
	for _, shape := range []struct {
		name string
		keep func(i, n int) bool
	}{
		{"its last batches removed", func(i, n int) bool { return i == 0 }},
		{"a middle batch removed and its last", func(i, n int) bool { return i != 1 && i != n-1 }},
	} {
		for _, pol := range []struct {
			name   string
			policy plog.RecoveryPolicy
		}{
			{"default", plog.DefaultRecovery{}},
			{"strict, torn tails allowed", plog.StrictRecovery{AllowTornTail: true}},
			{"strict", plog.StrictRecovery{}},
		} {
			t.Run(shape.name+"/"+pol.name, func(t *testing.T) {
				state, m, infos := build(t)
				rewrite(t, state, infos, shape.keep)
				cleaned(t, state, infos[2].BaseOffset)
				var events []plog.RecoveryEvent
				p, err := plog.Open(dir, plog.Config{FS: state, SegmentIndexBytes: memIndexBytes, Recovery: recordingPolicy{&events, pol.policy}})
				require.NoError(t, err)
				defer p.Close()
				assert.Empty(t, events, "nothing is damaged")
				require.Len(t, p.SegmentInfos(), len(infos), "every segment kept")
				require.Equal(t, m.LogEndOffset(), p.LogEndOffset())
				// The offsets the cleaner removed read as the next
				// batch kept, as in any compacted log.
				r, err := p.ReadFrom(infos[2].BaseOffset-1, 1<<20)
				require.NoError(t, err)
				defer r.Close()
				var first int64 = -1
				for b, err := range r.Batches() {
					require.NoError(t, err)
					first = b.BaseOffset()
					break
				}
				require.Equal(t, infos[2].BaseOffset, first)
			})
		}
	}
	// A checkpoint short of the next base explains nothing: the short
	// segment is the unsynced region's lost tail and the log is cut there.
	t.Run("checkpoint below the next base", func(t *testing.T) {
		state, _, infos := build(t)
		rewrite(t, state, infos, func(i, n int) bool { return i == 0 })
		cleaned(t, state, infos[2].BaseOffset-1)
		p, err := plog.Open(dir, plog.Config{FS: state, SegmentIndexBytes: memIndexBytes})
		require.NoError(t, err)
		defer p.Close()
		require.Equal(t, infos[1].BaseOffset+2, p.LogEndOffset(), "cut after segment 1's first batch")
		require.Len(t, p.SegmentInfos(), 2)
	})
}

// threeBatchSegments is the configuration of the roll-crash tests' MemFS
// partitions: segments of three batches of 2 records of 20 bytes (and
// room to spare), 4 KiB indexes, and the rolls' background flush left to
// the test (WithManualRollFlush).
func threeBatchSegments(mem *vfs.MemFS) plog.Config {
	return plog.WithManualRollFlush(plog.Config{FS: mem, SegmentBytes: 3*(batch.HeaderSize+2*30) + 60, SegmentIndexBytes: memIndexBytes})
}

// crashedAfterRolls appends 14 batches of 2 records to a new partition in
// dir on a MemFS, rolling into 4 sealed segments of 3 batches and an
// active one, with the rolls' flush run (flushRolls: the recovery point
// at the active segment's base) or not (it stays 0), and returns the
// state a crash leaves that keeps everything written, the model and the
// segments.
func crashedAfterRolls(t *testing.T, dir string, flushRolls bool) (*vfs.MemFS, *logtest.Model, []plog.SegmentInfo) {
	t.Helper()
	mem := vfs.NewMem()
	p, err := plog.Open(dir, threeBatchSegments(mem))
	require.NoError(t, err)
	m := logtest.NewModel(0, false)
	for i := range 14 {
		b := logtest.MakeBatch(2, 20, int64(1000+i), byte(i))
		off, err := p.AppendBatch(b)
		require.NoError(t, err)
		require.NoError(t, m.AppendBatch(b, off))
	}
	infos := p.SegmentInfos()
	require.GreaterOrEqual(t, len(infos), 4)
	flushRollsOrNot(t, p, infos, flushRolls)
	clone := mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 100})
	require.NoError(t, p.Close())
	return clone, m, infos
}

// keepBatches rewrites the .log at path with the batches keep selects
// (batch i of n), synced, as a cleaner's output replaces a segment.
func keepBatches(t *testing.T, fs *vfs.MemFS, path string, keep func(i, n int) bool) {
	t.Helper()
	f, err := fs.OpenReadWrite(path)
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	st, err := f.Stat()
	require.NoError(t, err)
	data := make([]byte, st.Size())
	_, err = f.ReadAt(data, 0)
	require.NoError(t, err)
	var all [][]byte
	for rest := data; len(rest) > 0; {
		b, r, err := batch.Parse(rest)
		require.NoError(t, err)
		all = append(all, b)
		rest = r
	}
	require.GreaterOrEqual(t, len(all), 3)
	var out []byte
	for i, b := range all {
		if keep(i, len(all)) {
			out = append(out, b...)
		}
	}
	require.NoError(t, f.Truncate(0))
	_, err = f.WriteAt(out, 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
}

// TestCrashKeepsCompactedSegmentAboveRecoveryPointDir is the same rule
// read through a Dir, Kafka's layout: the recovery point and the cleaner
// offset come from the root checkpoint files a Kafka broker writes, as in
// a crashed log directory Kafka left (no .kafka_cleanshutdown).
func TestCrashKeepsCompactedSegmentAboveRecoveryPointDir(t *testing.T) {
	const root, topic, part = "/data", "orders", 3
	pdir := filepath.Join(root, "orders-3")
	mem := vfs.NewMem()
	p, err := plog.Open(pdir, threeBatchSegments(mem))
	require.NoError(t, err)
	for i := range 14 {
		_, err := p.AppendBatch(logtest.MakeBatch(2, 20, int64(1000+i), byte(i)))
		require.NoError(t, err)
	}
	infos := p.SegmentInfos()
	require.GreaterOrEqual(t, len(infos), 4)
	end := p.LogEndOffset()
	for _, cleanerAt := range []int64{infos[2].BaseOffset, infos[2].BaseOffset - 1} {
		state := mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 100})
		// Segment 1 as Kafka's cleaner leaves it (its last batches
		// removed); the partition directory's own checkpoints go, and
		// the root's say what a Kafka broker's would.
		keepBatches(t, state, filepath.Join(pdir, segment.FileName(infos[1].BaseOffset, segment.LogSuffix)), func(i, n int) bool { return i == 0 })
		names, err := state.List(pdir)
		require.NoError(t, err)
		for _, n := range names {
			if strings.HasSuffix(n, "checkpoint") {
				require.NoError(t, state.Remove(filepath.Join(pdir, n)))
			}
		}
		require.NoError(t, checkpoint.WriteOffsets(state, filepath.Join(root, "recovery-point-offset-checkpoint"),
			[]checkpoint.PartitionOffset{{Topic: topic, Partition: part, Offset: 0}}))
		require.NoError(t, checkpoint.WriteOffsets(state, filepath.Join(root, plog.CleanerCheckpointFile),
			[]checkpoint.PartitionOffset{{Topic: topic, Partition: part, Offset: cleanerAt}}))
		d, err := plog.OpenDir(root, plog.DirConfig{Config: plog.Config{FS: state, SegmentIndexBytes: memIndexBytes}})
		require.NoError(t, err)
		dp := d.Partition(topic, part)
		require.NotNil(t, dp)
		if cleanerAt >= infos[2].BaseOffset {
			assert.Equal(t, end, dp.LogEndOffset(), "the compacted segment and every later one kept")
			assert.Len(t, dp.SegmentInfos(), len(infos))
		} else {
			assert.Equal(t, infos[1].BaseOffset+2, dp.LogEndOffset(), "not covered by the checkpoint: the lost tail of the unsynced region, cut")
			assert.Len(t, dp.SegmentInfos(), 2)
		}
		require.NoError(t, d.Close())
	}
	require.NoError(t, p.Close())
}

// TestCleanerCheckpointAboveLogEndAfterFailedTruncation: a TruncateTo to
// an offset in a gap of a compacted segment lowers the cleaner checkpoint
// to that offset first and, once the cut shows the log ends lower, to the
// log end. When that second write fails (or a crash comes before it) the
// checkpoint is left above the log end, and Open must not leave it there:
// segments rolled later below it are no compaction's, and a crash that
// loses such a segment's unsynced tail must still cut the log there
// (compactedGap would otherwise keep the later segments behind a hole).
func TestCleanerCheckpointAboveLogEndAfterFailedTruncation(t *testing.T) {
	const dir = "/data/cleaner-above-end-0"
	mem := vfs.NewMem()
	in := vfs.NewInjector(mem)
	cfg := plog.WithManualRollFlush(plog.Config{FS: in})
	at := func(base int64, seed byte) []byte {
		b := logtest.MakeBatch(2, 20, 1000+base, seed)
		batch.Batch(b).SetBaseOffset(base)
		return b
	}
	// A compacted segment [0, 22) holding 0-1 and 20-21, and the next
	// one from 22; the cleaner checkpoint at 22 (a compaction's).
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	for _, b := range [][]byte{at(0, 1), at(20, 2)} {
		_, err := p.AppendAssigned(b)
		require.NoError(t, err)
	}
	require.NoError(t, p.Roll())
	_, err = p.AppendAssigned(at(22, 3))
	require.NoError(t, err)
	require.NoError(t, p.Close())
	topic, part := checkpoint.EntryName(dir)
	cleanerPath := filepath.Join(dir, plog.CleanerCheckpointFile)
	require.NoError(t, checkpoint.WriteOffset(mem, cleanerPath, topic, part, 22))

	// TruncateTo(10): the checkpoint goes to 10, segment 22 goes, the
	// cut leaves 0-1; lowering the checkpoint to 2 then fails.
	p, err = plog.Open(dir, cfg)
	require.NoError(t, err)
	var cut atomic.Bool
	in.SetHook(func(op vfs.Op) error {
		switch {
		case op.Kind == vfs.OpTruncate && strings.HasSuffix(op.Path, segment.LogSuffix):
			cut.Store(true)
		case cut.Load() && strings.Contains(op.Path, plog.CleanerCheckpointFile):
			return vfs.ErrInjected
		}
		return nil
	})
	require.ErrorIs(t, p.TruncateTo(10), plog.ErrFailed)
	in.SetHook(nil)
	state := mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 100})
	require.ErrorIs(t, p.Close(), plog.ErrFailed)

	// Reopened: the log ends at 2. Two batches, a roll at 6 (below the
	// stale checkpoint), one more batch; nothing synced.
	q, err := plog.Open(dir, plog.WithManualRollFlush(plog.Config{FS: state}))
	require.NoError(t, err)
	require.Equal(t, int64(2), q.LogEndOffset())
	if off, found, err := checkpoint.ReadOffset(state, cleanerPath, topic, part); err == nil && found {
		require.LessOrEqual(t, off, q.LogEndOffset(), "the cleaner checkpoint is above the log end after Open")
	}
	seg0 := filepath.Join(dir, segment.FileName(0, segment.LogSuffix))
	st, err := state.Stat(seg0)
	require.NoError(t, err)
	synced := st.Size()
	for i := range 2 {
		_, err := q.AppendBatch(logtest.MakeBatch(2, 20, 2000, byte(10+i)))
		require.NoError(t, err)
	}
	require.NoError(t, q.Roll())
	_, err = q.AppendBatch(logtest.MakeBatch(2, 20, 2000, 12))
	require.NoError(t, err)
	infos := q.SegmentInfos()
	require.Len(t, infos, 2)
	require.Equal(t, int64(6), infos[1].BaseOffset)

	// A crash keeps the new segment's writes but not segment 0's
	// unsynced tail (each file's writes survive on their own).
	crashed := state.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 100})
	require.NoError(t, q.Close())
	f, err := crashed.OpenReadWrite(seg0)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(synced))
	require.NoError(t, f.Close())

	r, err := plog.Open(dir, plog.Config{FS: crashed})
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close()) }()
	got := r.SegmentInfos()
	for i := 0; i+1 < len(got); i++ {
		require.Equal(t, got[i].NextOffset, got[i+1].BaseOffset, "a hole after segment %d: offsets %d to %d lost, later ones kept", got[i].BaseOffset, got[i].NextOffset, got[i+1].BaseOffset)
	}
	require.Equal(t, int64(2), r.LogEndOffset(), "the log is cut where segment 0's lost tail began")
}

// TestCompactionCheckpointCoversOnlyDurableSegments: a compaction round
// records the cleaner checkpoint its Cleaner planned, and Open takes a
// segment that ends before the next one's base at or below it for a
// compaction's (compactedGap). A round that rewrites nothing (each segment
// alone, nothing removed) flushes nothing, so the checkpoint could cover
// sealed segments whose roll's flush had not run, and (planned up to the
// high watermark) the active segment, which the next roll seals with its
// tail unsynced: crashes that lose such a tail and keep a later segment's
// writes left holes. Every crash must leave a prefix holding what was
// synced.
func TestCompactionCheckpointCoversOnlyDurableSegments(t *testing.T) {
	const dir = "/data/cleaned-unsynced-0"
	for _, roll := range []bool{false, true} {
		t.Run(map[bool]string{false: "crash after the round", true: "crash after a roll and an append"}[roll], func(t *testing.T) {
			mem := vfs.NewMem()
			p, err := plog.Open(dir, threeBatchSegments(mem))
			require.NoError(t, err)
			for i := range 8 {
				// Segments [0, 6), [6, 12) and the active one from 12;
				// 0-3 synced, the rest not (no roll's flush runs).
				_, err := p.AppendBatch(logtest.MakeBatch(2, 20, int64(1000+i), byte(i)))
				require.NoError(t, err)
				if i == 1 {
					require.NoError(t, p.Sync())
				}
			}
			require.Len(t, p.SegmentInfos(), 3)
			_, err = p.Compact(context.Background(), keepAllCleaner{})
			require.NoError(t, err)
			if roll {
				require.NoError(t, p.Roll())
				_, err := p.AppendBatch(logtest.MakeBatch(2, 20, 1008, 8))
				require.NoError(t, err)
			}
			var crashes []*vfs.MemFS
			for seed := range uint64(64) {
				crashes = append(crashes, mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 50, Seed: seed}))
			}
			require.NoError(t, p.Close())
			for seed, fs := range crashes {
				r, err := plog.Open(dir, plog.Config{FS: fs, SegmentIndexBytes: memIndexBytes})
				require.NoError(t, err, "seed %d", seed)
				got := r.SegmentInfos()
				for i := 0; i+1 < len(got); i++ {
					require.Equal(t, got[i].NextOffset, got[i+1].BaseOffset, "seed %d: a hole after segment %d: offsets %d to %d lost, later ones kept",
						seed, got[i].BaseOffset, got[i].NextOffset, got[i+1].BaseOffset)
				}
				require.GreaterOrEqual(t, r.LogEndOffset(), int64(4), "seed %d: synced batches lost", seed)
				require.NoError(t, r.Close())
			}
		})
	}
}
