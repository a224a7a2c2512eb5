package log_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/killtest"
	plog "github.com/partlog/partlog/log"
)

// producerKillIDs are the producer ids the helper appends for, one
// goroutine each.
var producerKillIDs = []int64{1001, 1002, 1003, 1004}

// producerKillConfig is the configuration parent and child open the
// partition with: per-append durability (an acknowledged batch is synced)
// and small segments, so that rolls, and the producer snapshots written at
// rolls, happen between kills.
func producerKillConfig() plog.Config {
	return plog.Config{FlushMessages: 1, SegmentBytes: 16 << 10, IndexIntervalBytes: 1024}
}

// killBatch is one producer batch: acknowledged to the child (or to the
// parent) or found in the log.
type killBatch struct {
	pid         int64
	epoch       int16
	first, last int32
	base        int64
	ts          int64 // first record's timestamp; record i has ts+i
}

func (b killBatch) String() string {
	return fmt.Sprintf("producer %d epoch %d seq %d..%d at %d", b.pid, b.epoch, b.first, b.last, b.base)
}

// bytes rebuilds the batch as its producer would resend it.
func (b killBatch) bytes(t failer) []byte {
	return prodBatch(t, b.pid, b.epoch, b.first, int(b.last-b.first)+1, b.ts, false)
}

// TestProducerKillHelperProcess is not a test: TestProducerKill runs the
// test binary again with -test.run selecting it and
// $PARTLOG_PRODUCER_KILL_CHILD_DIR set. It opens the partition there and,
// from one goroutine per idempotent producer, appends batches of 1 to 4
// records with consecutive sequences (now and then bumping the epoch and
// restarting at sequence 0), continuing from the state the log holds,
// until it is killed. After every acknowledged append it prints
// "ack <pid> <epoch> <first seq> <last seq> <base> <timestamp>" before the
// producer's next append.
func TestProducerKillHelperProcess(t *testing.T) {
	dir := os.Getenv(producerKillChildEnv)
	if dir == "" {
		t.Skip("helper process for TestProducerKill")
	}
	seed, err := strconv.ParseUint(os.Getenv(producerKillSeedEnv), 10, 64)
	if err != nil {
		fmt.Fprintf(os.Stdout, "error seed: %v\n", err)
		os.Exit(3)
	}
	p, err := plog.Open(dir, producerKillConfig())
	if err != nil {
		fmt.Fprintf(os.Stdout, "error open: %v\n", err)
		os.Exit(3)
	}
	var out sync.Mutex
	var wg sync.WaitGroup
	stop := time.Now().Add(20 * time.Second) // never outlive a lost parent
	for g, pid := range producerKillIDs {
		epoch, next := int16(0), int32(0)
		st, ok, err := p.ProducerState(pid)
		if err != nil {
			fmt.Fprintf(os.Stdout, "error producer state %d: %v\n", pid, err)
			os.Exit(3)
		}
		if ok && len(st.Batches) > 0 {
			epoch, next = st.Epoch, st.Batches[len(st.Batches)-1].LastSequence+1
		}
		rng := rand.New(rand.NewPCG(seed, uint64(g)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if rng.IntN(40) == 0 {
					epoch, next = epoch+1, 0
				}
				b := killBatch{pid: pid, epoch: epoch, first: next, last: next + int32(rng.IntN(4)), ts: time.Now().UnixMilli()}
				info, err := p.AppendBatchInfo(b.bytes(t))
				if err != nil || info.Duplicate {
					fmt.Fprintf(os.Stdout, "error append %v: %+v, %v\n", b, info, err)
					os.Exit(3)
				}
				b.base, next = info.Base, b.last+1
				line := fmt.Sprintf("ack %d %d %d %d %d %d\n", b.pid, b.epoch, b.first, b.last, b.base, b.ts)
				out.Lock()
				_, _ = os.Stdout.WriteString(line) // unbuffered: once written, the parent sees it
				out.Unlock()
			}
		}()
	}
	wg.Wait()
	_ = p.Close()
}

// TestProducerKill is the kill -9 half of the idempotent-producer crash
// tests (TestProducerRetryAfterCrash is the crash-simulating filesystem
// half): a child process (this test binary, running
// TestProducerKillHelperProcess) appends for several idempotent producers
// under the per-append policy and prints each acknowledged batch; the
// parent kills it with SIGKILL after a random number of acknowledgements
// (sometimes before any: during Open and its recovery), reopens the
// partition and checks, for every producer:
//   - every acknowledged batch is in the log with its offsets, the log is
//     contiguous and Verify passes;
//   - the producer's last batch in the log is its last acknowledged one or
//     the one after it (appended and synced, but killed before printing);
//   - a retry of that last batch, rebuilt with the same records, is a
//     Duplicate with the original offsets and moves nothing;
//   - a retry of each of its other last five batches in that epoch (the
//     last acknowledged one among them when the child died unprinted) is a
//     Duplicate with the original offsets when the reopened producer state
//     lists it (it lists a suffix of them: all those replayed from the log,
//     at least the last), and ErrOutOfOrderSequence otherwise, and a retry
//     of a batch of an older epoch is ErrInvalidProducerEpoch, all without
//     moving the log end;
//   - the next sequence is accepted at the log end.
//
// Then it starts the next child on the same directory, which continues each
// producer's sequence from the reopened state.
func TestProducerKill(t *testing.T) {
	if os.Getenv(producerKillChildEnv) != "" || os.Getenv(killChildEnv) != "" {
		t.Skip("in a helper process")
	}
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x9a11))
	dir := t.TempDir() + "/idem-kill-0"
	kills := 20
	if testing.Short() {
		kills = 6
	}
	acked := map[int64]killBatch{} // base -> every batch acknowledged so far
	var recognised, forgotten, fenced int
	for round := 0; round < kills; round++ {
		child := killtest.Start(t, "TestProducerKillHelperProcess", producerKillChildEnv+"="+dir, producerKillSeedEnv+"="+strconv.FormatUint(rng.Uint64(), 10))
		// The kill moment, counted in acknowledgements: none (during Open
		// and recovery) now and then, otherwise up to 400.
		killAt := 1 + rng.IntN(400)
		if rng.IntN(6) == 0 {
			killAt = rng.IntN(3)
		}
		if killAt == 0 {
			child.Kill()
		}
		lastAck := map[int64]killBatch{} // pid -> last acknowledgement, this round or before
		for _, b := range acked {
			if l, ok := lastAck[b.pid]; !ok || b.base > l.base {
				lastAck[b.pid] = b
			}
		}
		n := 0
		for line := range child.Lines {
			var b killBatch
			if _, err := fmt.Sscanf(line, "ack %d %d %d %d %d %d", &b.pid, &b.epoch, &b.first, &b.last, &b.base, &b.ts); err != nil {
				require.False(t, strings.HasPrefix(line, "error"), "round %d: child: %s", round, line)
				continue
			}
			prev, dup := acked[b.base]
			require.False(t, dup, "round %d: offset %d acknowledged twice: %v and %v", round, b.base, prev, b)
			if l, ok := lastAck[b.pid]; ok {
				require.Greater(t, b.base, l.base, "round %d: %v acknowledged after %v", round, b, l)
			}
			acked[b.base], lastAck[b.pid] = b, b
			if n++; n == killAt {
				child.Kill()
			}
		}
		child.Wait()

		p, err := plog.Open(dir, producerKillConfig())
		require.NoError(t, err, "round %d", round)
		require.NoError(t, p.Verify(), "round %d", round)
		inLog := producerKillWalk(t, p, round)
		perPid := map[int64][]killBatch{}
		for _, b := range inLog {
			perPid[b.pid] = append(perPid[b.pid], b)
		}
		found, unprinted := 0, 0
		for _, b := range inLog {
			if a, ok := acked[b.base]; ok {
				require.Equal(t, a, b, "round %d: acknowledged batch differs in the log", round)
				found++
			}
		}
		require.Equal(t, len(acked), found, "round %d: acknowledged batches missing from the log", round)

		retry := func(b killBatch) (plog.AppendInfo, error) {
			end := p.LogEndOffset()
			info, err := p.AppendBatchInfo(b.bytes(t))
			require.Equal(t, end, p.LogEndOffset(), "round %d: the retry of %v moved the log end", round, b)
			return info, err
		}
		mustDup := func(b killBatch, why string) {
			info, err := retry(b)
			require.NoError(t, err, "round %d: retry of %s %v", round, why, b)
			require.Equal(t, plog.AppendInfo{Base: b.base, LastOffset: b.base + int64(b.last-b.first), Duplicate: true}, info,
				"round %d: retry of %s %v", round, why, b)
		}
		for _, pid := range producerKillIDs {
			batches := perPid[pid]
			if len(batches) == 0 {
				_, ok := lastAck[pid]
				require.False(t, ok, "round %d: producer %d acknowledged but has no batch in the log", round, pid)
				continue
			}
			last := batches[len(batches)-1]
			if a, ok := lastAck[pid]; ok {
				// The last batch in the log is the last acknowledged one or
				// the one the child appended (and synced) but was killed
				// before printing: a producer appends only after printing.
				require.GreaterOrEqual(t, last.base, a.base, "round %d: producer %d", round, pid)
				if last.base != a.base {
					unprinted++
					require.Equal(t, a, batches[len(batches)-2], "round %d: producer %d: more than one batch after the last acknowledged one", round, pid)
				}
			}
			mustDup(last, "the last batch")
			// The producer's batches in its current epoch, and what the
			// reopened state knows of them.
			cur := len(batches)
			for cur > 0 && batches[cur-1].epoch == last.epoch {
				cur--
			}
			epochBatches := batches[cur:]
			st, ok, err := p.ProducerState(pid)
			require.NoError(t, err)
			require.True(t, ok, "round %d: producer %d unknown after reopen", round, pid)
			require.Equal(t, last.epoch, st.Epoch, "round %d: producer %d", round, pid)
			require.NotEmpty(t, st.Batches)
			require.LessOrEqual(t, len(st.Batches), min(5, len(epochBatches)))
			known := map[int64]bool{}
			for i, kb := range st.Batches {
				b := epochBatches[len(epochBatches)-len(st.Batches)+i]
				require.Equal(t, plog.ProducerBatch{FirstSequence: b.first, LastSequence: b.last, FirstOffset: b.base,
					LastOffset: b.base + int64(b.last-b.first), MaxTimestamp: b.ts + int64(b.last-b.first)}, kb,
					"round %d: producer %d: the state's batches are not the suffix of its log batches", round, pid)
				known[b.base] = true
			}
			for _, b := range epochBatches[max(0, len(epochBatches)-5) : len(epochBatches)-1] {
				if known[b.base] {
					mustDup(b, "an older batch")
					recognised++
					continue
				}
				_, err := retry(b)
				require.ErrorIs(t, err, plog.ErrOutOfOrderSequence, "round %d: retry of %v, older than the state knows", round, b)
				forgotten++
			}
			if cur > 0 {
				_, err := retry(batches[cur-1])
				require.ErrorIs(t, err, plog.ErrInvalidProducerEpoch, "round %d: retry of %v from an older epoch", round, batches[cur-1])
				fenced++
			}
			// The next sequence is a new batch at the log end; it counts as
			// acknowledged (to the parent) from now on.
			nb := killBatch{pid: pid, epoch: last.epoch, first: last.last + 1, last: last.last + 1, ts: time.Now().UnixMilli()}
			end := p.LogEndOffset()
			info, err := p.AppendBatchInfo(nb.bytes(t))
			require.NoError(t, err, "round %d: next sequence %v", round, nb)
			require.Equal(t, plog.AppendInfo{Base: end, LastOffset: end}, info, "round %d: next sequence %v", round, nb)
			nb.base = end
			acked[end] = nb
		}
		t.Logf("round %d: kill after %d acknowledgements: %d printed, %d appended but unprinted, log end %d",
			round, killAt, n, unprinted, p.LogEndOffset())
		require.NoError(t, p.Close())
	}
	t.Logf("older retries: %d recognised, %d beyond the reopened state (ErrOutOfOrderSequence); %d from older epochs fenced", recognised, forgotten, fenced)
}

// producerKillWalk reads the whole log and returns its producer batches
// in order, checking that the batches are contiguous from the log start
// and that each holds exactly the bytes its producer would resend.
func producerKillWalk(t *testing.T, p *plog.Partition, round int) []killBatch {
	t.Helper()
	var out []killBatch
	killWalk(t, p, round, func(b batch.Batch) {
		kb := killBatch{pid: b.ProducerID(), epoch: b.ProducerEpoch(), first: b.BaseSequence(), last: b.LastSequence(),
			base: b.BaseOffset(), ts: b.BaseTimestamp()}
		// From the magic byte on (CRC, attributes, producer fields,
		// records) the stored batch is what the producer sent.
		sent := kb.bytes(t)
		require.True(t, bytes.Equal(sent[16:], b[16:]), "round %d: %v: stored bytes differ from the rebuilt batch", round, kb)
		out = append(out, kb)
	})
	return out
}
