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
)

// e2eEnv sets the MiB TestTierThroughSeaweedFS appends (default 64; the
// issue's acceptance run uses a few hundred).
const e2eEnv = "PARTLOG_S3_E2E_MIB"

// TestTierThroughSeaweedFS appends to a partition of 1 MiB segments tiered
// to SeaweedFS with a local retention of two segments, while the Dir's
// copier runs, then reads every record from offset 0 through Records:
// all but the last few segments come from the S3 store.
func TestTierThroughSeaweedFS(t *testing.T) {
	mib := 64
	if v := os.Getenv(e2eEnv); v != "" {
		var err error
		mib, err = strconv.Atoi(v)
		require.NoError(t, err, e2eEnv)
	}
	w := startWeed(t)
	st := w.store(t, "tier/")
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
