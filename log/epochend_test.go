package log_test

import (
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// epochLog returns a partition on a fresh MemFS whose leader epoch cache is
// [{1 0} {3 10} {5 20}] with the log end at 30: follower batches of 10
// records under epochs 1, 3 and 5, synced.
func epochLog(t *testing.T, cfg plog.Config) (*plog.Partition, *vfs.MemFS) {
	t.Helper()
	mem := vfs.NewMem()
	cfg.FS = mem
	p, err := plog.Open("/data/epochs-0", cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	for i, e := range []int32{1, 3, 5} {
		b := batch.Batch(logtest.MakeBatch(10, 5, 1_700_000_000_000+int64(100*i), byte(i)))
		b.SetBaseOffset(int64(10 * i))
		b.SetPartitionLeaderEpoch(e)
		_, err := p.AppendAssigned(b)
		require.NoError(t, err)
	}
	require.Equal(t, []plog.EpochStart{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 10}, {Epoch: 5, StartOffset: 20}}, p.LeaderEpochs())
	require.NoError(t, p.Sync())
	return p, mem
}

// TestEndOffsetForEpoch is Kafka's LeaderEpochFileCache.endOffsetFor, case
// by case, on the cache [{1 0} {3 10} {5 20}] with the log end at 30, on an
// empty cache, and after DeleteRecordsBefore moved the first entry.
func TestEndOffsetForEpoch(t *testing.T) {
	p, _ := epochLog(t, plog.Config{})
	empty, _ := openT(t, plog.Config{})
	_, err := empty.AppendBatch(logtest.MakeBatch(3, 5, 1_700_000_000_000, 1)) // no epoch (-1)
	require.NoError(t, err)
	cases := []struct {
		name      string
		p         *plog.Partition
		requested int32
		epoch     int32
		end       int64
	}{
		{"undefined epoch", p, -1, plog.UndefinedEpoch, -1},
		{"the latest epoch answers the log end", p, 5, 5, 30},
		{"above every epoch", p, 6, plog.UndefinedEpoch, -1},
		{"below the first epoch", p, 0, 0, 0},
		{"far below the first epoch (Kafka checks only -1)", p, -5, -5, 0},
		{"the first epoch", p, 1, 1, 10},
		{"between two entries", p, 2, 1, 10},
		{"a middle epoch", p, 3, 3, 20},
		{"between the last two", p, 4, 3, 20},
		{"empty cache", empty, 0, plog.UndefinedEpoch, -1},
		{"empty cache, undefined epoch", empty, -1, plog.UndefinedEpoch, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, end, err := c.p.EndOffsetForEpoch(c.requested)
			require.NoError(t, err)
			require.Equal(t, c.epoch, e)
			require.Equal(t, c.end, end)
		})
	}
	// DeleteRecordsBefore moves the first remaining entry up to the log
	// start: epoch 1's batches are gone, and below-first answers move.
	require.NoError(t, p.DeleteRecordsBefore(15))
	require.Equal(t, []plog.EpochStart{{Epoch: 3, StartOffset: 15}, {Epoch: 5, StartOffset: 20}}, p.LeaderEpochs())
	e, end, err := p.EndOffsetForEpoch(1)
	require.NoError(t, err)
	require.Equal(t, [2]int64{1, 15}, [2]int64{int64(e), end})
	require.NoError(t, p.Close())
	_, _, err = p.EndOffsetForEpoch(5)
	require.ErrorIs(t, err, plog.ErrClosed)
}

// TestAssignEpochStartOffset records elections at the log end: a new
// epoch is durable when the call returns (a crash clone keeping nothing
// unsynced has it) and answers EndOffsetForEpoch; a repeated epoch changes
// nothing; a stale or negative epoch and a wrong offset are refused and
// change nothing.
func TestAssignEpochStartOffset(t *testing.T) {
	cases := []struct {
		name    string
		epoch   int32
		offset  int64
		wantErr error
		want    []plog.EpochStart
	}{
		{"a new epoch at the log end", 7, 30, nil, []plog.EpochStart{{1, 0}, {3, 10}, {5, 20}, {7, 30}}},
		{"the latest epoch again", 5, 30, nil, []plog.EpochStart{{1, 0}, {3, 10}, {5, 20}}},
		{"a stale epoch", 4, 30, plog.ErrStaleLeaderEpoch, nil},
		{"a negative epoch", -1, 30, plog.ErrStaleLeaderEpoch, nil},
		{"below the log end", 7, 29, plog.ErrUnexpectedOffset, nil},
		{"above the log end", 7, 31, plog.ErrUnexpectedOffset, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, mem := epochLog(t, plog.Config{SegmentIndexBytes: memIndexBytes})
			before := p.LeaderEpochs()
			err := p.AssignEpochStartOffset(c.epoch, c.offset)
			want := c.want
			if c.wantErr != nil {
				require.ErrorIs(t, err, c.wantErr)
				want = before
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, want, p.LeaderEpochs())
			crashed := mem.CrashClone(vfs.CrashOptions{}) // the synced state only
			f, err := crashed.Open("/data/epochs-0/" + plog.LeaderEpochCheckpointFile)
			require.NoError(t, err)
			text, err := io.ReadAll(f)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			wantText := fmt.Sprintf("0\n%d\n", len(want))
			for _, e := range want {
				wantText += fmt.Sprintf("%d %d\n", e.Epoch, e.StartOffset)
			}
			require.Equal(t, wantText, string(text), "durable before AssignEpochStartOffset returned")
			q, err := plog.Open("/data/epochs-0", plog.Config{FS: crashed, SegmentIndexBytes: memIndexBytes})
			require.NoError(t, err)
			defer q.Close()
			// Open removes an entry that starts at the log end (no batch
			// of it was appended), as Kafka's loader does.
			if n := len(want); want[n-1].StartOffset == 30 {
				want = want[:n-1]
			}
			require.Equal(t, want, q.LeaderEpochs(), "after a crash")
			last := want[len(want)-1]
			e, end, err := q.EndOffsetForEpoch(last.Epoch)
			require.NoError(t, err)
			require.Equal(t, [2]int64{int64(last.Epoch), 30}, [2]int64{int64(e), end})
		})
	}
	t.Run("stamped appends follow the assigned epoch", func(t *testing.T) {
		p, _ := epochLog(t, plog.Config{StampLeaderEpoch: true, SegmentIndexBytes: memIndexBytes})
		require.NoError(t, p.AssignEpochStartOffset(8, 30))
		require.Equal(t, int32(8), p.LeaderEpoch())
		base, err := p.AppendBatch(logtest.MakeBatch(2, 5, 1_700_000_000_500, 9))
		require.NoError(t, err)
		r, err := p.ReadFrom(base, 1)
		require.NoError(t, err)
		defer r.Close()
		require.Equal(t, int32(8), batch.Batch(r.Bytes()).PartitionLeaderEpoch())
		e, end, err := p.EndOffsetForEpoch(5)
		require.NoError(t, err)
		require.Equal(t, [2]int64{5, 30}, [2]int64{int64(e), end})
	})
}

// TestOffsetForTimestampLeaderEpoch checks the leader epoch of each kind
// of ListOffsets answer: a record's batch epoch (also -1 for a batch
// without one), MaxTimestamp's batch, Latest's latest cached epoch and
// Earliest's first entry only when it starts at or below the log start.
func TestOffsetForTimestampLeaderEpoch(t *testing.T) {
	p, _ := epochLog(t, plog.Config{})
	ts := int64(1_700_000_000_000)
	cases := []struct {
		name   string
		target int64
		offset int64
		epoch  int32
	}{
		{"a record of epoch 1", ts, 0, 1},
		{"a record of epoch 3", ts + 100, 10, 3},
		{"a record of epoch 5", ts + 200, 20, 5},
		{"latest", plog.LatestTimestamp, 30, 5},
		{"earliest", plog.EarliestTimestamp, 0, 1},
	}
	for _, c := range cases {
		got, ok, err := p.OffsetForTimestamp(c.target)
		require.NoError(t, err, c.name)
		require.True(t, ok, c.name)
		require.Equal(t, c.offset, got.Offset, c.name)
		require.Equal(t, c.epoch, got.LeaderEpoch, c.name)
	}
	got, ok, err := p.OffsetForTimestamp(plog.MaxTimestamp)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int32(5), got.LeaderEpoch)
	require.True(t, got.Offset >= 20)

	// A leader's own batches without a stamped epoch answer -1; an epoch
	// assigned above them does not start at the log start, so Earliest
	// has none while Latest has it.
	q, _ := openT(t, plog.Config{})
	_, err = q.AppendBatch(logtest.MakeBatch(3, 5, ts, 1))
	require.NoError(t, err)
	require.NoError(t, q.AssignEpochStartOffset(2, 3))
	for _, c := range []struct {
		target int64
		epoch  int32
	}{{ts, -1}, {plog.LatestTimestamp, 2}, {plog.EarliestTimestamp, -1}, {plog.MaxTimestamp, -1}} {
		got, ok, err := q.OffsetForTimestamp(c.target)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, c.epoch, got.LeaderEpoch, "target %d", c.target)
	}
	_, ok, err = q.OffsetForTimestamp(ts + 1_000_000)
	require.NoError(t, err)
	require.False(t, ok)
}
