package log_test

import (
	"github.com/stretchr/testify/require"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// fillSegments appends 30 batches to a partition with 2 KiB segments and
// returns the model.
func fillSegments(t *testing.T, p *plog.Partition) *logtest.Model {
	t.Helper()
	m := logtest.NewModel(0, false)
	for i := 0; i < 30; i++ {
		b := logtest.MakeBatch(1+i%3, 200, int64(1000+i), byte(i))
		base, err := p.AppendBatch(b)
		require.NoError(t, err)
		require.NoError(t, m.AppendBatch(b, base))
	}
	return m
}

// compacted writes, as compaction does, a segment with suffix at the base
// of old[0] holding every other batch of old (offsets unchanged).
func compacted(t *testing.T, p *plog.Partition, old []*segment.Segment, suffix string) (*segment.Segment, [][]byte) {
	t.Helper()
	seg, err := segment.CreateWithSuffix(p.FS(), p.Dir(), old[0].BaseOffset(), suffix, p.SegmentConfig())
	require.NoError(t, err)
	var kept [][]byte
	i := 0
	for _, o := range old {
		data, err := o.Bytes(0, o.Size(), nil)
		require.NoError(t, err)
		for len(data) > 0 {
			bt, rest, err := batch.Parse(data)
			require.NoError(t, err)
			if i%2 == 0 {
				_, err := seg.Append(bt)
				require.NoError(t, err)
				kept = append(kept, append([]byte(nil), bt...))
			}
			i++
			data = rest
		}
	}
	require.NoError(t, seg.Seal())
	return seg, kept
}

func TestReplaceAndDeleteSegments(t *testing.T) {
	p, dir := openT(t, plog.Config{SegmentBytes: 2048, IndexIntervalBytes: 100})
	m := fillSegments(t, p)
	segs, err := p.Segments()
	require.NoError(t, err)
	require.Greater(t, len(segs), 4)

	// The active segment (and anything reaching past the high watermark)
	// is refused.
	err = p.ReplaceSegments(segs[len(segs)-2:], nil, func() error { require.Fail(t, "commit called"); return nil })
	require.ErrorIs(t, err, plog.ErrSegmentsChanged)

	old := segs[1:3]
	seg, kept := compacted(t, p, old, segment.CleanedSuffix)
	commit := func() error {
		if err := seg.ChangeSuffix(segment.CleanedSuffix, segment.SwapSuffix); err != nil {
			return err
		}
		for _, o := range old {
			if err := o.MarkDeleted(); err != nil {
				return err
			}
		}
		return seg.ChangeSuffix(segment.SwapSuffix, "")
	}
	require.NoError(t, p.ReplaceSegments(old, []*segment.Segment{seg}, commit))
	infos := p.SegmentInfos()
	require.Equal(t, len(segs)-1, len(infos))
	require.Equal(t, old[0].BaseOffset(), infos[1].BaseOffset)
	require.NoError(t, p.Verify())
	// Kept batches read back unchanged; removed offsets read the next one.
	for _, k := range kept {
		bt := batch.Batch(k)
		r, err := p.ReadFrom(bt.BaseOffset(), 1)
		require.NoError(t, err)
		require.Equal(t, k, r.Bytes())
		require.NoError(t, r.Close())
	}
	require.ErrorIs(t, p.ReplaceSegments(old, nil, func() error { return nil }), plog.ErrSegmentsChanged)

	// Retention: the first two segments go, the log start offset follows.
	cur, err := p.Segments()
	require.NoError(t, err)
	require.ErrorIs(t, p.DeleteSegments(cur[1:2]), plog.ErrSegmentsChanged)
	require.NoError(t, p.DeleteSegments(cur[:2]))
	require.Equal(t, cur[2].BaseOffset(), p.LogStartOffset())
	for _, s := range cur {
		require.NoError(t, s.Unref())
	}
	require.NoError(t, m.DeleteRecordsBefore(p.LogStartOffset()))
	require.NoError(t, logtest.Check(p, m))
	// References held across Close keep the directory locked: drop them
	// first.
	for _, s := range segs {
		require.NoError(t, s.Unref())
	}

	require.NoError(t, p.Close())
	p2, err := plog.Open(dir, plog.Config{SegmentBytes: 2048})
	require.NoError(t, err)
	defer p2.Close()
	m.Reopen()
	require.NoError(t, logtest.Check(p2, m))
}

// TestOpenCompletesSwap simulates crashes around compaction's commit point
// and checks that Open applies Kafka's rules.
func TestOpenCompletesSwap(t *testing.T) {
	for _, c := range []struct {
		name       string
		suffix     string // of the compacted segment when the crash hits
		oldDeleted bool   // old segments already renamed .deleted
		compacted  bool   // the compacted segment replaces the old ones after Open
	}{
		{"crash while cleaning", segment.CleanedSuffix, false, false},
		{"crash after the swap rename", segment.SwapSuffix, false, true},
		{"crash after the old segments were deleted", segment.SwapSuffix, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := plog.Config{SegmentBytes: 2048, IndexIntervalBytes: 100, SegmentIndexBytes: memIndexBytes, FS: vfs.NewMem()}
			dir := "/data/swap-0"
			p, err := plog.Open(dir, cfg)
			require.NoError(t, err)
			m := fillSegments(t, p)
			segs, err := p.Segments()
			require.NoError(t, err)
			old := segs[1:3]
			seg, kept := compacted(t, p, old, c.suffix)
			require.NoError(t, seg.Close())
			if c.oldDeleted {
				for _, o := range old {
					require.NoError(t, o.ChangeSuffix("", segment.DeletedSuffix))
				}
			}
			for _, s := range segs {
				require.NoError(t, s.Unref())
			}
			_ = p.Close() // the renamed segments' own files are gone; close what is left

			p2, err := plog.Open(dir, cfg)
			require.NoError(t, err)
			defer p2.Close()
			names, err := cfg.FS.List(dir)
			require.NoError(t, err)
			for _, n := range names {
				require.False(t, filepath.Ext(n) == segment.SwapSuffix || filepath.Ext(n) == segment.CleanedSuffix || filepath.Ext(n) == segment.DeletedSuffix, "leftover %s", n)
			}
			require.NoError(t, p2.Verify())
			require.Equal(t, m.LogEndOffset(), p2.LogEndOffset())
			if !c.compacted {
				m.Reopen()
				require.NoError(t, logtest.Check(p2, m))
				return
			}
			require.Equal(t, len(segs)-1, len(p2.SegmentInfos()))
			for _, k := range kept {
				r, err := p2.ReadFrom(batch.Batch(k).BaseOffset(), 1)
				require.NoError(t, err)
				require.Equal(t, k, r.Bytes())
				require.NoError(t, r.Close())
			}
		})
	}
}

// TestClaimCleaning: one cleaning claim at a time per partition (issue 12,
// item 12: two compaction rounds at once corrupted the partition).
func TestClaimCleaning(t *testing.T) {
	p, _ := openT(t, plog.Config{})
	release, err := p.ClaimCleaning()
	require.NoError(t, err)
	_, err = p.ClaimCleaning()
	require.ErrorIs(t, err, plog.ErrCleaningInProgress)
	release()
	release() // a second release does nothing: it must not end a later claim
	again, err := p.ClaimCleaning()
	require.NoError(t, err)
	release()
	_, err = p.ClaimCleaning()
	require.ErrorIs(t, err, plog.ErrCleaningInProgress, "a stale release ended a later claim")
	again()
	require.NoError(t, p.Close())
	_, err = p.ClaimCleaning()
	require.ErrorIs(t, err, plog.ErrClosed)
}
