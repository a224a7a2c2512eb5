package log

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/index/vfs/vfstest"
)

// tierInternalConfig is a tiered Dir on fs whose store is a directory of
// fs, with the manual roll flush (the test decides when rolled segments
// become durable).
func tierInternalConfig(fs vfs.FS, localBytes int64) DirConfig {
	return DirConfig{
		Config: Config{FS: fs, SegmentBytes: 1024, SegmentIndexBytes: 1024, manualRollFlush: true,
			Logger: slog.New(slog.DiscardHandler)},
		Remote: &RemoteConfig{Storage: NewDirRemoteStorage("/remote", fs), LocalRetentionBytes: localBytes,
			Interval: time.Hour, ChunkBytes: 700, CacheBytes: 4 << 10},
	}
}

// tierTestBatch is a one-record batch of timestamp ts.
func tierTestBatch(t *testing.T, ts int64, seed byte) []byte {
	t.Helper()
	bld := batch.NewBuilder(batch.BuilderOptions{PartitionLeaderEpoch: batch.NoPartitionLeaderEpoch})
	require.NoError(t, bld.AddAt(batch.Record{Offset: 0, Key: []byte("k"), Value: []byte{seed, seed + 1, seed + 2}, Timestamp: ts}))
	b, err := bld.Build()
	require.NoError(t, err)
	return b
}

// TestTierCopiesOnlyDurableSegments: under the default flush policy the
// high watermark is the log end, but a sealed segment is copied only once
// a flush made it durable (the recovery point passed it): a machine crash
// never leaves copies recorded past the log end.
func TestTierCopiesOnlyDurableSegments(t *testing.T) {
	mem := vfstest.NewMem()
	d, err := OpenDir("/data", tierInternalConfig(mem, 0))
	require.NoError(t, err)
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	for i := range 120 {
		_, err := p.AppendBatch(tierTestBatch(t, 1000+int64(i), byte(i)))
		require.NoError(t, err)
	}
	d.RunTierPass()
	assert.Equal(t, int64(-1), p.tierPart.Load().meta.Load().copiedEnd(), "nothing is durable yet")

	state := mem.CrashClone(vfstest.CrashOptions{}) // exactly the synced state
	d2, err := OpenDir("/data", tierInternalConfig(state, 0))
	require.NoError(t, err)
	p2 := d2.Partition("t", 0)
	assert.LessOrEqual(t, p2.tierPart.Load().meta.Load().copiedEnd(), p2.LogEndOffset())
	require.NoError(t, d2.Close())

	require.NoError(t, p.FlushRolled())
	d.RunTierPass()
	copied := p.tierPart.Load().meta.Load().copiedEnd()
	assert.Positive(t, copied, "copied once the roll flush made the sealed segments durable")
	assert.LessOrEqual(t, copied, p.RecoveryPoint())
	require.NoError(t, d.Close())
}

// TestTierAttachDropsCopiesPastLogEnd: copies recorded past the log end
// (a crash took the end of the log) are dropped when the partition opens,
// durably, and deleted from the store by the next pass.
func TestTierAttachDropsCopiesPastLogEnd(t *testing.T) {
	mem := vfstest.NewMem()
	cfg := tierInternalConfig(mem, 0)
	d, err := OpenDir("/data", cfg)
	require.NoError(t, err)
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	for i := range 60 {
		_, err := p.AppendBatch(tierTestBatch(t, 1000+int64(i), byte(i)))
		require.NoError(t, err)
	}
	require.NoError(t, p.Sync())
	d.RunTierPass()
	m := p.tierPart.Load().meta.Load()
	require.NotEmpty(t, m.segs)
	end := p.LogEndOffset()
	dir := p.dir
	require.NoError(t, d.Close())

	// A copy of offsets the log does not hold: [end-5, end+20].
	st := cfg.Remote.Storage
	md := RemoteSegmentMetadata{ID: NewRemoteSegmentID(TopicPartition{"t", 0}), BaseOffset: m.copiedEnd(),
		EndOffset: end + 20, MaxTimestamp: 1, Size: 3}
	require.NoError(t, st.CopySegment(t.Context(), md, RemoteSegmentData{Segment: strings.NewReader("abc")}))
	stale := m.clone()
	stale.segs = append(stale.segs, remoteEntry{state: remoteCopied, desc: md})
	require.NoError(t, stale.store(mem, dir))

	d, err = OpenDir("/data", cfg)
	require.NoError(t, err)
	p = d.Partition("t", 0)
	assert.Equal(t, m.copiedEnd(), p.tierPart.Load().meta.Load().copiedEnd(), "the copy past the log end is not in use")
	onDisk, err := loadRemoteMeta(mem, dir, TopicPartition{"t", 0})
	require.NoError(t, err)
	require.Len(t, onDisk.segs, len(stale.segs))
	assert.Equal(t, remoteDeleting, onDisk.segs[len(onDisk.segs)-1].state, "dropped durably at open")
	d.RunTierPass()
	_, err = st.FetchSegment(t.Context(), md.ID, 0, -1)
	require.ErrorIs(t, err, ErrRemoteSegmentNotFound, "the next pass deletes it")
	assert.Equal(t, -1, p.tierPart.Load().meta.Load().index(md.ID))
	require.NoError(t, d.Close())
}

// TestTierCopyCarriesPendingRollSnapshot: a segment's copy carries the
// producer snapshot at its end even while the roll's snapshot is still in
// memory (its background flush has not written the file): the copier
// reads it through the partition's locks, as ProducerSnapshot does.
func TestTierCopyCarriesPendingRollSnapshot(t *testing.T) {
	mem := vfstest.NewMem()
	cfg := tierInternalConfig(mem, 0)
	d, err := OpenDir("/data", cfg)
	require.NoError(t, err)
	defer d.Close()
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	for i := range 30 {
		_, err := p.AppendBatch(tierTestBatch(t, 1000+int64(i), byte(i)))
		require.NoError(t, err)
	}
	segs, err := p.segmentRefs()
	require.NoError(t, err)
	active := segs[len(segs)-1].BaseOffset()
	for _, s := range segs {
		require.NoError(t, s.Unref())
	}
	// The sealed segments made durable without the roll's flush, whose
	// snapshots stay pending.
	p.flushMu.Lock()
	p.dur.raiseRecoveryPoint(active, p.truncations.Load())
	p.flushMu.Unlock()
	d.RunTierPass()
	m := p.tierPart.Load().meta.Load()
	require.NotEmpty(t, m.segs)
	first := m.segs[0].desc
	want, err := p.ProducerSnapshot(first.EndOffset + 1)
	require.NoError(t, err)
	rc, err := cfg.Remote.Storage.FetchIndex(t.Context(), first.ID, RemoteProducerSnapshot)
	require.NoError(t, err)
	got, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	assert.Equal(t, want, got, "the copy's producer snapshot")
}

// TestTierOpenFinishesDeleteRecords: a crash after DeleteRecordsBefore
// recorded the whole log's start in the remote log metadata and before it
// moved the local log start leaves the first above the second; opening the
// Dir finishes the move, so the local records below it are not served
// either.
func TestTierOpenFinishesDeleteRecords(t *testing.T) {
	for _, manualHW := range []bool{false, true} {
		t.Run(fmt.Sprintf("DisableAutoHighWatermark %v", manualHW), func(t *testing.T) {
			mem := vfstest.NewMem()
			cfg := tierInternalConfig(mem, 0)
			cfg.Config.DisableAutoHighWatermark = manualHW
			d, err := OpenDir("/data", cfg)
			require.NoError(t, err)
			p, err := d.CreatePartition("t", 0)
			require.NoError(t, err)
			for i := range 60 {
				_, err := p.AppendBatch(tierTestBatch(t, 1000+int64(i), byte(i)))
				require.NoError(t, err)
			}
			if manualHW {
				// The high watermark's checkpoint lags behind it: a crash
				// leaves 10, below the start DeleteRecordsBefore recorded.
				require.NoError(t, p.SetHighWatermark(10))
			}
			require.NoError(t, p.Sync())
			if manualHW {
				require.NoError(t, p.SetHighWatermark(60))
			}
			d.RunTierPass()
			require.Positive(t, p.Stats().Remote.Segments)
			require.Zero(t, p.LogStartOffset())

			// DeleteRecordsBefore(25)'s first durable step alone.
			p.lockWriter()
			err = p.tierPart.Load().moveStart(25)
			p.mu.Unlock()
			require.NoError(t, err)
			state := mem.CrashClone(vfstest.CrashOptions{})
			require.NoError(t, d.Close())

			cfg = tierInternalConfig(state, 0)
			cfg.Config.DisableAutoHighWatermark = manualHW
			d, err = OpenDir("/data", cfg)
			require.NoError(t, err)
			defer d.Close()
			p = d.Partition("t", 0)
			assert.Equal(t, int64(25), p.LogStartOffset(), "the open finished moving the local log start")
			assert.GreaterOrEqual(t, p.HighWatermark(), int64(25), "never below the log start")
			to, _, err := p.OffsetForTimestamp(EarliestTimestamp)
			require.NoError(t, err)
			assert.Equal(t, int64(25), to.Offset)
			_, err = p.ReadFrom(10, 1)
			require.ErrorIs(t, err, ErrOffsetOutOfRange)
		})
	}
}

// TestTierCopyListedBeforeDeleteRecords: a pass lists a segment, then
// DeleteRecordsBefore moves the whole log's start past it (and deletes it
// locally) before the pass records its copy: the copy is abandoned, never
// recorded, so no copy in use lies wholly below the start.
func TestTierCopyListedBeforeDeleteRecords(t *testing.T) {
	mem := vfstest.NewMem()
	d, err := OpenDir("/data", tierInternalConfig(mem, 0))
	require.NoError(t, err)
	defer d.Close()
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	for i := range 60 {
		_, err := p.AppendBatch(tierTestBatch(t, 1000+int64(i), byte(i)))
		require.NoError(t, err)
	}
	require.NoError(t, p.Sync())
	pt := p.tierPart.Load()
	// What a pass's copyEligible takes before its copies.
	pt.metaMu.Lock()
	cuts := pt.cuts
	pt.metaMu.Unlock()
	segs, err := p.segmentRefs()
	require.NoError(t, err)
	defer func() {
		for _, s := range segs {
			require.NoError(t, s.Unref())
		}
	}()
	second := segs[1]
	require.NoError(t, p.DeleteRecordsBefore(second.NextOffset()+1))

	err = pt.copySegment(t.Context(), second, cuts)
	require.ErrorIs(t, err, errCutDuringCopy)
	for _, e := range pt.meta.Load().segs {
		assert.NotEqual(t, remoteCopied, e.state, "copy of %d..%d", e.desc.BaseOffset, e.desc.EndOffset)
	}
}
