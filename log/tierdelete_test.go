package log_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// TestTierDeletePartitionDeletesCopies: DeletePartition of a tiered
// partition deletes its copies from the store, and leaves another
// partition's alone.
func TestTierDeletePartitionDeletesCopies(t *testing.T) {
	mem := vfs.NewMem()
	st := plog.NewDirRemoteStorage("/remote", mem)
	d, err := plog.OpenDir("/data", tierDirConfig(mem, st))
	require.NoError(t, err)
	defer d.Close()
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	other, err := d.CreatePartition("t", 1)
	require.NoError(t, err)
	appendN(t, p, 60)
	appendN(t, other, 60)
	d.RunTierPass()
	require.Positive(t, p.Stats().Remote.Segments)
	kept := other.Stats().Remote.Segments
	require.Positive(t, kept)

	require.NoError(t, d.DeletePartition("t", 0))
	ctx := context.Background()
	ids, err := st.ListSegments(ctx, plog.TopicPartition{Topic: "t", Partition: 0})
	require.NoError(t, err)
	assert.Empty(t, ids, "copies of the deleted partition")
	ids, err = st.ListSegments(ctx, plog.TopicPartition{Topic: "t", Partition: 1})
	require.NoError(t, err)
	assert.Len(t, ids, kept, "copies of the other partition")
}

// TestTierDeletePartitionStoreDown: when the store cannot delete the
// copies, DeletePartition fails with ErrRemoteUnavailable and the
// partition stays, its copies recorded for deletion; once the store is
// back the tier's pass deletes them and DeletePartition succeeds.
func TestTierDeletePartitionStoreDown(t *testing.T) {
	mem := vfs.NewMem()
	st := &flakyStore{RemoteStorage: plog.NewDirRemoteStorage("/remote", mem)}
	d, err := plog.OpenDir("/data", tierDirConfig(mem, st))
	require.NoError(t, err)
	defer d.Close()
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	appendN(t, p, 60)
	d.RunTierPass()
	require.Positive(t, p.Stats().Remote.Segments)
	start := p.LogStartOffset()
	want := readAllBatches(t, p, start)

	st.down.Store(true)
	require.ErrorIs(t, d.DeletePartition("t", 0), plog.ErrRemoteUnavailable)
	require.Same(t, p, d.Partition("t", 0), "the partition stays")
	assert.Zero(t, p.Stats().Remote.Segments, "its copies are recorded for deletion")
	require.Equal(t, want, readAllBatches(t, p, start), "its local segments stay")
	st.down.Store(false)
	d.RunTierPass()
	tp := plog.TopicPartition{Topic: "t", Partition: 0}
	ids, err := st.ListSegments(context.Background(), tp)
	require.NoError(t, err)
	assert.Len(t, ids, p.Stats().Remote.Segments, "the pass deleted them and copies again")
	require.NoError(t, d.DeletePartition("t", 0))
	require.Nil(t, d.Partition("t", 0))
	ids, err = st.ListSegments(context.Background(), tp)
	require.NoError(t, err)
	assert.Empty(t, ids)
}
