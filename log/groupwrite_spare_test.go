package log_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/segment"
)

// TestGroupWriteQueueStaysForSpareAndExpiry checks that making the next
// segment's spare (the goroutine an append past half the segment starts)
// and ExpireProducers do not write the batches queued for the group
// syncer while its fdatasync runs: neither depends on the queue being
// written (the spare has no base until a roll adopts it, and the roll
// writes the queue; a queued batch's producer state was recorded when it
// was queued), so a write of the .log beside the fdatasync would only
// lengthen the cycle. Once released, the queue is written as usual.
func TestGroupWriteQueueStaysForSpareAndExpiry(t *testing.T) {
	tests := []struct {
		name string
		call func(t *testing.T, p *plog.Partition)
		// check runs once the cycle ended.
		check func(t *testing.T, p *plog.Partition)
	}{
		{
			name: "PrepareSpare",
			call: func(_ *testing.T, p *plog.Partition) { p.PrepareSpare() },
			check: func(t *testing.T, p *plog.Partition) {
				require.True(t, p.HasSpare(), "the spare is installed")
			},
		},
		{
			name: "ExpireProducers",
			call: func(t *testing.T, p *plog.Partition) {
				n, err := p.ExpireProducers()
				require.NoError(t, err)
				require.Zero(t, n)
			},
			check: func(*testing.T, *plog.Partition) {},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newGroupCycle(t, 2) // A1 written, its fdatasync held; two batches queued
			end := c.p.LogEndOffset()
			var writes atomic.Int64
			c.in.SetHook(func(op vfs.Op) error {
				if strings.HasSuffix(op.Path, segment.LogSuffix) &&
					(op.Kind == vfs.OpWrite || op.Kind == vfs.OpWriteAt || op.Kind == vfs.OpTruncate) {
					writes.Add(1)
				}
				return nil
			})
			tt.call(t, c.p)
			require.Zero(t, writes.Load(), "%s wrote the .log while the group syncer's fdatasync ran", tt.name)
			require.Equal(t, end, c.p.LogEndOffset(), "the queue is still pending")

			c.in.SetHook(nil)
			c.release()
			c.wait()
			for i, err := range c.errs[1:] {
				require.NoError(t, err, "appender %d", i+1)
			}
			require.Equal(t, c.acked.Load(), c.p.LogEndOffset())
			tt.check(t, c.p)
			require.NoError(t, c.p.Verify())
			require.NoError(t, c.p.Close())
		})
	}
}
