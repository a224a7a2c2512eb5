package log_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// TestTierTruncateBelowCopiesDropsThem truncates below the end of the
// copies (a follower's truncation, below the high watermark), appends
// other batches and lets local retention delete what was copied since:
// every read through the remote tier returns the log's bytes, not the
// copies of the batches the truncation cut, and the store ends up
// holding exactly the recorded copies.
func TestTierTruncateBelowCopiesDropsThem(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  func(p *plog.Partition) error
	}{
		{"TruncateTo", func(p *plog.Partition) error { return p.TruncateTo(10) }},
		{"TruncateFullyAndStartAt", func(p *plog.Partition) error { return p.TruncateFullyAndStartAt(10) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			st := plog.NewDirRemoteStorage("/remote", mem)
			cfg := tierDirConfig(mem, st)
			cfg.Remote.LocalRetentionBytes = 0 // everything stays local at first
			d, err := plog.OpenDir("/data", cfg)
			require.NoError(t, err)
			p, err := d.CreatePartition("t", 0)
			require.NoError(t, err)
			appendN(t, p, 120)
			d.RunTierPass()
			require.Positive(t, p.Stats().Remote.Segments)

			require.NoError(t, tc.cut(p))
			require.Zero(t, p.Stats().Remote.CopyLagSegments, "the copy lag is cleared by the truncation")
			for i := range 150 {
				_, err := p.AppendBatch(logtest.MakeBatch(1, 10, 5000+int64(i), byte(200+i%50)))
				require.NoError(t, err)
			}
			// The whole log starts at the first copy (one below the cut
			// stays), else at the local start.
			from := p.LogStartOffset()
			if r := p.Stats().Remote; r.Segments > 0 {
				from = r.LogStartOffset
			}
			want := readAllBatches(t, p, from)
			require.NoError(t, d.Close())

			d, err = plog.OpenDir("/data", tierDirConfig(mem, st)) // local retention of one byte
			require.NoError(t, err)
			defer d.Close()
			p = d.Partition("t", 0)
			d.RunTierPass()
			s := p.Stats()
			require.Positive(t, s.LogStartOffset, "local retention deleted copied segments")
			require.Equal(t, want, readAllBatches(t, p, from), "reads through the remote tier after the truncation")
			ids, err := st.ListSegments(context.Background(), plog.TopicPartition{Topic: "t", Partition: 0})
			require.NoError(t, err)
			require.Len(t, ids, s.Remote.Segments, "the store holds exactly the recorded copies")
		})
	}
}

// truncatingStore runs truncate (once) when the log asks it for its copy
// number at, before copying.
type truncatingStore struct {
	plog.RemoteStorage
	copies, at int
	truncate   func() error
	err        error
}

func (s *truncatingStore) CopySegment(ctx context.Context, md plog.RemoteSegmentMetadata, d plog.RemoteSegmentData) error {
	s.copies++
	if s.copies == s.at {
		s.err = s.truncate()
	}
	return s.RemoteStorage.CopySegment(ctx, md, d)
}

// TestTierTruncateDuringPassDropsRecordedCopies truncates during the
// second copy of a pass, below the end of the first one (recorded by
// then): neither copy stays recorded, and after more appends and a pass
// with local retention the reads through the remote tier return the log's
// bytes.
func TestTierTruncateDuringPassDropsRecordedCopies(t *testing.T) {
	mem := vfs.NewMem()
	st := &truncatingStore{RemoteStorage: plog.NewDirRemoteStorage("/remote", mem), at: 2}
	cfg := tierDirConfig(mem, st)
	cfg.Remote.LocalRetentionBytes = 0
	d, err := plog.OpenDir("/data", cfg)
	require.NoError(t, err)
	defer d.Close()
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	appendN(t, p, 60)
	st.truncate = func() error { return p.TruncateTo(5) }
	d.RunTierPass()
	require.NoError(t, st.err)
	require.Equal(t, int64(5), p.LogEndOffset())
	s := p.Stats().Remote
	require.Zero(t, s.Segments, "copies recorded of offsets the truncation cut")
	require.Positive(t, s.CopyFailures, "the copy the truncation overtook")

	for i := range 80 {
		_, err := p.AppendBatch(logtest.MakeBatch(1, 10, 5000+int64(i), byte(100+i)))
		require.NoError(t, err)
	}
	want := readAllBatches(t, p, 0)
	require.NoError(t, d.Close())
	d, err = plog.OpenDir("/data", tierDirConfig(mem, st)) // local retention of one byte
	require.NoError(t, err)
	p = d.Partition("t", 0)
	d.RunTierPass()
	require.Positive(t, p.LogStartOffset())
	require.Equal(t, want, readAllBatches(t, p, 0))
	ids, err := st.ListSegments(context.Background(), plog.TopicPartition{Topic: "t", Partition: 0})
	require.NoError(t, err)
	require.Len(t, ids, p.Stats().Remote.Segments, "the store holds exactly the recorded copies")
}
