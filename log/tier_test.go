package log_test

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

func TestTierCopyDeleteReadBack(t *testing.T) {
	mem := vfs.NewMem()
	st := plog.NewDirRemoteStorage("/remote", mem)
	d, err := plog.OpenDir("/data", tierDirConfig(mem, st))
	require.NoError(t, err)
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	appendN(t, p, 120)
	want := readAllBatches(t, p, 0)
	require.Greater(t, p.Stats().Segments, 5)

	d.RunTierPass()
	s := p.Stats()
	require.Positive(t, s.LogStartOffset, "local retention deleted the copied segments")
	assert.Equal(t, 1, s.Segments, "only the active segment stays local")
	assert.Positive(t, s.Remote.Segments)
	assert.Equal(t, int64(0), s.Remote.LogStartOffset)
	assert.Zero(t, s.Remote.CopyLagSegments)
	assert.Zero(t, s.Remote.CopyFailures)
	assert.Equal(t, s.Remote.Copies, int64(s.Remote.Segments))

	assert.Equal(t, want, readAllBatches(t, p, 0), "every batch reads back the same across the local/remote boundary")
	// A read inside a batch in the middle of a copy starts with that batch.
	r, err := p.ReadFrom(37, 1)
	require.NoError(t, err)
	assert.Equal(t, int64(37), r.FirstOffset())
	assert.Equal(t, int64(38), r.NextOffset())
	var w bytesWriter
	n, err := r.WriteTo(&w)
	require.NoError(t, err)
	assert.Equal(t, int64(len(r.Bytes())), n)
	assert.Equal(t, r.Bytes(), w.b)
	require.NoError(t, r.Close())

	// Records reads records from 0 through both tiers.
	var offs []int64
	ctx, cancel := context.WithCancel(context.Background())
	for rec, err := range p.Records(ctx, 0) {
		require.NoError(t, err)
		offs = append(offs, rec.Offset)
		if rec.Offset == 119 {
			break
		}
	}
	cancel()
	require.Len(t, offs, 120)
	for i, o := range offs {
		require.Equal(t, int64(i), o)
	}

	// The metadata survives a restart; nothing is left unrecorded.
	require.NoError(t, d.Close())
	d, err = plog.OpenDir("/data", tierDirConfig(mem, st))
	require.NoError(t, err)
	defer d.Close()
	p = d.Partition("t", 0)
	assert.Equal(t, want, readAllBatches(t, p, 0))
	d.RunTierPass()
	ids, err := st.ListSegments(context.Background(), plog.TopicPartition{Topic: "t", Partition: 0})
	require.NoError(t, err)
	assert.Len(t, ids, p.Stats().Remote.Segments)
}

type bytesWriter struct{ b []byte }

func (w *bytesWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

// flakyStore is a RemoteStorage that fails every call while down.
type flakyStore struct {
	plog.RemoteStorage
	down atomic.Bool
}

var errStoreDown = errors.New("test store down")

func (f *flakyStore) check() error {
	if f.down.Load() {
		return errors.Join(plog.ErrRemoteUnavailable, errStoreDown)
	}
	return nil
}

func (f *flakyStore) CopySegment(ctx context.Context, md plog.RemoteSegmentMetadata, d plog.RemoteSegmentData) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.RemoteStorage.CopySegment(ctx, md, d)
}

func (f *flakyStore) FetchSegment(ctx context.Context, id plog.RemoteSegmentID, start, end int64) (io.ReadCloser, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return f.RemoteStorage.FetchSegment(ctx, id, start, end)
}

func (f *flakyStore) FetchIndex(ctx context.Context, id plog.RemoteSegmentID, k plog.RemoteIndexKind) (io.ReadCloser, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return f.RemoteStorage.FetchIndex(ctx, id, k)
}

func (f *flakyStore) DeleteSegment(ctx context.Context, id plog.RemoteSegmentID) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.RemoteStorage.DeleteSegment(ctx, id)
}

func (f *flakyStore) ListSegments(ctx context.Context, tp plog.TopicPartition) ([]plog.RemoteSegmentID, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return f.RemoteStorage.ListSegments(ctx, tp)
}

// TestTierStoreUnavailable: with the store down appends go on, nothing
// uncopied is deleted, reads of remote-only offsets fail with
// ErrRemoteUnavailable, and copies resume once it is back.
func TestTierStoreUnavailable(t *testing.T) {
	mem := vfs.NewMem()
	st := &flakyStore{RemoteStorage: plog.NewDirRemoteStorage("/remote", mem)}
	cfg := tierDirConfig(mem, st)
	cfg.Remote.CacheBytes = 1 // nothing cached: every read fetches
	d, err := plog.OpenDir("/data", cfg)
	require.NoError(t, err)
	defer d.Close()
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	appendN(t, p, 40)
	d.RunTierPass()
	copied := p.Stats().Remote.Segments
	start := p.LogStartOffset()
	require.Positive(t, start)
	want := readAllBatches(t, p, 0)

	st.down.Store(true)
	appendN(t, p, 40)
	d.RunTierPass()
	s := p.Stats()
	assert.Equal(t, start, s.LogStartOffset, "nothing uncopied is deleted while the store is down")
	assert.Equal(t, copied, s.Remote.Segments)
	assert.Positive(t, s.Remote.CopyFailures)
	lag := s.Remote.CopyLagSegments
	assert.Positive(t, lag)
	// The next passes stop at the cleanup of the failed copy; the copy
	// lag still counts the segments waiting.
	appendN(t, p, 20)
	d.RunTierPass()
	s = p.Stats()
	assert.Positive(t, s.Remote.DeleteFailures)
	assert.Greater(t, s.Remote.CopyLagSegments, lag)
	assert.Equal(t, start, s.LogStartOffset)
	_, err = p.ReadFrom(0, 100)
	require.ErrorIs(t, err, plog.ErrRemoteUnavailable)
	ctx, cancel := context.WithCancel(context.Background())
	for _, err := range p.Records(ctx, 0) {
		require.ErrorIs(t, err, plog.ErrRemoteUnavailable, "Records from 0")
		break
	}
	cancel()
	r, err := p.ReadFrom(start, 100) // local reads go on
	require.NoError(t, err)
	require.NoError(t, r.Close())

	st.down.Store(false)
	d.RunTierPass()
	s = p.Stats()
	assert.Greater(t, s.Remote.Segments, copied, "copies resumed")
	assert.Zero(t, s.Remote.CopyLagSegments)
	assert.Greater(t, s.LogStartOffset, start)
	got := readAllBatches(t, p, 0)
	assert.Equal(t, want, got[:len(want)])
}

// TestTierCrashAtEveryStep crashes the machine at every filesystem
// operation of a pass that copies, records and deletes locally (the
// remote store is a directory on the same crashing filesystem, synced as
// it writes), and checks after a restart and the next pass that every
// acknowledged batch reads back from offset 0, and that the store holds
// exactly the copies the metadata records.
func TestTierCrashAtEveryStep(t *testing.T) {
	tp := plog.TopicPartition{Topic: "t", Partition: 0}
	// The rolls' flushes and spares are left to the test (the Sync and
	// the pass do them), so that every run takes the same operations.
	config := func(fs vfs.FS) plog.DirConfig {
		cfg := tierDirConfig(fs, plog.NewDirRemoteStorage("/remote", fs))
		cfg.Config = plog.WithManualRollFlush(cfg.Config)
		return cfg
	}
	setup := func(fs vfs.FS) (*plog.Dir, []byte) {
		d, err := plog.OpenDir("/data", config(fs))
		require.NoError(t, err)
		p, err := d.CreatePartition(tp.Topic, tp.Partition)
		require.NoError(t, err)
		appendN(t, p, 30)
		require.NoError(t, p.Sync())
		return d, readAllBatches(t, p, 0)
	}
	count := logtest.NewCrashFS(-1, vfs.CrashOptions{})
	d, _ := setup(count)
	from := count.Ops()
	d.RunTierPass()
	require.Positive(t, d.Partition(tp.Topic, tp.Partition).LogStartOffset())
	require.NoError(t, d.Close())
	to := count.Ops()
	t.Logf("crash points %d..%d", from, to)
	step := max((to-from)/400, 1)
	for k := from; k < to; k += step {
		fs := logtest.NewCrashFS(k, vfs.CrashOptions{UnsyncedDataPercent: 50, TornPercent: 50, Seed: uint64(k)})
		d, want := setup(fs)
		d.RunTierPass()
		_ = d.Close()
		state := fs.State()
		require.NotNil(t, state, "crash point %d: the run ended before it (the walk is deterministic)", k)
		st := plog.NewDirRemoteStorage("/remote", state)
		d, err := plog.OpenDir("/data", tierDirConfig(state, st))
		require.NoError(t, err, "crash point %d", k)
		p := d.Partition(tp.Topic, tp.Partition)
		require.Equal(t, want, readAllBatches(t, p, 0), "crash point %d: reads after the restart", k)
		d.RunTierPass()
		require.Equal(t, want, readAllBatches(t, p, 0), "crash point %d: reads after the next pass", k)
		ids, err := st.ListSegments(context.Background(), tp)
		require.NoError(t, err)
		assert.Len(t, ids, p.Stats().Remote.Segments, "crash point %d: the store holds exactly the recorded copies", k)
		require.NoError(t, d.Close())
	}
}
