package log

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/index/vfs/vfstest"
)

// firstSegmentRetention is a RetentionPolicy that expires the oldest
// segment.
type firstSegmentRetention struct{}

func (firstSegmentRetention) Expired(*View) int { return 1 }

// TestReadRacesRetentionOfItsSegment: a read of the oldest local offset
// passes its range check, then retention deletes the offset's segment
// before the read takes the segment list (placed exactly: retention runs
// between the read's load of the list and its reference on it, so the
// list it takes is the one without the segment). Under tiered storage the
// segment's copy now holds the offset, and the read returns the batch the
// segment held (law 14), never ErrOffsetOutOfRange; without tiering the
// offset left the log and the read answers ErrOffsetOutOfRange.
func TestReadRacesRetentionOfItsSegment(t *testing.T) {
	cases := []struct {
		name string
		// open returns the partition and the retention to run in the
		// race.
		open    func(t *testing.T) (*Partition, func())
		wantErr error
	}{
		{
			name: "tiered: the copy answers",
			open: func(t *testing.T) (*Partition, func()) {
				d, err := OpenDir("/data", tierInternalConfig(vfstest.NewMem(), 1))
				require.NoError(t, err)
				t.Cleanup(func() { require.NoError(t, d.Close()) })
				p, err := d.CreatePartition("t", 0)
				require.NoError(t, err)
				return p, func() {
					require.NoError(t, p.flushRolled()) // the sealed segments become durable
					d.RunTierPass()
				}
			},
		},
		{
			name: "not tiered: out of range",
			open: func(t *testing.T) (*Partition, func()) {
				p, err := Open("/p-0", Config{FS: vfstest.NewMem(), SegmentBytes: 1024, SegmentIndexBytes: 1024})
				require.NoError(t, err)
				t.Cleanup(func() { require.NoError(t, p.Close()) })
				return p, func() {
					_, err := p.DeleteExpired(context.Background(), firstSegmentRetention{})
					require.NoError(t, err)
				}
			},
			wantErr: ErrOffsetOutOfRange,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, retention := c.open(t)
			for i := range 40 {
				_, err := p.AppendBatch(tierTestBatch(t, 1000+int64(i), byte(i)))
				require.NoError(t, err)
			}
			require.Greater(t, len(p.SegmentInfos()), 2)
			r, err := p.ReadFrom(0, 1)
			require.NoError(t, err)
			want := append([]byte(nil), r.Bytes()...)
			require.NoError(t, r.Close())

			var fired atomic.Bool
			hook := func() {
				if fired.CompareAndSwap(false, true) {
					retention()
				}
			}
			testHookSnapshotLoaded.Store(&hook)
			defer testHookSnapshotLoaded.Store(nil)
			r, err = p.ReadFrom(0, 1)
			testHookSnapshotLoaded.Store(nil)
			require.True(t, fired.Load())
			require.Positive(t, p.LogStartOffset(), "retention deleted the segment of offset 0 during the read")
			if c.wantErr != nil {
				require.ErrorIs(t, err, c.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, want, r.Bytes())
			require.NoError(t, r.Close())
			require.Equal(t, int64(1), p.Stats().Remote.RemoteReads, "the copy answered")
		})
	}
}
