package log_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// TestStats checks every counter and gauge against what the test did.
func TestStats(t *testing.T) {
	p, _ := openT(t, plog.Config{SegmentBytes: 4096, FlushMessages: 1})
	s := p.Stats()
	require.True(t, s.Recovery.Clean, "a new directory needs no recovery")
	require.Equal(t, 1, s.Segments)
	require.Zero(t, s.Size)

	var bytes, records int64
	for i := range 20 {
		b := logtest.MakeBatch(1+i%3, 300, int64(i), byte(i))
		_, err := p.AppendBatch(b)
		require.NoError(t, err)
		bytes += int64(len(b))
		records += int64(1 + i%3)
	}
	s = p.Stats()
	require.Equal(t, int64(20), s.BatchesAppended)
	require.Equal(t, records, s.RecordsAppended)
	require.Equal(t, bytes, s.BytesAppended)
	require.Equal(t, bytes, s.Size)
	require.Equal(t, records, s.LogEndOffset)
	require.Equal(t, records, s.HighWatermark)
	require.Zero(t, s.LogStartOffset)
	infos := p.SegmentInfos()
	require.Equal(t, len(infos), s.Segments)
	require.Equal(t, int64(len(infos)-1), s.Rolls)
	require.Greater(t, s.Rolls, int64(0), "the test must roll")
	// Every append waited for a group fdatasync; each roll flushed the
	// segment it sealed.
	require.GreaterOrEqual(t, s.Syncs, int64(20))
	require.Positive(t, s.SyncTime)
	require.False(t, s.Failed)

	r1, err := p.ReadFrom(0, 100)
	require.NoError(t, err)
	r2, err := p.ReadFrom(records-1, 100)
	require.NoError(t, err)
	empty, err := p.ReadFrom(records, 100)
	require.NoError(t, err)
	require.Equal(t, int64(2), p.Stats().OpenReaders, "an empty result holds no segment")
	require.NoError(t, r1.Close())
	require.NoError(t, r2.Close())
	require.NoError(t, empty.Close())
	require.Zero(t, p.Stats().OpenReaders)

	require.NoError(t, p.TruncateTo(records-1))
	require.Equal(t, int64(1), p.Stats().Truncations)
}

// TestStatsTruncationsCountsTruncateTo: Stats.Truncations counts the
// TruncateTo calls that cut the log, as its doc says, those that restart
// it below the log start included; a TruncateTo that cuts nothing and
// TruncateFullyAndStartAt (below or above the log end) are not counted.
// The restarts used to be counted too.
func TestStatsTruncationsCountsTruncateTo(t *testing.T) {
	p, _ := openMem(t, plog.Config{})
	appendN := func(n int) {
		for range n {
			_, err := p.AppendBatch(logtest.MakeBatch(1, 10, 0, 1))
			require.NoError(t, err)
		}
	}
	appendN(10)
	require.NoError(t, p.TruncateTo(20))
	require.Zero(t, p.Stats().Truncations, "nothing cut")
	require.NoError(t, p.TruncateTo(5))
	require.Equal(t, int64(1), p.Stats().Truncations)
	require.NoError(t, p.TruncateFullyAndStartAt(100))
	require.Equal(t, int64(1), p.Stats().Truncations, "a restart above the log end")
	appendN(10) // 100-109
	require.NoError(t, p.TruncateFullyAndStartAt(105))
	require.Equal(t, int64(1), p.Stats().Truncations, "a restart below the log end")
	appendN(10) // 105-114
	require.NoError(t, p.TruncateTo(50))
	require.Equal(t, int64(50), p.LogStartOffset())
	require.Equal(t, int64(2), p.Stats().Truncations, "a TruncateTo below the log start")
}

// TestStatsRecovery: an unclean Open reports the bytes it validated and
// what it cut.
func TestStatsRecovery(t *testing.T) {
	dir, _, segs := corruptionFixture(t)
	makeUnclean(t, dir)
	third := segs[2]
	pos := batchPositions(t, filepath.Join(dir, segment.FileName(third.BaseOffset, segment.LogSuffix)))
	flipByte(t, filepath.Join(dir, segment.FileName(third.BaseOffset, segment.LogSuffix)), pos[1]+20)

	p, err := plog.Open(dir, plog.Config{SegmentBytes: 4096, DisableAutoHighWatermark: true})
	require.NoError(t, err)
	defer p.Close()
	rec := p.Stats().Recovery
	require.False(t, rec.Clean)
	var later, total int64
	for _, s := range segs[3:] {
		later += s.Size
	}
	for _, s := range segs[:3] {
		total += s.Size
	}
	require.Equal(t, len(segs)-3, rec.SegmentsRemoved)
	require.Equal(t, third.Size-pos[1]+later, rec.BytesCut)
	// Everything up to the damaged segment was validated, and that
	// segment's bytes too (segment.Recover scans to the end of the file).
	require.Equal(t, total, rec.BytesScanned)
	require.Equal(t, 3, p.Stats().Segments)
}

// ExamplePartition_Stats reads the counters after two appends.
func ExamplePartition_Stats() {
	dir, _ := os.MkdirTemp("", "partlog-example")
	defer os.RemoveAll(dir)
	p, err := plog.Open(dir, plog.Config{})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	_, _ = p.AppendBatch(producerBatch(3))
	_, _ = p.AppendBatch(producerBatch(2))

	s := p.Stats()
	fmt.Println("batches:", s.BatchesAppended, "records:", s.RecordsAppended, "log end:", s.LogEndOffset)
	fmt.Println("segments:", s.Segments, "bytes:", s.Size == s.BytesAppended, "clean open:", s.Recovery.Clean)
	// Output:
	// batches: 2 records: 5 log end: 5
	// segments: 1 bytes: true clean open: true
}
