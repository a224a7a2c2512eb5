package log_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// TestRecordsAllClosedByBodyYieldsNothingMore: once the loop body closes
// the Records, All yields no further record (the rest of a decoded run
// lives in the pooled state Close released, which the next ReadFrom may
// reuse), only the one error wrapping ErrClosed.
func TestRecordsAllClosedByBodyYieldsNothingMore(t *testing.T) {
	p, _ := openT(t, plog.Config{})
	appendHundredOneRecordBatches(t, p)
	for _, closeAt := range []int{1, 3, 31, 32, 33} {
		r, err := p.ReadFrom(0, 1<<20)
		require.NoError(t, err)
		requireClosedByBody(t, r, closeAt, 0, true)
	}
}

// TestRecordsAllClosedByBodyCompressed: the same for a compressed batch,
// whose records All decodes one by one from the released bytes otherwise.
func TestRecordsAllClosedByBodyCompressed(t *testing.T) {
	p, _ := openT(t, plog.Config{})
	bld := batch.NewBuilder(batch.BuilderOptions{Compression: batch.CompressionGzip, PartitionLeaderEpoch: batch.NoPartitionLeaderEpoch})
	for i := range 10 {
		require.NoError(t, bld.Add(batch.Record{Key: fmt.Appendf(nil, "z%d", i), Value: []byte("compressed"), Timestamp: 3000}))
	}
	gzipped, err := bld.Build()
	require.NoError(t, err)
	_, err = p.AppendBatch(gzipped)
	require.NoError(t, err)
	r, err := p.ReadFrom(0, 1<<20)
	require.NoError(t, err)
	requireClosedByBody(t, r, 2, 0, true)
}

// TestRecordsAllClosedByBodyLegacy: the same for the messages of a legacy
// wrapper (a log Kafka wrote before 0.11), closed after each record in
// turn.
func TestRecordsAllClosedByBodyLegacy(t *testing.T) {
	dir := copyFixtureFrom(t, "legacy", "mixed-0")
	p, err := plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	defer p.Close()
	r, err := p.ReadFrom(p.LogStartOffset(), 1<<20)
	require.NoError(t, err)
	total := 0
	for _, err := range r.All(nil) {
		require.NoError(t, err)
		total++
	}
	require.NoError(t, r.Close())
	require.Greater(t, total, 1)
	for closeAt := 1; closeAt < total; closeAt++ {
		r, err := p.ReadFrom(p.LogStartOffset(), 1<<20)
		require.NoError(t, err)
		// Offsets not checked: a legacy log's offsets need not be dense.
		requireClosedByBody(t, r, closeAt, 0, false)
	}
}

// requireClosedByBody reads r with All, closes r from the loop body after
// closeAt records (checking each record's offset against from + its
// index when checkOffsets), and requires that All then yields no record,
// only one error wrapping ErrClosed.
func requireClosedByBody(t *testing.T, r plog.Records, closeAt int, from int64, checkOffsets bool) {
	t.Helper()
	n, after := 0, 0
	var got error
	for rec, err := range r.All(nil) {
		if err != nil {
			got = err
			break
		}
		if n == closeAt {
			after++
			continue
		}
		if checkOffsets {
			require.Equal(t, from+int64(n), rec.Offset)
		}
		if n++; n == closeAt {
			require.NoError(t, r.Close())
		}
	}
	require.ErrorIs(t, got, plog.ErrClosed, "close at %d", closeAt)
	require.Zero(t, after, "records yielded after Close (close at %d)", closeAt)
}

// TestRecordsBatchesClosedByBodyYieldsNothingMore: once the loop body
// closes the Records, Batches yields no further batch, only one error
// wrapping ErrClosed: the batches after the one yielded lie in bytes that
// Close released. When the partition was closed first, the Records held
// the segment's last reference, so Close unmapped them (a batch framed
// there touches unmapped memory); with DisableMmap they are the pooled
// read buffer, which the next ReadFrom reuses for another reader's batches.
func TestRecordsBatchesClosedByBodyYieldsNothingMore(t *testing.T) {
	for _, tc := range []struct {
		name          string
		cfg           plog.Config
		closeFirst    bool
		readInBetween bool
	}{
		{"mapped", plog.Config{}, false, false},
		{"mapped, partition closed first", plog.Config{}, true, false},
		{"unmapped, another read in between", plog.Config{DisableMmap: true}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := openT(t, tc.cfg)
			appendHundredOneRecordBatches(t, p)
			for _, closeAt := range []int{1, 3, 31, 32, 33} {
				r, err := p.ReadFrom(0, 1<<20)
				require.NoError(t, err)
				if tc.closeFirst {
					require.NoError(t, p.Close())
				}
				n, after := 0, 0
				var got error
				for b, err := range r.Batches() {
					if err != nil {
						got = err
						break
					}
					if n == closeAt {
						after++
						continue
					}
					require.Equal(t, int64(n), b.BaseOffset())
					if n++; n == closeAt {
						require.NoError(t, r.Close())
						if tc.readInBetween {
							other, err := p.ReadFrom(50, 1<<20)
							require.NoError(t, err)
							defer other.Close()
						}
					}
				}
				require.ErrorIs(t, got, plog.ErrClosed, "close at %d", closeAt)
				require.Zero(t, after, "batches yielded after Close (close at %d)", closeAt)
				if tc.closeFirst {
					break // one read: the partition is closed
				}
			}
		})
	}
}

// appendHundredOneRecordBatches appends 100 batches of one 20-byte record,
// stamped 0 to 99.
func appendHundredOneRecordBatches(t *testing.T, p *plog.Partition) {
	t.Helper()
	for i := range 100 {
		_, err := p.AppendBatch(logtest.MakeBatch(1, 20, int64(i), byte(i)))
		require.NoError(t, err)
	}
}
