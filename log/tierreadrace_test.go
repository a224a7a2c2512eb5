package log_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// fetchHookStore runs hook, once, at the start of the next FetchIndex, with
// the copy asked for.
type fetchHookStore struct {
	plog.RemoteStorage
	hook atomic.Pointer[func(plog.RemoteSegmentID)]
}

func (s *fetchHookStore) FetchIndex(ctx context.Context, id plog.RemoteSegmentID, k plog.RemoteIndexKind) (io.ReadCloser, error) {
	if f := s.hook.Swap(nil); f != nil {
		(*f)(id)
	}
	return s.RemoteStorage.FetchIndex(ctx, id, k)
}

// TestTierReadRacesCopyDeletion: a read below the local log start finds
// its copy in the metadata, and the copy leaves the store before the read
// fetches it. When the total retention deleted it (its record went
// first), the offset is now below the whole log's start: the read answers
// ErrOffsetOutOfRange, as a local read racing retention does, never the
// store's not-found, and counts no read failure. When the store lost a
// copy the metadata still records, the read fails with an error wrapping
// ErrRemoteUnavailable (law 14), the store's ErrRemoteSegmentNotFound kept
// in the chain.
func TestTierReadRacesCopyDeletion(t *testing.T) {
	t0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	const retentionMs = 120_000
	cases := []struct {
		name string
		// during runs at the read's fetch of the copy id.
		during   func(t *testing.T, d *plog.Dir, st plog.RemoteStorage, now *atomic.Int64, id plog.RemoteSegmentID)
		want     []error
		notWant  []error
		failures int64
		// moved: the whole log's start moved past 0.
		moved bool
	}{
		{
			name: "total retention deleted the copy",
			during: func(t *testing.T, d *plog.Dir, _ plog.RemoteStorage, now *atomic.Int64, _ plog.RemoteSegmentID) {
				// The copies whose newest record is below t0+30ms expire:
				// the first ones, not all.
				now.Store(t0.Add(retentionMs*time.Millisecond + 30*time.Millisecond).UnixNano())
				d.RunTierPass()
			},
			want:    []error{plog.ErrOffsetOutOfRange},
			notWant: []error{plog.ErrRemoteSegmentNotFound, plog.ErrRemoteUnavailable},
			moved:   true,
		},
		{
			name: "the store lost a recorded copy",
			during: func(t *testing.T, _ *plog.Dir, st plog.RemoteStorage, _ *atomic.Int64, id plog.RemoteSegmentID) {
				require.NoError(t, st.DeleteSegment(context.Background(), id))
			},
			want:     []error{plog.ErrRemoteUnavailable, plog.ErrRemoteSegmentNotFound},
			notWant:  []error{plog.ErrOffsetOutOfRange},
			failures: 1,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var now atomic.Int64
			now.Store(t0.Add(10 * time.Second).UnixNano())
			mem := vfs.NewMem()
			inner := plog.NewDirRemoteStorage("/remote", mem)
			st := &fetchHookStore{RemoteStorage: inner}
			cfg := tierDirConfig(mem, st)
			cfg.Config.Now = func() time.Time { return time.Unix(0, now.Load()) }
			cfg.Remote.RetentionMs = retentionMs
			cfg.Remote.CacheBytes = 1 // nothing cached: every read fetches
			d, err := plog.OpenDir("/data", cfg)
			require.NoError(t, err)
			defer d.Close()
			p, err := d.CreatePartition("t", 0)
			require.NoError(t, err)
			for i := range 120 {
				_, err := p.AppendBatch(logtest.MakeBatch(1, 10, t0.UnixMilli()+int64(i), byte(i)))
				require.NoError(t, err)
			}
			require.NoError(t, p.Sync())
			d.RunTierPass()
			require.Zero(t, p.Stats().Remote.LogStartOffset)
			require.Positive(t, p.LogStartOffset())

			fetched := false
			hook := func(id plog.RemoteSegmentID) {
				fetched = true
				c.during(t, d, inner, &now, id)
			}
			st.hook.Store(&hook)
			_, err = p.ReadFrom(0, 100)
			require.True(t, fetched, "the read fetched the copy")
			for _, w := range c.want {
				require.ErrorIs(t, err, w)
			}
			for _, w := range c.notWant {
				require.NotErrorIs(t, err, w)
			}
			require.Equal(t, c.failures, p.Stats().Remote.ReadFailures)

			start := p.Stats().Remote.LogStartOffset
			if !c.moved {
				require.Zero(t, start)
				return
			}
			// The whole log reads from its new start: only the offsets
			// retention took are out of range.
			require.Positive(t, start)
			require.Less(t, start, p.LogStartOffset())
			r, err := p.ReadFrom(start, 1)
			require.NoError(t, err)
			require.Equal(t, start, r.FirstOffset())
			require.NoError(t, r.Close())
		})
	}
}
