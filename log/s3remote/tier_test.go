package s3remote_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/log/s3remote/weedtest"
)

// e2eEnv sets the MiB TestTierThroughSeaweedFS appends (default 256, the
// issue's "a few hundred"; about 80 s on 2 loaded cores).
const e2eEnv = "PARTLOG_S3_E2E_MIB"

// TestTierThroughSeaweedFS appends to a partition of 1 MiB segments tiered
// to SeaweedFS with a local retention of two segments, while the Dir's
// copier runs, then reads every record from offset 0 through Records:
// all but the last few segments come from the S3 store.
func TestTierThroughSeaweedFS(t *testing.T) {
	mib := 256
	if v := os.Getenv(e2eEnv); v != "" {
		var err error
		mib, err = strconv.Atoi(v)
		require.NoError(t, err, e2eEnv)
	}
	w := weedtest.Start(t)
	st := w.Store(t, "tier/")
	const segBytes = 1 << 20
	d, err := plog.OpenDir(t.TempDir(), plog.DirConfig{
		Config: plog.Config{SegmentBytes: segBytes, Logger: slog.New(slog.DiscardHandler)},
		Remote: &plog.RemoteConfig{Storage: st, LocalRetentionBytes: 2 * segBytes, Interval: 100 * time.Millisecond},
	})
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Close()) }()
	p, err := d.CreatePartition("tiered", 0)
	require.NoError(t, err)

	const perBatch, valueSize = 16, 4000
	batches := mib << 20 / (perBatch * valueSize)
	for i := range batches {
		_, err := p.AppendBatch(logtest.MakeBatch(perBatch, valueSize, int64(i), byte(i)))
		require.NoError(t, err)
	}
	total := int64(batches * perBatch)

	// Wait until every sealed segment is copied and local retention has
	// deleted all but the two newest and the active one.
	deadline := time.Now().Add(5 * time.Minute)
	for {
		s := p.Stats()
		if s.Remote.CopyLagSegments == 0 && s.Segments <= 3 && s.Remote.Segments > 0 {
			require.Positive(t, s.LogStartOffset)
			require.Zero(t, s.Remote.LogStartOffset)
			t.Logf("%d MiB, %d records: %d segments (%d bytes) remote, %d local from offset %d; %d copy failures",
				mib, total, s.Remote.Segments, s.Remote.Bytes, s.Segments, s.LogStartOffset, s.Remote.CopyFailures)
			break
		}
		require.True(t, time.Now().Before(deadline), "copies not done within 5 minutes: %+v", s.Remote)
		time.Sleep(100 * time.Millisecond)
	}

	start := time.Now()
	next := int64(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for rec, err := range p.Records(ctx, 0) {
		require.NoError(t, err, "record %d", next)
		require.Equal(t, next, rec.Offset)
		i := next / perBatch
		require.Equal(t, fmt.Sprintf("k%d", next%perBatch), string(rec.Key), "record %d", next)
		require.Len(t, rec.Value, valueSize, "record %d", next)
		require.Equal(t, byte(i), rec.Value[0], "record %d", next)
		next++
		if next == total {
			break
		}
	}
	require.Equal(t, total, next)
	t.Logf("read %d records from offset 0 in %v", total, time.Since(start))
}

// readBatches reads p from offset from to its high watermark with ReadFrom
// and returns the bytes read.
func readBatches(t *testing.T, p *plog.Partition, from int64) []byte {
	t.Helper()
	var out []byte
	for next := from; next < p.HighWatermark(); {
		r, err := p.ReadFrom(next, 256<<10)
		require.NoError(t, err, "ReadFrom %d", next)
		require.NotEmpty(t, r.Bytes(), "ReadFrom %d", next)
		out = append(out, r.Bytes()...)
		next = r.NextOffset()
		require.NoError(t, r.Close())
	}
	return out
}

// waitStats polls p's Stats every 50 ms until done holds, failing t after
// limit.
func waitStats(t *testing.T, p *plog.Partition, limit time.Duration, what string, done func(plog.Stats) bool) plog.Stats {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		s := p.Stats()
		if done(s) {
			return s
		}
		require.True(t, time.Now().Before(deadline), "%s: not within %v: %+v", what, limit, s.Remote)
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTierServerStopped stops SeaweedFS under a tiered Dir whose copier
// runs in the background: appends go on, local retention waits (no
// segment that is not copied is deleted: the local log start stays at the
// end of the copies), reads
// of offsets held only remotely, through ReadFrom and Records, fail with an
// error wrapping ErrRemoteUnavailable while local reads go on; once the
// server is back, copies resume, local retention catches up, and every
// record reads back from offset 0.
func TestTierServerStopped(t *testing.T) {
	w := weedtest.Start(t)
	const segBytes = 64 << 10
	d, err := plog.OpenDir(t.TempDir(), plog.DirConfig{
		Config: plog.Config{SegmentBytes: segBytes, Logger: slog.New(slog.DiscardHandler)},
		Remote: &plog.RemoteConfig{Storage: w.Store(t, "stopped/"), LocalRetentionBytes: 2 * segBytes,
			Interval: 50 * time.Millisecond, CacheBytes: 1}, // nothing cached: every remote read fetches
	})
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Close()) }()
	p, err := d.CreatePartition("stopped", 0)
	require.NoError(t, err)
	appendMiB := func(seed int) {
		for i := range 64 {
			_, err := p.AppendBatch(logtest.MakeBatch(4, 4000, int64(seed*64+i), byte(seed+i)))
			require.NoError(t, err)
		}
	}
	appendMiB(0)
	// Copied, and the local retention done: two segments and the active one.
	s := waitStats(t, p, 2*time.Minute, "first copies", func(s plog.Stats) bool {
		return s.Remote.CopyLagSegments == 0 && s.Remote.Segments > 0 && s.Segments <= 3
	})
	want := readBatches(t, p, 0)
	copied, localStart, failures := s.Remote.Segments, s.LogStartOffset, s.Remote.CopyFailures+s.Remote.DeleteFailures
	// Every sealed segment is copied: the copies end where the active
	// segment starts.
	infos := p.SegmentInfos()
	copiedEnd := infos[len(infos)-1].BaseOffset

	w.Stop()
	start := time.Now()
	for i := 1; i <= 2; i++ {
		appendMiB(i)
	}
	t.Logf("2 MiB appended in %v with the server stopped", time.Since(start))
	// The first pass's copy fails, the next ones' cleanups of that copy.
	s = waitStats(t, p, 2*time.Minute, "failed passes with the server stopped", func(s plog.Stats) bool {
		return s.Remote.CopyFailures+s.Remote.DeleteFailures > failures+3 && s.Remote.CopyLagSegments > 20
	})
	// The local retention deletes the two segments it kept, which are
	// copied, as the local size grows, and nothing after them.
	require.Equal(t, copiedEnd, s.LogStartOffset, "nothing uncopied is deleted locally while the server is down")
	require.Equal(t, copied, s.Remote.Segments)
	_, err = p.ReadFrom(0, 1000)
	require.ErrorIs(t, err, plog.ErrRemoteUnavailable, "a read held only remotely")
	ctx, cancel := context.WithCancel(context.Background())
	for _, err := range p.Records(ctx, 0) {
		require.ErrorIs(t, err, plog.ErrRemoteUnavailable, "Records from 0")
		break
	}
	cancel()
	r, err := p.ReadFrom(copiedEnd, 1000) // local reads go on
	require.NoError(t, err)
	require.NoError(t, r.Close())

	w.Start()
	s = waitStats(t, p, 2*time.Minute, "copies resumed", func(s plog.Stats) bool {
		return s.Remote.CopyLagSegments == 0 && s.Segments <= 3 && s.Remote.Segments > copied
	})
	require.Greater(t, s.LogStartOffset, copiedEnd, "local retention caught up")
	got := readBatches(t, p, 0)
	require.Equal(t, want, got[:len(want)], "the records copied before the outage read back the same")
	t.Logf("%d copies before the outage, %d after; %d failed copies and cleanups; local log start %d -> %d",
		copied, s.Remote.Segments, s.Remote.CopyFailures+s.Remote.DeleteFailures-failures, localStart, s.LogStartOffset)
}
