package log

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	"github.com/partlog/partlog/segment"
)

// The lookups over segment snapshots (localOffsetForTimestamp,
// maxTimestampOffset, collectAborted) without a Partition: a fake
// segmentSnapshots over real segments on MemFS.

// fakeSnapshots hands out one snapshot and counts the ones held.
type fakeSnapshots struct {
	snap *segments
	// err, when set, is what acquireSnapshot fails with.
	err error
	// held counts the snapshots acquired and not released.
	held int
}

func (f *fakeSnapshots) acquireSnapshot() (*segments, error) {
	if f.err != nil {
		return nil, f.err
	}
	f.held++
	return f.snap, nil
}

func (f *fakeSnapshots) releaseSnapshot(s *segments) {
	if s != f.snap {
		panic("released a snapshot that was not acquired")
	}
	f.held--
}

// lookupSegments builds three segments of batches of records with the
// given timestamps, each batch of leader epoch 3 (offsets in comments):
//
//	segment 0: [0:100 1:500] [2:200 3:300]
//	segment 4: [4:500 5:400] [6:600]
//	segment 7: [7:600]
//
// and the aborted transactions of their .txnindex (aborted below).
func lookupSegments(t *testing.T) (*fakeSnapshots, []AbortedTxn) {
	t.Helper()
	fs := vfs.NewMem()
	require.NoError(t, fs.MkdirAll("/p-0", 0o755))
	aborted := []AbortedTxn{
		{ProducerID: 1, FirstOffset: 0, LastOffset: 2, LastStableOffset: 0},
		{ProducerID: 2, FirstOffset: 4, LastOffset: 5, LastStableOffset: 4},
		{ProducerID: 3, FirstOffset: 1, LastOffset: 7, LastStableOffset: 8},
	}
	var list []*segment.Segment
	for i, s := range []struct {
		base    int64
		batches [][]int64
	}{
		{0, [][]int64{{100, 500}, {200, 300}}},
		{4, [][]int64{{500, 400}, {600}}},
		{7, [][]int64{{600}}},
	} {
		var batches []batch.Batch
		next := s.base
		for _, ts := range s.batches {
			b := timedBatch(t, batch.BuilderOptions{BaseOffset: next, PartitionLeaderEpoch: 3}, ts...)
			batches = append(batches, b)
			next = batch.Batch(b).NextOffset()
		}
		seg := createTestSegment(t, fs, "/p-0", segment.Config{MaxIndexBytes: memTestIndexBytes, IndexIntervalBytes: 1}, s.base, true, batches...)
		require.NoError(t, seg.AppendAbortedTxn(aborted[i]))
		list = append(list, seg)
	}
	release(t, list)
	snaps := &fakeSnapshots{snap: newSegments(list)}
	t.Cleanup(func() {
		snaps.snap.retire() // the chain drops its references on the segments
		_ = snaps.snap.unref()
	})
	return snaps, aborted
}

// TestLookupsOverSnapshots: each lookup reads one snapshot and releases it
// on every path; localOffsetForTimestamp answers the first record at or
// above the start, in offset order, with a timestamp at or past the one
// asked, never one at or past the high watermark, with its batch's leader
// epoch; maxTimestampOffset answers the first record of the largest
// timestamp, the earliest segment on ties; collectAborted collects from
// the segment holding the first offset on, the entries overlapping the
// range, and stops once an entry's last stable offset reaches its end.
func TestLookupsOverSnapshots(t *testing.T) {
	snaps, aborted := lookupSegments(t)
	none := TimestampOffset{Timestamp: batch.NoTimestamp, Offset: -1, LeaderEpoch: UndefinedEpoch}

	for _, tc := range []struct {
		name          string
		ts, start, hw int64
		want          TimestampOffset
		found         bool
	}{
		{name: "first in offset order", ts: 150, hw: 8, want: TimestampOffset{Timestamp: 500, Offset: 1, LeaderEpoch: 3}, found: true},
		{name: "exact", ts: 200, hw: 8, want: TimestampOffset{Timestamp: 500, Offset: 1, LeaderEpoch: 3}, found: true},
		{name: "below the start skipped", ts: 150, start: 2, hw: 8, want: TimestampOffset{Timestamp: 200, Offset: 2, LeaderEpoch: 3}, found: true},
		{name: "a later segment", ts: 550, hw: 8, want: TimestampOffset{Timestamp: 600, Offset: 6, LeaderEpoch: 3}, found: true},
		{name: "at the high watermark", ts: 550, hw: 6, want: none},
		{name: "none so late", ts: 700, hw: 8, want: none},
	} {
		t.Run("timestamp "+tc.name, func(t *testing.T) {
			to, found, err := localOffsetForTimestamp(snaps, "/p-0", tc.ts, tc.start, tc.hw)
			require.NoError(t, err)
			require.Equal(t, tc.found, found)
			require.Equal(t, tc.want, to)
			require.Zero(t, snaps.held, "a snapshot was not released")
		})
	}

	t.Run("max timestamp", func(t *testing.T) {
		to, found, err := maxTimestampOffset(snaps, nil, "/p-0", 8)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, TimestampOffset{Timestamp: 600, Offset: 6, LeaderEpoch: 3}, to, "the earliest segment of the largest timestamp")
		require.Zero(t, snaps.held)
		_, found, err = maxTimestampOffset(snaps, nil, "/p-0", 6)
		require.NoError(t, err)
		require.False(t, found, "at the high watermark")
		require.Zero(t, snaps.held)
	})

	for _, tc := range []struct {
		name        string
		from, upper int64
		want        []AbortedTxn
	}{
		{name: "stops at a last stable offset past the end", from: 0, upper: 3, want: aborted[:1]},
		{name: "from a later segment", from: 4, upper: 6, want: aborted[1:]},
		{name: "inside a segment", from: 5, upper: 8, want: aborted[1:]},
		{name: "nothing overlaps", from: 3, upper: 4, want: nil},
	} {
		t.Run("aborted "+tc.name, func(t *testing.T) {
			got, err := collectAborted(snaps, nil, tc.from, tc.upper)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Zero(t, snaps.held)
		})
	}

	t.Run("closed", func(t *testing.T) {
		closed := &fakeSnapshots{snap: snaps.snap, err: ErrClosed}
		_, _, err := localOffsetForTimestamp(closed, "/p-0", 150, 0, 8)
		require.ErrorIs(t, err, ErrClosed)
		_, _, err = maxTimestampOffset(closed, nil, "/p-0", 8)
		require.ErrorIs(t, err, ErrClosed)
		_, err = collectAborted(closed, nil, 0, 3)
		require.ErrorIs(t, err, ErrClosed)
	})
}
