package log_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// TestCompactSwapAfterTruncation: a truncation into a segment that a
// compaction round has already read, followed by appends that seal that
// segment again, makes the round's swap fail with ErrSegmentsChanged. The
// swap used to go ahead (the same segment pointers, sealed, below the high
// watermark), putting the batches the truncation cut back in place of the
// ones appended after it.
func TestCompactSwapAfterTruncation(t *testing.T) {
	one := logtest.MakeBatch(20, 4, 1, 1)
	p, in := openMem(t, plog.Config{SegmentBytes: 2*int64(len(one)) + 10}) // two batches a segment
	defer p.Close()
	for i := range 5 { // [0,40) [40,80) [80,100)
		_, err := p.AppendBatch(logtest.MakeBatch(20, 4, 1, byte(i)))
		require.NoError(t, err)
	}
	require.Len(t, p.SegmentInfos(), 3)

	fresh := logtest.MakeBatch(20, 4, 1, 9)
	var once sync.Once
	var hookErr error
	in.SetHook(func(op vfs.Op) error {
		if op.Kind != vfs.OpSync || !strings.HasSuffix(op.Path, segment.LogSuffix+segment.CleanedSuffix) {
			return nil
		}
		once.Do(func() {
			// The first segment is read; its rewrite is being synced.
			in.SetHook(nil)
			if err := p.TruncateTo(20); err != nil {
				hookErr = err
				return
			}
			for range 3 { // [20,40) into the first segment, then a roll
				if _, err := p.AppendBatch(fresh); err != nil {
					hookErr = err
					return
				}
			}
		})
		return nil
	})
	_, err := p.Compact(context.Background(), horizonCleaner{horizon: 1 << 50})
	require.NoError(t, hookErr)
	require.ErrorIs(t, err, plog.ErrSegmentsChanged)

	r, err := p.ReadFrom(20, 1)
	require.NoError(t, err)
	defer r.Close()
	var got batch.Batch
	for b, err := range r.Batches() {
		require.NoError(t, err)
		got = b
		break
	}
	require.NotNil(t, got)
	require.EqualValues(t, 20, got.BaseOffset())
	require.True(t, bytes.Equal(fresh[batch.HeaderSize:], got[batch.HeaderSize:]), "offset 20 holds the batch appended after the truncation")
}

// truncatingRetention truncates and appends from inside its plan, then
// asks for the oldest segment to go: the segment it judged is cut and
// sealed again with new batches before the deletion.
type truncatingRetention struct {
	p     *plog.Partition
	fresh []byte
	err   error
}

func (r *truncatingRetention) Expired(v *plog.View) int {
	if r.err = r.p.TruncateTo(20); r.err != nil {
		return 0
	}
	for range 3 { // [20,40) into the first segment, then a roll
		if _, r.err = r.p.AppendBatch(r.fresh); r.err != nil {
			return 0
		}
	}
	return 1
}

// TestDeleteExpiredAfterTruncation: a truncation between a retention
// plan and its deletion makes DeleteExpired fail with ErrSegmentsChanged,
// as documented, and deletes nothing. It used to delete the segment the
// truncation cut and later appends sealed again (the same pointer), with
// the batches appended after the plan.
func TestDeleteExpiredAfterTruncation(t *testing.T) {
	one := logtest.MakeBatch(20, 4, 1, 1)
	p, _ := openMem(t, plog.Config{SegmentBytes: 2*int64(len(one)) + 10}) // two batches a segment
	defer p.Close()
	for i := range 5 { // [0,40) [40,80) [80,100)
		_, err := p.AppendBatch(logtest.MakeBatch(20, 4, 1, byte(i)))
		require.NoError(t, err)
	}
	r := &truncatingRetention{p: p, fresh: logtest.MakeBatch(20, 4, 1, 9)}
	_, err := p.DeleteExpired(context.Background(), r)
	require.NoError(t, r.err)
	require.ErrorIs(t, err, plog.ErrSegmentsChanged)
	require.EqualValues(t, 0, p.LogStartOffset())
}
