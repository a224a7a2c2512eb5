package log

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
)

// The time lookups below race a writer placed exactly by a test hook on
// the lookup's goroutine: testHookSnapshotLoaded (onSnapshot) after the
// lookup loaded its bound and log start and before it takes the segment
// list, testHookMaxTimestampPicked after a MaxTimestamp lookup read the
// segments' largest timestamps and before it reads the one it picked.

// appendTimed appends one batch of records with the given timestamps.
func appendTimed(t *testing.T, p *Partition, ts ...int64) {
	t.Helper()
	_, err := p.AppendBatch(timedBatch(t, batch.BuilderOptions{}, ts...))
	require.NoError(t, err)
}

// onMaxTimestampPicked makes f run at the first MaxTimestamp lookup that
// picked a local segment, for the rest of the test.
func onMaxTimestampPicked(t *testing.T, f func()) *atomic.Int32 {
	var calls atomic.Int32
	hook := func() {
		if calls.Add(1) == 1 {
			f()
		}
	}
	testHookMaxTimestampPicked.Store(&hook)
	t.Cleanup(func() { testHookMaxTimestampPicked.Store(nil) })
	return &calls
}

// TestOffsetForTimestampRacesTruncation: a TruncateTo (and appends after
// it) while OffsetForTimestamp runs. The answer must come from one log:
// the one before the cut, or the one after it, bounded by its own high
// watermark (law 3). The lookup used to bound the records of the log after
// the cut by the high watermark of the log before it, and so answered
// records at or past the high watermark (under DisableAutoHighWatermark),
// or, for MaxTimestamp, read the record its segment's largest timestamp
// named after the cut: none, although the log had records, or a record of
// another timestamp.
func TestOffsetForTimestampRacesTruncation(t *testing.T) {
	open := func(t *testing.T, cfg Config) *Partition {
		cfg.FS = vfs.NewMem()
		p, err := Open("/p-0", cfg)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, p.Close()) })
		for i := range 10 { // 0-9, timestamps 1000-1009, one segment
			appendTimed(t, p, 1000+int64(i))
		}
		return p
	}
	// cutAndRefill truncates to 3 and appends 3-9 again, timestamps 5000.
	cutAndRefill := func(t *testing.T, p *Partition) func() {
		return func() {
			require.NoError(t, p.TruncateTo(3))
			for range 7 {
				appendTimed(t, p, 5000)
			}
		}
	}

	t.Run("timestamp past the high watermark", func(t *testing.T) {
		p := open(t, Config{DisableAutoHighWatermark: true})
		require.NoError(t, p.SetHighWatermark(10))
		calls := onSnapshot(t, 1, cutAndRefill(t, p))
		to, found, err := p.OffsetForTimestamp(1005)
		require.NoError(t, err)
		require.Positive(t, *calls)
		require.Equal(t, int64(3), p.HighWatermark(), "the cut clamped it; nothing moved it since")
		// Before the cut: offset 5. After it: 0-2 are visible, all
		// earlier than 1005.
		require.False(t, found, "answered %+v, at or past the high watermark", to)
	})

	t.Run("max timestamp past the high watermark", func(t *testing.T) {
		p := open(t, Config{DisableAutoHighWatermark: true})
		require.NoError(t, p.SetHighWatermark(10))
		calls := onSnapshot(t, 1, cutAndRefill(t, p))
		to, found, err := p.OffsetForTimestamp(MaxTimestamp)
		require.NoError(t, err)
		require.Positive(t, *calls)
		// Before the cut: offset 9 (1009). After it: offset 3 (5000),
		// at the high watermark.
		require.False(t, found, "answered %+v, at or past the high watermark", to)
	})

	t.Run("max timestamp cut after the pick", func(t *testing.T) {
		p := open(t, Config{})
		calls := onMaxTimestampPicked(t, func() { require.NoError(t, p.TruncateTo(3)) })
		to, found, err := p.OffsetForTimestamp(MaxTimestamp)
		require.NoError(t, err)
		require.Positive(t, calls.Load())
		// Before the cut: offset 9 (1009). After it: offset 2 (1002).
		require.True(t, found, "the log holds offsets 0-2")
		require.Equal(t, TimestampOffset{Timestamp: 1002, Offset: 2, LeaderEpoch: UndefinedEpoch}, to)
	})

	t.Run("max timestamp cut and refilled after the pick", func(t *testing.T) {
		p := open(t, Config{})
		calls := onMaxTimestampPicked(t, func() {
			require.NoError(t, p.TruncateTo(3))
			appendTimed(t, p, 500, 501, 502, 503, 504, 505, 506) // 3-9
		})
		to, found, err := p.OffsetForTimestamp(MaxTimestamp)
		require.NoError(t, err)
		require.Positive(t, calls.Load())
		// Before the cut: offset 9 (1009). After it: offset 2 (1002).
		require.True(t, found)
		require.Equal(t, TimestampOffset{Timestamp: 1002, Offset: 2, LeaderEpoch: UndefinedEpoch}, to)
	})
}

// TestOffsetForTimestampRacesRetention: DeleteRecordsBefore (as retention
// would) removes the first segment, and moves the log start inside the
// second, while OffsetForTimestamp runs. The answer must come from one
// log: offset 5 before the removal, offset 15 (the log start) after it.
// The lookup used to search the segments left from the log start it had
// loaded before the removal, and answered offset 10, below the log start
// (its doc: the first record at or above the log start offset).
func TestOffsetForTimestampRacesRetention(t *testing.T) {
	p, err := Open("/p-0", Config{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	for i := range 20 { // 0-9 in segment 0, 10-19 in segment 10
		if i == 10 {
			require.NoError(t, p.Roll())
		}
		appendTimed(t, p, 1000+int64(i))
	}
	calls := onSnapshot(t, 1, func() { require.NoError(t, p.DeleteRecordsBefore(15)) })
	to, found, err := p.OffsetForTimestamp(1005)
	require.NoError(t, err)
	require.Positive(t, *calls)
	require.True(t, found)
	require.Equal(t, int64(15), p.LogStartOffset())
	require.Equal(t, TimestampOffset{Timestamp: 1015, Offset: 15, LeaderEpoch: UndefinedEpoch}, to)
}

// onEpochsListed makes f run at the first leader epoch lookup of a
// Latest or Earliest answer, for the rest of the test.
func onEpochsListed(t *testing.T, f func()) *atomic.Int32 {
	var calls atomic.Int32
	hook := func() {
		if calls.Add(1) == 1 {
			f()
		}
	}
	testHookEpochsListed.Store(&hook)
	t.Cleanup(func() { testHookEpochsListed.Store(nil) })
	return &calls
}

// TestListOffsetsEpochRaces: the Earliest, EarliestLocal and Latest
// answers of OffsetForTimestamp race a writer that moves both the offset
// and the leader epoch cache: DeleteRecordsBefore (the log start moves
// into epoch 1), TruncateTo (epoch 1's batches and entry go). The offset
// and its leader epoch must come from one log. They used to pair the
// epoch read from the cache before the change with the offset loaded
// after it: the log start with the epoch before it, the high watermark
// with an epoch the cache no longer has.
func TestListOffsetsEpochRaces(t *testing.T) {
	open := func(t *testing.T) *Partition {
		p, err := Open("/p-0", Config{FS: vfs.NewMem()})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, p.Close()) })
		require.NoError(t, p.AssignEpochStartOffset(0, 0))
		for i := range 20 { // 0-9 in epoch 0, 10-19 in epoch 1
			if i == 10 {
				require.NoError(t, p.AssignEpochStartOffset(1, 10))
			}
			appendTimed(t, p, 1000+int64(i))
		}
		return p
	}
	for _, ts := range []int64{EarliestTimestamp, EarliestLocalTimestamp} {
		t.Run(fmt.Sprintf("earliest %d", ts), func(t *testing.T) {
			p := open(t)
			calls := onEpochsListed(t, func() { require.NoError(t, p.DeleteRecordsBefore(15)) })
			to, found, err := p.OffsetForTimestamp(ts)
			require.NoError(t, err)
			require.Positive(t, calls.Load())
			require.True(t, found)
			require.Contains(t, []TimestampOffset{
				{Timestamp: batch.NoTimestamp, Offset: 0, LeaderEpoch: 0},  // before
				{Timestamp: batch.NoTimestamp, Offset: 15, LeaderEpoch: 1}, // after
			}, to)
		})
	}
	t.Run("latest", func(t *testing.T) {
		p := open(t)
		calls := onEpochsListed(t, func() { require.NoError(t, p.TruncateTo(5)) })
		to, found, err := p.OffsetForTimestamp(LatestTimestamp)
		require.NoError(t, err)
		require.Positive(t, calls.Load())
		require.True(t, found)
		require.Contains(t, []TimestampOffset{
			{Timestamp: batch.NoTimestamp, Offset: 20, LeaderEpoch: 1}, // before
			{Timestamp: batch.NoTimestamp, Offset: 5, LeaderEpoch: 0},  // after
		}, to)
	})
}
