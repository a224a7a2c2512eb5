package log_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/checkpoint"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// faultPartition opens a partition on the OS filesystem with 4 KiB
// segments and appends 40 batches of 4 records (about 1 KiB each), so that
// the log has many sealed segments, each mapped. The rolls' background
// flush is the test's (WithManualRollFlush): with flushRolls, it runs once
// after the appends, so every sealed segment is durable and below the
// recovery point (the active segment's base) before the test damages one;
// without, the recovery point stays at the new partition's 0 and every
// sealed segment is above it (never promised durable).
func faultPartition(t *testing.T, flushRolls bool) (*plog.Partition, string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("SIGBUS on a page past the end of a mapped file is Linux behaviour")
	}
	cfg := plog.WithManualRollFlush(plog.Config{SegmentBytes: 4096, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	p, dir := openT(t, cfg)
	for i := range 40 {
		_, err := p.AppendBatch(logtest.MakeBatch(4, 200, 1_700_000_000_000+int64(i), byte(i)))
		require.NoError(t, err)
	}
	infos := p.SegmentInfos()
	require.Greater(t, len(infos), 4)
	flushRollsOrNot(t, p, infos, flushRolls)
	return p, dir
}

// TestMediaErrorTakesPartitionOffline cuts the .log of a sealed segment to
// 0 bytes behind the partition's back (its mapped pages then raise SIGBUS
// when touched, as on a media error) and reads it through the library:
// ReadFrom, OffsetForTimestamp and Verify each return an error wrapping
// ErrFault, naming the file, and the process lives. The partition is then
// offline, as Kafka takes a log offline on an IOException: every later
// read and write returns the same error, even for healthy segments; Close
// leaves no clean-shutdown marker. A reopen while the data is still gone is
// refused (a sealed segment below the recovery point lost its bytes:
// recovery never serves a log with a hole), and once the file's bytes are
// back the partition works again. The rolls' flush runs before the fault
// (faultPartition), so the damaged segment lies below the recovery point;
// TestMediaErrorAboveRecoveryPoint is the same damage before that flush.
func TestMediaErrorTakesPartitionOffline(t *testing.T) {
	tests := []struct {
		name  string
		fault func(p *plog.Partition) error
	}{
		{"ReadFrom", func(p *plog.Partition) error {
			r, err := p.ReadFrom(0, 1<<20)
			if err == nil {
				_ = r.Close()
			}
			return err
		}},
		{"OffsetForTimestamp", func(p *plog.Partition) error {
			_, _, err := p.OffsetForTimestamp(1_700_000_000_000)
			return err
		}},
		{"OffsetForTimestamp max", func(p *plog.Partition) error {
			_, _, err := p.OffsetForTimestamp(plog.MaxTimestamp)
			return err
		}},
		{"Verify", func(p *plog.Partition) error { return p.Verify() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, dir := faultPartition(t, true)
			infos := p.SegmentInfos()
			victim := infos[0]
			if tc.name == "OffsetForTimestamp max" {
				// The segment holding the largest timestamp.
				victim = infos[len(infos)-1]
				require.Positive(t, victim.Size)
			}
			path := filepath.Join(dir, segment.FileName(victim.BaseOffset, segment.LogSuffix))
			saved, err := os.ReadFile(path)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(path, 0))

			requireFault(t, tc.fault(p), path)

			// Offline: every call fails with the same error, also
			// reads of segments that are still whole.
			last := infos[len(infos)-2]
			_, err = p.ReadFrom(last.BaseOffset, 1<<20)
			requireFault(t, err, path)
			_, _, err = p.OffsetForTimestamp(0)
			requireFault(t, err, path)
			_, err = p.AppendBatch(logtest.MakeBatch(1, 10, 1_700_000_000_000, 1))
			requireFault(t, err, path)
			requireFault(t, p.Sync(), path)
			requireFault(t, p.TruncateTo(1), path)
			requireFault(t, p.Verify(), path)

			require.NoError(t, p.Close())
			_, err = os.Stat(filepath.Join(dir, checkpoint.CleanShutdownFile))
			require.True(t, errors.Is(err, os.ErrNotExist), "no clean-shutdown marker after a fault: %v", err)

			if victim.BaseOffset != infos[len(infos)-1].BaseOffset {
				_, err = plog.Open(dir, plog.Config{SegmentBytes: 4096})
				require.ErrorIs(t, err, plog.ErrRecoveryRefused)
				require.ErrorContains(t, err, filepath.Base(path))
			}

			// The bytes restored (the medium healed, or a replica's
			// copy): recovery runs, the partition works again.
			require.NoError(t, os.WriteFile(path, saved, 0o644))
			p2, err := plog.Open(dir, plog.Config{SegmentBytes: 4096})
			require.NoError(t, err)
			defer p2.Close()
			_, err = p2.AppendBatch(logtest.MakeBatch(1, 10, 1_700_000_000_000, 1))
			require.NoError(t, err)
			r, err := p2.ReadFrom(p2.LogEndOffset()-1, 1<<20)
			require.NoError(t, err)
			require.NotEmpty(t, r.Bytes())
			require.NoError(t, r.Close())
		})
	}
}

// TestMediaErrorAboveRecoveryPoint is TestMediaErrorTakesPartitionOffline's
// damage (a sealed segment's .log cut to 0 bytes, found by a read) before
// the rolls' background flush ran: the recovery point is still the new
// partition's 0, and the offline partition never runs the pending flush
// (it fails with the fault and leaves the recovery point where it was).
// The damaged segment and every later one lie above the recovery point,
// so the directory looks like a crash after the rolls, before their flush
// (docs/crash-safety.md, recovery rule 5): nothing there was promised
// durable. StrictRecovery refuses, naming the file, and changes nothing;
// DefaultRecovery cuts the log at the damaged segment and removes the
// later ones, as Kafka's recovery does; what remains is a prefix.
func TestMediaErrorAboveRecoveryPoint(t *testing.T) {
	p, dir := faultPartition(t, false)
	infos := p.SegmentInfos()
	path := filepath.Join(dir, segment.FileName(infos[0].BaseOffset, segment.LogSuffix))
	require.NoError(t, os.Truncate(path, 0))
	_, err := p.ReadFrom(0, 1<<20)
	requireFault(t, err, path)
	requireFault(t, p.FlushRolled(), path)
	assert.Equal(t, int64(0), p.RecoveryPoint())
	require.NoError(t, p.Close())

	logs := func() []string {
		names, err := filepath.Glob(filepath.Join(dir, "*"+segment.LogSuffix))
		require.NoError(t, err)
		return names
	}
	before := logs()
	require.Len(t, before, len(infos))
	_, err = plog.Open(dir, plog.Config{SegmentBytes: 4096, Recovery: plog.StrictRecovery{}})
	require.ErrorIs(t, err, plog.ErrRecoveryRefused)
	require.ErrorContains(t, err, filepath.Base(path))
	assert.Equal(t, before, logs(), "a refused recovery removes no segment")

	p2, err := plog.Open(dir, plog.Config{SegmentBytes: 4096, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	defer p2.Close()
	assert.Equal(t, int64(0), p2.LogEndOffset())
	assert.Equal(t, []string{path}, logs())
	_, err = p2.AppendBatch(logtest.MakeBatch(1, 10, 1_700_000_000_000, 1))
	require.NoError(t, err)
}

// TestRecordsAppendToSurvivesMediaError: Records.AppendTo copies the
// zero-copy bytes under fault protection; NextOffset reads none of them.
func TestRecordsAppendToSurvivesMediaError(t *testing.T) {
	p, dir := faultPartition(t, true)
	r, err := p.ReadFrom(0, 1<<20)
	require.NoError(t, err)
	defer r.Close()
	good, err := r.AppendTo([]byte("prefix"))
	require.NoError(t, err)
	require.Equal(t, "prefix", string(good[:6]))
	require.Equal(t, r.Bytes(), good[6:])
	next := r.NextOffset()
	require.Positive(t, next)

	path := filepath.Join(dir, segment.FileName(0, segment.LogSuffix))
	require.NoError(t, os.Truncate(path, 0))
	got, err := r.AppendTo([]byte("prefix"))
	require.ErrorIs(t, err, index.ErrFault)
	var fe *segment.FaultError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, path, fe.File)
	assert.Equal(t, "prefix", string(got))
	assert.Equal(t, next, r.NextOffset())
}

// cutBeforeCopyStore is a RemoteStorage that cuts the local .log of the
// segment it is asked to copy to 0 bytes (a media error, or the file cut
// behind the partition's back) before it reads the segment's bytes.
type cutBeforeCopyStore struct {
	plog.RemoteStorage
	dir string // the partition's directory
	err error  // what the last copy returned
}

func (s *cutBeforeCopyStore) CopySegment(ctx context.Context, md plog.RemoteSegmentMetadata, d plog.RemoteSegmentData) error {
	if err := os.Truncate(filepath.Join(s.dir, segment.FileName(md.BaseOffset, segment.LogSuffix)), 0); err != nil {
		return err
	}
	s.err = s.RemoteStorage.CopySegment(ctx, md, d)
	return s.err
}

// TestTierCopyMediaErrorIsAnError: the tier pass reads a sealed segment's
// bytes for its copy through the mapping; when the store reads them after
// the .log lost its bytes, the read is an error wrapping ErrFault, not a
// SIGBUS that kills the process. The copy fails and nothing uncopied is
// deleted.
func TestTierCopyMediaErrorIsAnError(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SIGBUS on a page past the end of a mapped file is Linux behaviour")
	}
	root := t.TempDir()
	st := &cutBeforeCopyStore{RemoteStorage: plog.NewDirRemoteStorage(filepath.Join(root, "remote"), nil)}
	cfg := plog.DirConfig{
		Config: plog.Config{SegmentBytes: 8192, Logger: slog.New(slog.DiscardHandler)},
		Remote: &plog.RemoteConfig{Storage: st, LocalRetentionBytes: 1, Interval: time.Hour},
	}
	d, err := plog.OpenDir(filepath.Join(root, "data"), cfg)
	require.NoError(t, err)
	defer d.Close()
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	st.dir = p.Dir()
	for i := range 40 {
		_, err := p.AppendBatch(logtest.MakeBatch(4, 200, 1_700_000_000_000+int64(i), byte(i)))
		require.NoError(t, err)
	}
	require.NoError(t, p.Sync())
	require.Greater(t, p.Stats().Segments, 2)

	d.RunTierPass()
	s := p.Stats()
	require.ErrorIs(t, st.err, index.ErrFault)
	var fe *segment.FaultError
	require.ErrorAs(t, st.err, &fe)
	assert.Equal(t, filepath.Join(p.Dir(), segment.FileName(0, segment.LogSuffix)), fe.File)
	assert.Positive(t, s.Remote.CopyFailures, "the copy of the damaged segment failed")
	assert.Zero(t, s.Remote.Segments)
	assert.Zero(t, s.LogStartOffset, "nothing uncopied is deleted")
}
