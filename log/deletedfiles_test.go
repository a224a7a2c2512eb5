package log_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// deletedFiles counts, under dir, the descriptors of this process on
// segment files renamed *.deleted (or already unlinked), and the *.deleted
// names still in the directory; a spare segment's files, whose names end
// in .deleted too (segment.SpareSuffix), are not counted. Linux only
// (/proc/self/fd).
func deletedFiles(t testing.TB, dir string) (fds, names int) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, dir) && !strings.HasSuffix(target, segment.SpareSuffix) &&
			(strings.HasSuffix(target, segment.DeletedSuffix) || strings.HasSuffix(target, " (deleted)")) {
			fds++
		}
	}
	list, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range list {
		if strings.HasSuffix(e.Name(), segment.DeletedSuffix) && !strings.HasSuffix(e.Name(), segment.SpareSuffix) {
			names++
		}
	}
	return fds, names
}

// expireOldest is a retention policy that expires the n oldest segments.
type expireOldest int

func (n expireOldest) Expired(*plog.View) int { return int(n) }

// onMessage is a slog.Handler that calls fn for every record whose message
// is msg.
type onMessage struct {
	msg string
	fn  func()
}

func (h onMessage) Enabled(context.Context, slog.Level) bool { return true }
func (h onMessage) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.fn()
	}
	return nil
}
func (h onMessage) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h onMessage) WithGroup(string) slog.Handler      { return h }

// TestDeleteExpiredHoldsNoDeletedFiles (issue 28, case 3): a retention
// round over 100 segments of a log whose budget keeps 4 open neither
// reopens the segments it deletes nor keeps their files open until the
// round ends: when the round has deleted them (its log line), no
// descriptor of the process is on a *.deleted file and no such name is
// left, as after DeleteRecordsBefore. It used to hold about three
// descriptors per deleted segment (each one reopened to be renamed, then
// kept by the round's own snapshot) until DeleteExpired returned.
func TestDeleteExpiredHoldsNoDeletedFiles(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts descriptors through /proc/self/fd")
	}
	const n = 100
	for _, how := range []string{"DeleteExpired", "DeleteRecordsBefore"} {
		t.Run(how, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "topic-0")
			writeSegments(t, dir, n+1)
			fds, names := -1, -1
			logger := slog.New(onMessage{msg: "partlog/log: deleted segments", fn: func() {
				fds, names = deletedFiles(t, dir)
			}})
			p, err := plog.Open(dir, plog.Config{SegmentBytes: 1 << 20, SegmentIndexBytes: 1024,
				MaxOpenSegments: 4, Logger: logger})
			require.NoError(t, err)
			defer func() { require.NoError(t, p.Close()) }()
			require.Equal(t, int64(n+1), p.HighWatermark())
			before := p.Stats().SegmentBudget
			if how == "DeleteExpired" {
				res, err := p.DeleteExpired(context.Background(), expireOldest(n))
				require.NoError(t, err)
				require.Equal(t, n, res.SegmentsDeleted)
			} else {
				require.NoError(t, p.DeleteRecordsBefore(n))
			}
			require.Equal(t, int64(n), p.LogStartOffset())
			t.Logf("when the segments were deleted: %d descriptors on deleted files, %d *.deleted names", fds, names)
			assert.Zero(t, fds, "descriptors on deleted files while the round ran")
			assert.Zero(t, names, "*.deleted names while the round ran")
			assert.Equal(t, before.Reopens, p.Stats().SegmentBudget.Reopens, "segments reopened to be deleted")
			fds, names = deletedFiles(t, dir)
			assert.Zero(t, fds)
			assert.Zero(t, names)
		})
	}
}

// keepNewest is a retention policy that expires all but the newest n
// segments.
type keepNewest int

func (n keepNewest) Expired(v *plog.View) int { return max(len(v.Segments())-int(n), 0) }

// TestRetentionUnderReadersBounded (issue 28, case 3): retention runs
// round after round on a log of 4 KiB segments under a budget of 4 open
// segments while appenders write and 8 readers read from the log start
// (each holding what it read for a moment). While it runs, the process's
// descriptors on the log stay within the budget plus those of the
// segments the readers hold (and the active segment, the spare, the
// lock, a checkpoint being written), the descriptors on deleted files
// within the readers' segments, and the *.deleted names within the
// segments readers hold plus the round being deleted. Retention used to
// hold every segment of a round, reopened, until the round ended.
func TestRetentionUnderReadersBounded(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts descriptors through /proc/self/fd")
	}
	const budget, readers, appenders, keep = 4, 8, 2, 8
	run := 2 * time.Second
	if testing.Short() || raceEnabled {
		run = 500 * time.Millisecond
	}
	dir := filepath.Join(t.TempDir(), "topic-0")
	p, err := plog.Open(dir, plog.Config{SegmentBytes: 4096, SegmentIndexBytes: 1024, MaxOpenSegments: budget})
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()

	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	var wg sync.WaitGroup
	var appended, read, deleted, rounds atomic.Int64
	fail := func(err error) {
		t.Error(err)
		cancel()
	}
	for a := range appenders {
		wg.Go(func() {
			bt := logtest.MakeBatch(2, 300, 1_700_000_000_000, byte(a))
			for ctx.Err() == nil {
				if _, err := p.AppendBatch(append([]byte(nil), bt...)); err != nil {
					fail(err)
					return
				}
				appended.Add(1)
			}
		})
	}
	for range readers {
		wg.Go(func() {
			for ctx.Err() == nil {
				r, err := p.ReadFrom(p.LogStartOffset(), 4096)
				if errors.Is(err, plog.ErrOffsetOutOfRange) {
					continue // retention passed the start just read
				}
				if err != nil {
					fail(err)
					return
				}
				time.Sleep(200 * time.Microsecond)
				read.Add(1)
				if err := r.Close(); err != nil {
					fail(err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for ctx.Err() == nil {
			res, err := p.DeleteExpired(context.Background(), keepNewest(keep))
			if err != nil && !errors.Is(err, plog.ErrSegmentsChanged) {
				fail(err)
				return
			}
			deleted.Add(int64(res.SegmentsDeleted))
			rounds.Add(1)
			time.Sleep(20 * time.Millisecond)
		}
	})

	// Each reader holds one segment (3 files); the active segment and
	// the spare 3 each, the lock 1, and a few files a roll or a
	// checkpoint has open for a moment.
	limit := 3*(budget+readers+2) + 1 + 6
	deletedLimit := 3 * readers
	var maxFDs, maxDeleted, maxNames int
	for ctx.Err() == nil {
		fds, _, _ := openFiles(t, dir)
		dfds, names := deletedFiles(t, dir)
		maxFDs, maxDeleted, maxNames = max(maxFDs, fds), max(maxDeleted, dfds), max(maxNames, names)
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	t.Logf("%d batches appended, %d reads, %d segments deleted in %d rounds; at most %d descriptors (limit %d), %d on deleted files (limit %d), %d *.deleted names",
		appended.Load(), read.Load(), deleted.Load(), rounds.Load(), maxFDs, limit, maxDeleted, deletedLimit, maxNames)
	require.Positive(t, deleted.Load())
	assert.LessOrEqual(t, maxFDs, limit, "descriptors on the log")
	assert.LessOrEqual(t, maxDeleted, deletedLimit, "descriptors on deleted files")
	fds, names := deletedFiles(t, dir)
	assert.Zero(t, fds, "after the load")
	assert.Zero(t, names, "after the load")
}
