package log_test

// Regression tests for defects a review found, each named after its bug.

import (
	"encoding/binary"
	"errors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/checkpoint"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// withCodec returns a copy of b whose attributes name codec c (over the
// unchanged payload), with a CRC that matches: a batch whose header a
// follower accepts but whose records do not decompress.
func withCodec(b []byte, c batch.Compression) batch.Batch {
	out := batch.Batch(slices.Clone(b))
	a := uint16(batch.Batch(out).Attributes().WithCompression(c))
	binary.BigEndian.PutUint16(out[21:], a) // attributes
	out.SetCRC()
	return out
}

// zeroReader yields n zero bytes.
type zeroReader struct{ n int64 }

func (z *zeroReader) Read(p []byte) (int, error) {
	if z.n <= 0 {
		return 0, io.EOF
	}
	k := min(int64(len(p)), z.n)
	clear(p[:k])
	z.n -= k
	return int(k), nil
}

// bigZstdBatch builds, streaming (so it never holds the value in memory), a
// zstd RecordBatch v2 with one record whose value is valueSize zero bytes:
// a valid batch of a few KiB that decompresses to valueSize bytes.
func bigZstdBatch(t *testing.T, base int64, valueSize int) batch.Batch {
	t.Helper()
	var rec []byte
	rec = append(rec, 0)               // attributes
	rec = binary.AppendVarint(rec, 0)  // timestampDelta
	rec = binary.AppendVarint(rec, 0)  // offsetDelta
	rec = binary.AppendVarint(rec, -1) // key: null
	rec = binary.AppendVarint(rec, int64(valueSize))
	bodyLen := int64(len(rec)) + int64(valueSize) + 1 // + headers count
	var payload writerBuf
	enc, err := zstd.NewWriter(&payload, zstd.WithEncoderLevel(zstd.SpeedFastest))
	require.NoError(t, err)
	_, err = enc.Write(binary.AppendVarint(nil, bodyLen))
	require.NoError(t, err)
	_, err = enc.Write(rec)
	require.NoError(t, err)
	_, err = io.Copy(enc, &zeroReader{n: int64(valueSize)})
	require.NoError(t, err)
	_, err = enc.Write(binary.AppendVarint(nil, 0)) // headers
	require.NoError(t, err)
	require.NoError(t, enc.Close())

	// The header of a one-record batch, with the zstd payload.
	tmpl := batch.Batch(logtest.MakeBatch(1, 1, 1000, 0))
	b := batch.Batch(append(slices.Clone([]byte(tmpl[:batch.HeaderSize])), payload.b...))
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-batch.LogOverhead)) // batchLength
	binary.BigEndian.PutUint16(b[21:], uint16(b.Attributes().WithCompression(batch.CompressionZstd)))
	b.SetBaseOffset(base)
	b.SetCRC()
	return b
}

type writerBuf struct{ b []byte }

func (w *writerBuf) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

// TestAppendAssignedDoesNotDecompress: the follower path checks what a
// Kafka follower checks (framing, magic, CRC, offsets), not the records. A
// batch whose CRC is valid but whose codec bits say zstd over a payload
// that is not zstd is accepted by AppendAssigned and refused by
// AppendBatch (which validates fully, as a leader does); a valid zstd batch
// of one 80 MiB record of zeros (a few KiB on the wire) is accepted by
// AppendAssigned without decompressing it.
func TestAppendAssignedDoesNotDecompress(t *testing.T) {
	bogus := withCodec(logtest.MakeBatch(3, 20, 1000, 1), batch.CompressionZstd)
	require.NoError(t, bogus.ValidateHeader())
	require.ErrorIs(t, bogus.Validate(), batch.ErrCorrupt)

	leader, _ := openT(t, plog.Config{})
	_, err := leader.AppendBatch(slices.Clone([]byte(bogus)))
	require.ErrorIs(t, err, plog.ErrInvalidBatch)
	require.Equal(t, int64(0), leader.LogEndOffset())

	p, dir := openT(t, plog.Config{})
	end, err := p.AppendAssigned(bogus)
	require.NoError(t, err)
	require.Equal(t, int64(3), end)

	big := bigZstdBatch(t, 3, 80<<20)
	t.Logf("zstd batch of an 80 MiB record: %d bytes", len(big))
	require.True(t, len(big) < 1<<20, "batch is", len(big))
	end, err = p.AppendAssigned(big)
	require.NoError(t, err)
	require.Equal(t, int64(4), end)

	r, err := p.ReadFrom(0, math.MaxInt)
	require.NoError(t, err)
	require.Equal(t, append(slices.Clone([]byte(bogus)), big...), r.Bytes())
	require.NoError(t, r.Close()) // an open Records keeps the directory locked after Close

	// What a follower still refuses: a bad CRC and a wrong offset.
	bad := slices.Clone([]byte(logtest.MakeBatch(1, 1, 0, 0)))
	batch.Batch(bad).SetBaseOffset(4)
	bad[len(bad)-1] ^= 1
	_, err = p.AppendAssigned(bad)
	require.ErrorIs(t, err, batch.ErrCorrupt)
	below := batch.Batch(logtest.MakeBatch(1, 1, 0, 0))
	below.SetBaseOffset(3)
	_, err = p.AppendAssigned(below)
	require.ErrorIs(t, err, plog.ErrUnexpectedOffset)
	require.Equal(t, int64(4), p.LogEndOffset())

	// Recovery after an unclean shutdown checks what the follower checked
	// (as Kafka's LogSegment.recover): both batches stay, under either
	// policy.
	require.NoError(t, p.Close())
	for _, pol := range []plog.RecoveryPolicy{plog.DefaultRecovery{}, plog.StrictRecovery{}} {
		require.NoError(t, os.Remove(filepath.Join(dir, checkpoint.CleanShutdownFile)))
		require.NoError(t, os.Remove(filepath.Join(dir, plog.RecoveryPointCheckpointFile)))
		q, err := plog.Open(dir, plog.Config{Recovery: pol})
		require.NoError(t, err, pol)
		require.Equal(t, int64(4), q.LogEndOffset(), pol)
		require.NoError(t, q.Close())
	}
}

// TestAppendBatchStampsNoEpochWithoutStampLeaderEpoch: without
// StampLeaderEpoch, AppendBatch stores -1 as the partitionLeaderEpoch
// whatever the producer sent (a producer's 7 would otherwise enter the
// leader epoch cache and leader-epoch-checkpoint); with it, the current
// epoch. The batch stays valid (the field lies outside the CRC).
func TestAppendBatchStampsNoEpochWithoutStampLeaderEpoch(t *testing.T) {
	for _, stamp := range []bool{false, true} {
		p, _ := openT(t, plog.Config{StampLeaderEpoch: stamp, LeaderEpoch: 3})
		b := batch.Batch(logtest.MakeBatch(2, 5, 1000, 0))
		b.SetPartitionLeaderEpoch(7) // what a misbehaving producer sends
		_, err := p.AppendBatch(b)
		require.NoError(t, err)
		want := batch.NoPartitionLeaderEpoch
		if stamp {
			want = 3
		}
		r, err := p.ReadFrom(0, math.MaxInt)
		require.NoError(t, err)
		got := batch.Batch(r.Bytes())
		require.Equal(t, want, got.PartitionLeaderEpoch(), "stamp", stamp)
		require.NoError(t, got.Validate())
		require.NoError(t, r.Close())
		wantEpochs := []plog.EpochStart{}
		if stamp {
			wantEpochs = []plog.EpochStart{{Epoch: 3, StartOffset: 0}}
		}
		require.Equal(t, wantEpochs, p.LeaderEpochs(), "stamp", stamp)
	}
}

// TestReadFromMaxIntMaxBytes: maxBytes near math.MaxInt must not overflow
// the read's byte bound; ReadFrom(o, math.MaxInt) returns every batch from
// the one holding o up to the high watermark, within the segment.
func TestReadFromMaxIntMaxBytes(t *testing.T) {
	p, _ := openT(t, plog.Config{})
	for i := 0; i < 5; i++ {
		_, err := p.AppendBatch(logtest.MakeBatch(1, 10, 1000, byte(i)))
		require.NoError(t, err)
	}
	for _, mb := range []int{1 << 20, math.MaxInt32, math.MaxInt - 1, math.MaxInt} {
		for _, from := range []int64{0, 1, 4} {
			r, err := p.ReadFrom(from, mb)
			require.NoError(t, err)
			require.Equal(t, from, r.FirstOffset(), "maxBytes", mb)
			require.Equal(t, int64(5), r.NextOffset(), "maxBytes", mb, "from", from)
			require.NoError(t, r.Close())
		}
	}
}

// returnsWithin reports whether done delivers within d.
func returnsWithin(done <-chan error, d time.Duration) (error, bool) {
	select {
	case err := <-done:
		return err, true
	case <-time.After(d):
		return nil, false
	}
}

// TestTruncateDeadlocksWithReaderThatWrites: TruncateTo waits for the read
// leases of the segment it cuts without holding the partition's mutex, so a
// goroutine that holds Records and then moves the high watermark (as a
// leader's fetch handler does for a follower) does not deadlock with it.
// Writers that must follow the cut (AppendBatch here) wait for TruncateTo
// and run once the Records are closed; nothing hangs.
func TestTruncateDeadlocksWithReaderThatWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := openMem(t, plog.Config{DisableAutoHighWatermark: true})
		appendN(t, p, 3)
		require.NoError(t, p.SetHighWatermark(3))
		r, err := p.ReadFromFollower(0, 1<<20)
		require.NoError(t, err)
		want := slices.Clone(r.Bytes())

		truncated := make(chan error, 1)
		go func() { truncated <- p.TruncateTo(1) }()
		synctest.Wait()
		require.Empty(t, truncated, "TruncateTo returned while Records on the cut bytes are open")
		require.Equal(t, 1, p.Stats().TruncationWaiting)

		appended := make(chan error, 1)
		go func() {
			_, err := p.AppendBatch(logtest.MakeBatch(1, 10, 2000, 9))
			appended <- err
		}()
		// The Records holder moves the high watermark: it must not block.
		require.NoError(t, p.SetHighWatermark(2))
		require.Equal(t, int64(2), p.HighWatermark())
		// The truncation has changed nothing yet.
		require.Equal(t, int64(3), p.LogEndOffset())
		require.Equal(t, want, r.Bytes())

		// The append waits for the truncation, which waits for r.
		synctest.Wait()
		require.Empty(t, appended, "AppendBatch ran before TruncateTo finished")
		require.NoError(t, r.Close())
		require.NoError(t, <-truncated)
		require.NoError(t, <-appended)
		require.Equal(t, int64(2), p.LogEndOffset())
		require.Equal(t, int64(1), p.HighWatermark(), "clamped to the cut")
		require.NoError(t, p.SetHighWatermark(2))
		r3, err := p.ReadFrom(0, 1<<20)
		require.NoError(t, err)
		defer r3.Close()
		require.Equal(t, [][2]int64{{0, 0}, {1, 1}}, batchesIn(t, r3.Bytes()))
		require.NoError(t, p.Verify())
	})
}

// TestWriterWaitsForTruncationHeldByRecords: the documented rule, checked
// without hanging: while Records pin a segment TruncateTo cuts, Sync and
// Roll (writers that must follow the cut) wait for TruncateTo; they finish
// once the Records are closed from another goroutine.
func TestWriterWaitsForTruncationHeldByRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := openMem(t, plog.Config{})
		appendN(t, p, 3)
		r, err := p.ReadFrom(0, 1<<20)
		require.NoError(t, err)
		truncated := make(chan error, 1)
		go func() { truncated <- p.TruncateTo(1) }()
		synctest.Wait()
		writers := make(chan error, 2)
		go func() { writers <- p.Sync() }()
		go func() { writers <- p.Roll() }()
		synctest.Wait()
		require.Empty(t, writers, "a writer ran during the truncation")
		go func() { _ = r.Close() }() // what unblocks them
		for range 2 {
			require.NoError(t, <-writers)
		}
		require.NoError(t, <-truncated)
		require.Equal(t, int64(1), p.LogEndOffset())
		require.NoError(t, p.Close())
	})
}

// TestTruncateRacesWithHighWatermarkMoves stresses the window in which
// TruncateTo waits for read leases without the partition's mutex: readers
// that hold Records move the high watermark (SetHighWatermark runs during
// that window), while a writer appends and truncates. Every read is whole
// batches, held bytes stay intact, and the partition verifies at the end.
func TestTruncateRacesWithHighWatermarkMoves(t *testing.T) {
	p, _ := openT(t, plog.Config{SegmentBytes: 4096, IndexIntervalBytes: 256, DisableAutoHighWatermark: true})
	var done atomic.Bool
	var wg sync.WaitGroup
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 3))
			gt := goT{t}
			for !done.Load() {
				start, end := p.LogStartOffset(), p.LogEndOffset()
				if end < start {
					continue
				}
				o := start + rng.Int64N(end-start+1)
				rec, err := p.ReadFromFollower(o, rng.IntN(3000))
				if errors.Is(err, plog.ErrOffsetOutOfRange) {
					continue
				}
				if !assert.NoError(t, err, "ReadFromFollower(%d)", o) {
					return
				}
				held := slices.Clone(rec.Bytes())
				if len(rec.Bytes()) != 0 {
					checkRecords(gt, rec, o)
				}
				// Move the high watermark while holding the Records.
				if s, e := p.LogStartOffset(), p.LogEndOffset(); e >= s {
					err := p.SetHighWatermark(s + rng.Int64N(e-s+1))
					assert.False(t, err != nil && !errors.Is(err, plog.ErrOffsetOutOfRange), "SetHighWatermark: %v", err)
				}
				require.Equal(gt, held, rec.Bytes())
				require.NoError(gt, rec.Close())
			}
		}(uint64(r))
	}
	rng := rand.New(rand.NewPCG(9, 9))
	for i := 0; i < 400; i++ {
		switch {
		case i%23 == 22:
			end, start := p.LogEndOffset(), p.LogStartOffset()
			require.NoError(t, p.TruncateTo(start+(end-start)*3/4))
		case i%13 == 12:
			require.NoError(t, p.Roll())
		default:
			_, err := p.AppendBatch(logtest.MakeBatch(1+rng.IntN(10), rng.IntN(200), int64(i), byte(i)))
			require.NoError(t, err)
		}
	}
	done.Store(true)
	wg.Wait()
	require.NoError(t, p.Verify())
}

// TestCompressionRatioLimit: a highly compressible batch Kafka accepts (a
// zstd batch of one 2 MiB record of zeros, a few hundred bytes) is accepted
// by AppendBatch, and a Kafka-written active segment holding one between
// two other batches is recovered whole by an unclean Open (not cut as
// corrupt).
func TestCompressionRatioLimit(t *testing.T) {
	mk := func(c batch.Compression, base int64, v []byte) []byte {
		bld := batch.NewBuilder(batch.BuilderOptions{Compression: c, BaseOffset: base})
		require.NoError(t, bld.Add(batch.Record{Key: []byte("k"), Value: v, Timestamp: 1000}))
		b, err := bld.Build()
		require.NoError(t, err)
		return slices.Clone(b)
	}
	b1 := mk(batch.CompressionNone, 0, []byte("a"))
	b2 := mk(batch.CompressionZstd, 1, make([]byte, 2<<20))
	b3 := mk(batch.CompressionNone, 2, []byte("c"))
	require.NoError(t, batch.Batch(b2).Validate())

	p, _ := openT(t, plog.Config{})
	_, err := p.AppendBatch(slices.Clone(b2))
	require.NoError(t, err)

	dir := filepath.Join(t.TempDir(), "t-1")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	data := slices.Concat(b1, b2, b3)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), data, 0o644))
	q, err := plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	defer q.Close()
	require.Equal(t, int64(3), q.LogEndOffset())
	st, err := os.Stat(filepath.Join(dir, "00000000000000000000.log"))
	require.NoError(t, err)
	require.Equal(t, int64(len(data)), st.Size())
}
