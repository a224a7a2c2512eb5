package log_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// soakSentinels are the exported errors a call given bad input may wrap:
// the append, read and producer errors, and batch.ErrCorrupt for bytes
// that do not frame.
var soakSentinels = []error{
	plog.ErrInvalidBatch, plog.ErrBatchTooLarge, plog.ErrControlBatch, plog.ErrInvalidBatchTimestamp,
	plog.ErrUnexpectedOffset, plog.ErrOffsetOutOfRange, plog.ErrInvalidTimestamp, plog.ErrOutOfOrderSequence,
	plog.ErrInvalidProducerEpoch, plog.ErrInvalidTxnState, plog.ErrStaleLeaderEpoch,
	plog.ErrTransactionCoordinatorFenced, batch.ErrCorrupt,
}

// soakTyped reports whether err wraps one of soakSentinels.
func soakTyped(err error) bool {
	for _, s := range soakSentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// soakBoundaryOffsets are offsets at and near the int64 limits, and around
// a log's bounds.
func soakBoundaryOffsets(rng *rand.Rand, start, end int64) int64 {
	switch rng.IntN(10) {
	case 0:
		return math.MinInt64
	case 1:
		return math.MaxInt64
	case 2:
		return math.MaxInt64 - rng.Int64N(1<<31)
	case 3:
		return -1 - rng.Int64N(1<<31)
	case 4:
		return start - 1
	case 5:
		return end + 1 + rng.Int64N(1<<40)
	case 6:
		return math.MinInt64 + rng.Int64N(1<<31)
	default:
		return start + rng.Int64N(end-start+1)
	}
}

// soakMutate returns a damaged copy of the producer batch good: bytes
// flipped (with or without the CRC made right again, so that the checks
// after the CRC see the damage too), cut, extended, replaced by noise, or
// header fields set to boundary values.
func soakMutate(rng *rand.Rand, good []byte) []byte {
	b := append([]byte(nil), good...)
	fixCRC := false
	switch rng.IntN(11) {
	case 0:
		for range 1 + rng.IntN(3) {
			b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
		}
	case 1: // damage past the CRC field, then make the CRC right
		for range 1 + rng.IntN(3) {
			b[21+rng.IntN(len(b)-21)] ^= byte(1 + rng.IntN(255))
		}
		fixCRC = true
	case 2:
		b = b[:rng.IntN(len(b))]
	case 3:
		b = append(b, make([]byte, 1+rng.IntN(64))...)
	case 4:
		b = make([]byte, rng.IntN(128))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
	case 5:
		b[16] = []byte{0, 1, 3, 0xff}[rng.IntN(4)] // magic
	case 6:
		v := []int32{0, -1, math.MaxInt32, math.MinInt32, int32(len(b) - 11), int32(len(b) - 13)}[rng.IntN(6)]
		binary.BigEndian.PutUint32(b[8:], uint32(v)) // batchLength
	case 7:
		v := []int32{-1, math.MaxInt32, math.MinInt32, 1 << 20}[rng.IntN(4)]
		binary.BigEndian.PutUint32(b[23:], uint32(v)) // lastOffsetDelta
		fixCRC = true
	case 8:
		v := []int32{0, -1, math.MaxInt32, math.MinInt32}[rng.IntN(4)]
		binary.BigEndian.PutUint32(b[57:], uint32(v)) // recordsCount
		fixCRC = true
	case 9:
		v := []int64{math.MaxInt64, math.MinInt64, -2, 0}[rng.IntN(4)]
		binary.BigEndian.PutUint64(b[27+8*rng.IntN(2):], uint64(v)) // baseTimestamp or maxTimestamp
		fixCRC = true
	default:
		a := uint16(rng.IntN(1 << 8)) // compression, timestamp type, transactional, control, horizon bits
		binary.BigEndian.PutUint16(b[21:], a)
		fixCRC = true
	}
	if fixCRC {
		batch.Batch(b).SetCRC()
	}
	return b
}

// soakBadInput is one partition of the bad-input soak with the model of
// what it must hold.
type soakBadInput struct {
	t     *testing.T
	rng   *rand.Rand
	p     *plog.Partition
	m     *logtest.Model
	calls int
	// Counts for the log.
	refused, accepted, reads, checks int
}

// TestSoakBadInput is issue 28's bad-input campaign as a test: random and
// mutated batches (bytes flipped with and without a valid CRC, cut,
// extended, noise, magic, lengths, offset deltas, record counts,
// timestamps and attributes at their limits) to AppendBatch and
// AppendAssigned, idempotent batches with random epochs and sequences,
// markers of unknown types, and offsets, byte limits and timestamps at the
// int64 and int32 boundaries to the reads, TruncateTo, DeleteRecordsBefore,
// SetHighWatermark, AssignEpochStartOffset, EndOffsetForEpoch and
// OffsetForTimestamp, on partitions checked against logtest.Model. Every
// refused call must return an error wrapping an exported sentinel and change
// nothing (the three offsets are compared after each, the whole partition
// with logtest.Check every few hundred calls); an accepted batch must be one
// the model accepts too. A second part closes a Dir (or one partition) while
// goroutines append, read, iterate and wait on it: every call returns nil or
// ErrClosed, none hangs, and after a reopen every acknowledged batch is
// there. No call may panic.
func TestSoakBadInput(t *testing.T) {
	seed := soakSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0xbad))
	sessions, perSession := 30, 4000
	if testing.Short() || raceEnabled {
		sessions, perSession = 6, 2000
	}
	var total soakBadInput
	closes := 0
	ran := soakLoop(t, sessions, func(i int) {
		s := &soakBadInput{t: t, rng: rng}
		s.session(i, perSession)
		total.calls += s.calls
		total.refused += s.refused
		total.accepted += s.accepted
		total.reads += s.reads
		total.checks += s.checks
		closes += soakCloseRace(t, rng, i)
	})
	t.Logf("soak bad input: %d sessions, %d calls (%d refused with a sentinel, %d bad-looking batches accepted as the model accepts them, %d reads at boundary offsets), %d model checks, %d concurrent Close races",
		ran, total.calls, total.refused, total.accepted, total.reads, total.checks, closes)
}

// session runs n random calls on a new partition.
func (s *soakBadInput) session(id, n int) {
	t := s.t
	s.fresh()
	for k := range n {
		s.call(fmt.Sprintf("session %d call %d", id, k))
		if k%500 == 499 {
			require.NoError(t, logtest.Check(s.p, s.m), "session %d call %d", id, k)
			s.checks++
		}
	}
	require.NoError(t, logtest.Check(s.p, s.m), "session %d", id)
	s.checks++
	require.NoError(t, s.p.Close())
}

// fresh closes the partition, if any, and starts a new empty one on a new
// filesystem, with a new model.
func (s *soakBadInput) fresh() {
	if s.p != nil {
		require.NoError(s.t, s.p.Close())
	}
	// Producers never expire: a damaged timestamp would otherwise make the
	// partition forget a producer at the next roll, which the model does
	// not follow (logtest: "Producer expiry is not modelled").
	cfg := plog.Config{SegmentBytes: 16 << 10, SegmentIndexBytes: 4096, IndexIntervalBytes: 256, FS: vfs.NewMem(),
		Logger: slog.New(slog.DiscardHandler), ProducerIDExpiration: 100 * 365 * 24 * time.Hour}
	p, err := plog.Open("/p", cfg)
	require.NoError(s.t, err)
	s.p, s.m = p, logtest.NewModel(0, false)
}

// call makes one call with bad input, or a good append now and then so that
// the log has batches to read and mutate.
func (s *soakBadInput) call(where string) {
	t, rng, p := s.t, s.rng, s.p
	s.calls++
	start, hw, end := p.LogStartOffset(), p.HighWatermark(), p.LogEndOffset()
	var err error
	refused := func(what string) {
		if err == nil { // a no-op: the offsets must not move either
			s.refused--
		}
		require.True(t, err == nil || soakTyped(err), "%s: %s: an error without a sentinel: %v", where, what, err)
		require.Equal(t, [3]int64{start, hw, end}, [3]int64{p.LogStartOffset(), p.HighWatermark(), p.LogEndOffset()},
			"%s: %s refused (%v) but the offsets moved", where, what, err)
		s.refused++
	}
	switch op := rng.IntN(100); {
	case op < 10: // a good batch
		b := soakPlainBatch(t, 0, end)
		base, err := p.AppendBatch(b)
		require.NoError(t, err, where)
		require.NoError(t, s.m.AppendBatch(b, base), where)
	case op < 50: // a damaged producer batch
		good := soakPlainBatch(t, 0, end)
		if rng.IntN(3) == 0 {
			good = prodBatch(t, int64(rng.IntN(3)), int16(rng.IntN(3)), int32(rng.IntN(8))-1, 1+rng.IntN(3), pbNow(), rng.IntN(4) == 0)
		}
		b := soakMutate(rng, good)
		orig := append([]byte(nil), b...)
		var info plog.AppendInfo
		info, err = p.AppendBatchInfo(b)
		require.True(t, bytes.Equal(orig, b), "%s: AppendBatch wrote into its argument", where)
		if err != nil {
			refused("AppendBatch")
			return
		}
		s.accepted++
		if !info.Duplicate { // a retry of one of its producer's last batches gets the original's offsets
			require.Equal(t, end, info.Base, where)
		}
		require.NoError(t, s.m.AppendBatch(b, info.Base), "%s: the partition accepted a batch the model refuses (%+v)", where, info)
	case op < 58: // a follower's batch, damaged or at a bad offset
		b := soakPlainBatch(t, 0, end)
		batch.Batch(b).SetBaseOffset(end)
		batch.Batch(b).SetCRC()
		if rng.IntN(2) == 0 {
			b = soakMutate(rng, b)
		} else {
			bad := []int64{math.MaxInt64, math.MaxInt64 - int64(batch.Batch(b).LastOffsetDelta()), math.MinInt64, -1, end - 1}[rng.IntN(5)]
			batch.Batch(b).SetBaseOffset(bad)
			batch.Batch(b).SetCRC()
		}
		// A damaged batch may still be a valid follower batch at or past
		// the log end (a gap, or an offset the header now says): the
		// model takes what the partition took.
		_, err = p.AppendAssigned(b)
		if err != nil {
			refused("AppendAssigned")
			return
		}
		// The follower path checks headers, not records (a leader
		// validated them): a damaged batch it takes may hold records that
		// do not decode or a maxTimestamp its records do not reach, which
		// the model (it decodes the records) cannot follow. The batch must
		// have a valid header; the soak goes on with a new log.
		s.accepted++
		require.NoError(t, batch.Batch(b).ValidateHeader(), "%s: AppendAssigned took a batch whose header is bad", where)
		require.GreaterOrEqual(t, batch.Batch(b).BaseOffset(), end, where)
		s.fresh()
	case op < 62:
		_, err = p.AppendMarker(batch.TxnMarker{Type: batch.ControlType(2 + rng.IntN(100)), ProducerID: int64(rng.IntN(3)), Timestamp: pbNow()})
		require.Error(t, err, "%s: a marker of no known type was written", where)
		refused("AppendMarker")
	case op < 75:
		off := soakBoundaryOffsets(rng, start, end)
		maxBytes := []int{math.MinInt, -1, 0, 1, 61, math.MaxInt, rng.IntN(1 << 16)}[rng.IntN(7)]
		var recs plog.Records
		switch rng.IntN(3) {
		case 0:
			recs, err = p.ReadFrom(off, maxBytes)
		case 1:
			recs, err = p.ReadFromFollower(off, maxBytes)
		default:
			recs, _, err = p.ReadCommitted(off, maxBytes)
		}
		s.reads++
		if err != nil {
			require.ErrorIs(t, err, plog.ErrOffsetOutOfRange, "%s: read at %d, %d bytes", where, off, maxBytes)
			require.True(t, off < start || off > end, "%s: read at %d inside [%d, %d] refused: %v", where, off, start, end, err)
			refused("read")
			return
		}
		require.False(t, off < start || off > end, "%s: read at %d outside [%d, %d] accepted", where, off, start, end)
		for _, err := range recs.Batches() {
			require.NoError(t, err, where)
		}
		require.NoError(t, recs.Close(), where)
	case op < 80:
		ts := []int64{math.MinInt64, -4, -3, -2, -1, 0, math.MaxInt64, soakTS0 + rng.Int64N(end+2)}[rng.IntN(8)]
		_, _, err = p.OffsetForTimestamp(ts)
		s.reads++
		if err != nil {
			require.ErrorIs(t, err, plog.ErrInvalidTimestamp, "%s: OffsetForTimestamp(%d)", where, ts)
			refused("OffsetForTimestamp")
		}
	case op < 85:
		// A negative offset is refused; one past the log end cuts
		// nothing (TruncateTo's doc; an offset below the log start
		// legitimately restarts the log there, so it is not tried).
		off := []int64{math.MinInt64, -1, -1 - rng.Int64N(1<<40), end + 1, math.MaxInt64}[rng.IntN(5)]
		err = p.TruncateTo(off)
		if off > end {
			require.NoError(t, err, "%s: TruncateTo(%d) past the log end %d", where, off, end)
		}
		refused("TruncateTo")
	case op < 90:
		off := []int64{hw + 1, math.MaxInt64, end + 1 + rng.Int64N(1<<40)}[rng.IntN(3)]
		err = p.DeleteRecordsBefore(off)
		require.ErrorIs(t, err, plog.ErrOffsetOutOfRange, "%s: DeleteRecordsBefore(%d)", where, off)
		refused("DeleteRecordsBefore")
	case op < 94:
		off := []int64{math.MinInt64, -1, start - 1, end + 1, math.MaxInt64}[rng.IntN(5)]
		if off >= start && off <= end {
			return
		}
		err = p.SetHighWatermark(off)
		require.ErrorIs(t, err, plog.ErrOffsetOutOfRange, "%s: SetHighWatermark(%d)", where, off)
		refused("SetHighWatermark")
	case op < 97:
		epoch := []int32{-1, math.MinInt32, -2}[rng.IntN(3)]
		err = p.AssignEpochStartOffset(epoch, soakBoundaryOffsets(rng, start, end))
		require.Error(t, err, "%s: AssignEpochStartOffset(%d)", where, epoch)
		refused("AssignEpochStartOffset")
	default:
		epoch := []int32{math.MinInt32, -2, -1, 0, 1, math.MaxInt32}[rng.IntN(6)]
		_, _, err = p.EndOffsetForEpoch(epoch)
		s.reads++
		if err != nil {
			refused("EndOffsetForEpoch")
		}
	}
}

// soakCloseRace opens a Dir of three partitions on a new MemFS, starts
// goroutines that append, read, iterate (Records) and wait (Wait, Poll)
// on them, and after a random number of their calls closes the Dir or
// one partition. Every call must return nil or an error wrapping
// ErrClosed (ctx.Err for the waits the test ends), and after a reopen
// every acknowledged batch must be there. It returns 1 (one race run).
func soakCloseRace(t *testing.T, rng *rand.Rand, id int) int {
	mem := vfs.NewMem()
	cfg := plog.DirConfig{Config: plog.Config{SegmentBytes: 8 << 10, SegmentIndexBytes: 4096, FS: mem, Logger: slog.New(slog.DiscardHandler)}}
	d, err := plog.OpenDir("/d", cfg)
	require.NoError(t, err)
	parts := make([]*plog.Partition, 3)
	for i := range parts {
		parts[i], err = d.CreatePartition("c", int32(i))
		require.NoError(t, err)
	}
	var mu sync.Mutex
	acked := map[[2]int64]int64{} // {partition, base} -> next
	var calls sync.WaitGroup
	closeAfter := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	okErr := func(err error) bool {
		return err == nil || errors.Is(err, plog.ErrClosed) || errors.Is(err, context.Canceled)
	}
	var failed error
	fail := func(err error) {
		mu.Lock()
		failed = errors.Join(failed, err)
		mu.Unlock()
	}
	closeAt := rng.IntN(300)
	var n sync.Mutex
	count := 0
	tick := func() {
		n.Lock()
		count++
		if count == closeAt {
			close(closeAfter)
		}
		n.Unlock()
	}
	// busy counts the goroutines that end on their own; the poller waits
	// for records that may never come, until the Close or cancel.
	var busy sync.WaitGroup
	for g := range 6 {
		calls.Add(1)
		if g != 4 {
			busy.Add(1)
		}
		go func() {
			defer calls.Done()
			if g != 4 {
				defer busy.Done()
			}
			p := parts[g%3]
			for k := 0; ctx.Err() == nil && k < 400; k++ {
				switch g {
				case 0, 1, 2:
					if p.Stats().Failed {
						fail(fmt.Errorf("partition %d failed", g%3))
						return
					}
					end := p.LogEndOffset()
					base, err := p.AppendBatch(soakPlainBatch(t, g%3, end))
					if !okErr(err) {
						fail(fmt.Errorf("append: %w", err))
						return
					}
					if err == nil {
						mu.Lock()
						acked[[2]int64{int64(g % 3), base}] = p.LogEndOffset()
						mu.Unlock()
					}
				case 3:
					recs, err := p.ReadFrom(0, 4096)
					if err == nil {
						for _, err := range recs.Batches() {
							if err != nil {
								fail(fmt.Errorf("batches: %w", err))
							}
						}
						err = recs.Close()
					}
					if !okErr(err) {
						fail(fmt.Errorf("read: %w", err))
						return
					}
				case 4:
					for _, err := range p.Poll(ctx, p.LogEndOffset(), 10) {
						if !okErr(err) {
							fail(fmt.Errorf("poll: %w", err))
						}
						break
					}
				default:
					_, err := d.Lookup("c", int32(k%3))
					if !okErr(err) {
						fail(fmt.Errorf("lookup: %w", err))
						return
					}
				}
				tick()
			}
		}()
	}
	closedOne := -1
	select {
	case <-closeAfter:
	case <-waitGroupDone(&busy):
	}
	if rng.IntN(2) == 0 {
		err = d.Close()
	} else {
		closedOne = rng.IntN(3)
		err = parts[closedOne].Close()
	}
	require.NoError(t, err, "race %d: close", id)
	cancel() // ends the polls that wait on partitions still open
	calls.Wait()
	require.NoError(t, failed, "race %d", id)
	if closedOne >= 0 {
		require.NoError(t, d.Close(), "race %d", id)
	}
	d, err = plog.OpenDir("/d", cfg)
	require.NoError(t, err, "race %d: reopen", id)
	for k, next := range acked {
		p := d.Partition("c", int32(k[0]))
		recs, err := p.ReadFrom(k[1], 1)
		require.NoError(t, err, "race %d: partition %d at %d", id, k[0], k[1])
		for b, err := range recs.Batches() {
			require.NoError(t, err)
			require.Equal(t, next, b.NextOffset(), "race %d: partition %d at %d", id, k[0], k[1])
			require.True(t, soakSameBatch(b, soakPlainBatch(t, int(k[0]), k[1])), "race %d: partition %d at %d", id, k[0], k[1])
			break
		}
		require.NoError(t, recs.Close())
	}
	require.NoError(t, d.Close())
	return 1
}

// waitGroupDone returns a channel closed once wg's count is zero.
func waitGroupDone(wg *sync.WaitGroup) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}
