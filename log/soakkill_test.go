package log_test

import (
	"fmt"
	"log/slog"
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
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// Environment of the TestSoakKill helper process: the log directory (the
// helper does nothing without it) and its random seed.
const (
	soakKillDirEnv  = "PARTLOG_SOAK_KILL_DIR"
	soakKillSeedEnv = "PARTLOG_SOAK_KILL_SEED"
)

// The kill soak's Dir: soakKillPlain partitions of topic "plain" that take
// plain batches, and soakKillTxn partitions of topic "txn", each written by
// one transactional producer (id soakKillPID0 + partition) that also sends
// idempotent batches between its transactions.
const (
	soakKillPlain   = 40
	soakKillTxn     = 10
	soakKillWorkers = 5
	soakKillPID0    = 7000
)

// soakKillConfig is the configuration parent and child open the Dir with:
// per-append durability, small segments so that rolls (and the producer
// snapshots written at rolls) happen between kills.
func soakKillConfig() plog.DirConfig {
	return plog.DirConfig{
		Config: plog.Config{FlushMessages: 1, SegmentBytes: 32 << 10, IndexIntervalBytes: 1024,
			Logger: slog.New(slog.DiscardHandler)}, // recovery's warnings are expected here
		RecoveryThreads: 4,
	}
}

// soakKillEntry is one batch or marker of a txn partition, acknowledged to
// the child or found in the log. kind is 'd' (an idempotent batch), 't' (a
// transactional batch), 'c' or 'a' (a COMMIT or ABORT marker).
type soakKillEntry struct {
	kind        byte
	base, last  int64
	epoch       int16
	first, lseq int32 // sequences of a batch; 0 for a marker
}

// TestSoakKillHelperProcess is not a test: TestSoakKill runs the test binary
// again with -test.run selecting it and $PARTLOG_SOAK_KILL_DIR set. It opens
// the Dir there, creates the partitions it lacks and appends from
// soakKillWorkers goroutines, each owning every soakKillWorkers-th
// partition, until it is killed. A plain partition gets soakPlainBatch at its
// log end; a txn partition gets its producer's next idempotent batch, a
// transaction (transactional batches, then a COMMIT or ABORT marker) or an
// epoch bump between transactions, continuing from the state the log holds.
// After every acknowledged append it prints "plain <part> <base> <next>" or
// "txn <part> <kind> <base> <last> <epoch> <first seq> <last seq>".
func TestSoakKillHelperProcess(t *testing.T) {
	dir := os.Getenv(soakKillDirEnv)
	if dir == "" {
		t.Skip("helper process for TestSoakKill")
	}
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stdout, "error "+format+"\n", args...)
		os.Exit(3)
	}
	seed, err := strconv.ParseUint(os.Getenv(soakKillSeedEnv), 10, 64)
	if err != nil {
		fail("seed: %v", err)
	}
	d, err := plog.OpenDir(dir, soakKillConfig())
	if err != nil {
		fail("open: %v", err)
	}
	parts := make([]*plog.Partition, soakKillPlain+soakKillTxn)
	for i := range parts {
		topic, n := soakKillPartition(i)
		if parts[i], err = d.CreatePartition(topic, n); err != nil {
			fail("create %s-%d: %v", topic, n, err)
		}
	}
	var out sync.Mutex
	emit := func(line string) {
		out.Lock()
		_, _ = os.Stdout.WriteString(line) // unbuffered: once written, the parent sees it
		out.Unlock()
	}
	stop := time.Now().Add(30 * time.Second) // never outlive a lost parent
	var wg sync.WaitGroup
	for w := range soakKillWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			txns := map[int]*soakKillProducer{}
			for time.Now().Before(stop) {
				i := w + soakKillWorkers*rng.IntN(len(parts)/soakKillWorkers)
				p := parts[i]
				if i < soakKillPlain {
					end := p.LogEndOffset()
					base, err := p.AppendBatch(soakPlainBatch(t, i, end))
					if err != nil || base != end {
						fail("append plain %d at %d: base %d, %v", i, end, base, err)
					}
					emit(fmt.Sprintf("plain %d %d %d\n", i, base, p.LogEndOffset()))
					continue
				}
				pr := txns[i]
				if pr == nil {
					pr = soakKillProducerOf(p, int64(soakKillPID0+i), fail)
					txns[i] = pr
				}
				e := pr.step(t, p, rng, fail)
				emit(fmt.Sprintf("txn %d %c %d %d %d %d %d\n", i, e.kind, e.base, e.last, e.epoch, e.first, e.lseq))
			}
		}()
	}
	wg.Wait()
	_ = d.Close()
}

// soakKillPartition names the kill soak's partition i.
func soakKillPartition(i int) (string, int32) {
	if i < soakKillPlain {
		return "plain", int32(i)
	}
	return "txn", int32(i - soakKillPlain)
}

// soakKillProducer is the helper's transactional producer of one txn
// partition: its epoch, next sequence and whether its transaction is open.
type soakKillProducer struct {
	pid   int64
	epoch int16
	next  int32
	open  bool
}

// soakKillProducerOf continues producer pid from what p's producer state
// says.
func soakKillProducerOf(p *plog.Partition, pid int64, fail func(string, ...any)) *soakKillProducer {
	pr := &soakKillProducer{pid: pid}
	st, ok, err := p.ProducerState(pid)
	if err != nil {
		fail("producer state %d: %v", pid, err)
	}
	if ok {
		pr.epoch, pr.open = st.Epoch, st.CurrentTxnFirstOffset >= 0
		if len(st.Batches) > 0 {
			pr.next = st.Batches[len(st.Batches)-1].LastSequence + 1
		}
	}
	return pr
}

// step appends the producer's next batch or marker and returns it.
func (pr *soakKillProducer) step(t *testing.T, p *plog.Partition, rng *rand.Rand, fail func(string, ...any)) soakKillEntry {
	switch r := rng.IntN(20); {
	case pr.open && r < 6:
		typ, kind := batch.ControlCommit, byte('c')
		if r < 2 {
			typ, kind = batch.ControlAbort, 'a'
		}
		off, err := p.AppendMarker(batch.TxnMarker{Type: typ, ProducerID: pr.pid, ProducerEpoch: pr.epoch, Timestamp: time.Now().UnixMilli()})
		if err != nil {
			fail("marker %c for %d epoch %d: %v", kind, pr.pid, pr.epoch, err)
		}
		pr.open = false
		return soakKillEntry{kind: kind, base: off, last: off, epoch: pr.epoch}
	case !pr.open && r == 19:
		pr.epoch, pr.next = pr.epoch+1, 0
	}
	txn := pr.open || rng.IntN(2) == 0
	n := 1 + rng.IntN(4)
	info, err := p.AppendBatchInfo(prodBatch(t, pr.pid, pr.epoch, pr.next, n, time.Now().UnixMilli(), txn))
	if err != nil || info.Duplicate {
		fail("append %d epoch %d seq %d txn %v: %+v, %v", pr.pid, pr.epoch, pr.next, txn, info, err)
	}
	e := soakKillEntry{kind: 'd', base: info.Base, last: info.LastOffset, epoch: pr.epoch, first: pr.next, lseq: pr.next + int32(n) - 1}
	if txn {
		e.kind = 't'
	}
	pr.next += int32(n)
	pr.open = txn
	return e
}

// TestSoakKill is the kill -9 soak over a log directory: a child process
// (this test binary, running TestSoakKillHelperProcess) appends to the 50
// partitions of a Dir under the per-append policy from several goroutines
// (plain batches; idempotent batches and transactions ending in COMMIT or
// ABORT markers) and prints each acknowledged append; the parent SIGKILLs it
// after a random number of acknowledgements (now and then at once, while
// OpenDir recovers the previous kill's partitions), reopens the Dir and
// checks every partition:
//   - Verify passes and the batches are contiguous from the log start;
//   - every acknowledged batch or marker is there with its offsets;
//   - the log is a prefix of what was appended: each plain batch is the
//     batch the child built for that offset, byte for byte, and each txn
//     partition batch is its producer's batch rebuilt from its header;
//   - the open transactions, the last stable offset and what read_committed
//     returns and reports as aborted equal an oracle computed from the
//     recovered batches (txnOracle), and, after a clean close and reopen,
//     so do the .txnindex files;
//   - a retry of a producer's last batch, when the log ends its history with
//     a batch, is a Duplicate with the original offsets.
//
// The next child then continues on the same directory. TestKill and
// TestProducerKill do the same for one partition; this soak adds the Dir
// (recovery threads, root checkpoints of 50 partitions) and transactions.
func TestSoakKill(t *testing.T) {
	if os.Getenv(soakKillDirEnv) != "" || os.Getenv(killChildEnv) != "" || os.Getenv(producerKillChildEnv) != "" {
		t.Skip("in a helper process")
	}
	seed := soakSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x50a6))
	dir := t.TempDir() + "/soak-kill"
	rounds := 5
	if testing.Short() {
		rounds = 3
	}
	plainAcked := make([]map[int64]int64, soakKillPlain) // base -> next, per plain partition
	txnAcked := make([]map[int64]soakKillEntry, soakKillTxn)
	for i := range plainAcked {
		plainAcked[i] = map[int64]int64{}
	}
	for i := range txnAcked {
		txnAcked[i] = map[int64]soakKillEntry{}
	}
	var acks, batches, dups, atOpen int
	ran := soakLoop(t, rounds, func(round int) {
		child := killtest.Start(t, "TestSoakKillHelperProcess", soakKillDirEnv+"="+dir, soakKillSeedEnv+"="+strconv.FormatUint(rng.Uint64(), 10))
		killAt := 1 + rng.IntN(1000)
		if rng.IntN(6) == 0 {
			killAt, atOpen = 0, atOpen+1
			child.Kill()
		}
		n := 0
		for line := range child.Lines {
			require.False(t, strings.HasPrefix(line, "error"), "round %d: child: %s", round, line)
			var part int
			var base, next int64
			if _, err := fmt.Sscanf(line, "plain %d %d %d", &part, &base, &next); err == nil {
				prev, ok := plainAcked[part][base]
				require.False(t, ok && prev != next, "round %d: plain %d: offset %d acknowledged as [%d, %d) and [%d, %d)", round, part, base, base, prev, base, next)
				plainAcked[part][base] = next
			} else {
				var e soakKillEntry
				_, err := fmt.Sscanf(line, "txn %d %c %d %d %d %d %d", &part, &e.kind, &e.base, &e.last, &e.epoch, &e.first, &e.lseq)
				require.NoError(t, err, "round %d: child line %q", round, line)
				part -= soakKillPlain
				prev, ok := txnAcked[part][e.base]
				require.False(t, ok && prev != e, "round %d: txn %d: offset %d acknowledged as %+v and %+v", round, part, e.base, prev, e)
				txnAcked[part][e.base] = e
			}
			if n++; n == killAt {
				child.Kill()
			}
		}
		child.Wait()
		acks += n

		d, err := plog.OpenDir(dir, soakKillConfig())
		require.NoError(t, err, "round %d", round)
		for i := range soakKillPlain + soakKillTxn {
			topic, pn := soakKillPartition(i)
			p := d.Partition(topic, pn)
			if p == nil {
				// The child died before creating it: then it acknowledged
				// nothing there.
				if i < soakKillPlain {
					require.Empty(t, plainAcked[i], "round %d: plain %d lost", round, i)
				} else {
					require.Empty(t, txnAcked[i-soakKillPlain], "round %d: txn %d lost", round, i-soakKillPlain)
				}
				continue
			}
			where := fmt.Sprintf("round %d: %s-%d", round, topic, pn)
			require.NoError(t, p.Verify(), where)
			if i < soakKillPlain {
				seen := 0
				killWalk(t, p, round, func(b batch.Batch) {
					require.True(t, soakSameBatch(b, soakPlainBatch(t, i, b.BaseOffset())), "%s: the batch at %d is not the one appended there", where, b.BaseOffset())
					if next, ok := plainAcked[i][b.BaseOffset()]; ok {
						require.Equal(t, next, b.NextOffset(), "%s: batch at %d", where, b.BaseOffset())
						seen++
					}
					batches++
				})
				require.Equal(t, len(plainAcked[i]), seen, "%s: acknowledged batches missing", where)
				continue
			}
			dups += soakKillCheckTxn(t, where, p, int64(soakKillPID0+i), txnAcked[i-soakKillPlain], &batches)
		}
		require.NoError(t, d.Close(), "round %d", round)
		// After a clean close the .txnindex files hold exactly the
		// aborted transactions of the recovered log.
		d, err = plog.OpenDir(dir, soakKillConfig())
		require.NoError(t, err, "round %d: clean reopen", round)
		for i := soakKillPlain; i < soakKillPlain+soakKillTxn; i++ {
			if p := d.Partition(soakKillPartition(i)); p != nil {
				checkTxnState(t, fmt.Sprintf("round %d: txn-%d after a clean reopen", round, i-soakKillPlain), p, vfs.Default, p.Dir(), true)
			}
		}
		require.NoError(t, d.Close(), "round %d", round)
		t.Logf("round %d: killed after %d acknowledgements (asked %d)", round, n, killAt)
	})
	t.Logf("soak kill: %d kills (%d during OpenDir), %d appends acknowledged, %d batches checked after the kills, %d retries recognised as duplicates", ran, atOpen, acks, batches, dups)
}

// soakKillCheckTxn checks txn partition p after a kill against what the
// child acknowledged (acked, by base offset) and returns how many retries
// were recognised (0 or 1).
func soakKillCheckTxn(t *testing.T, where string, p *plog.Partition, pid int64, acked map[int64]soakKillEntry, batches *int) int {
	t.Helper()
	var inLog []soakKillEntry
	var lastData batch.Batch
	killWalk(t, p, 0, func(b batch.Batch) {
		require.Equal(t, pid, b.ProducerID(), "%s: batch at %d", where, b.BaseOffset())
		e := soakKillEntry{kind: 'd', base: b.BaseOffset(), last: b.NextOffset() - 1, epoch: b.ProducerEpoch()}
		switch {
		case b.Attributes().IsControl():
			var dec batch.Decoder
			for r, err := range b.All(&dec) {
				require.NoError(t, err, where)
				cr, err := batch.ParseControlRecord(r)
				require.NoError(t, err, where)
				e.kind = 'c'
				if cr.Type == batch.ControlAbort {
					e.kind = 'a'
				}
				break
			}
			lastData = nil
		default:
			if b.Attributes().IsTransactional() {
				e.kind = 't'
			}
			e.first, e.lseq = b.BaseSequence(), b.LastSequence()
			sent := prodBatch(t, pid, e.epoch, e.first, int(e.lseq-e.first)+1, b.BaseTimestamp(), e.kind == 't')
			require.True(t, soakSameBatch(b, sent), "%s: batch at %d differs from its producer's", where, e.base)
			lastData = append(batch.Batch(nil), b...)
		}
		inLog = append(inLog, e)
		*batches++
	})
	found := 0
	for _, e := range inLog {
		if a, ok := acked[e.base]; ok {
			require.Equal(t, a, e, "%s: acknowledged entry differs in the log", where)
			found++
		}
	}
	require.Equal(t, len(acked), found, "%s: acknowledged entries missing", where)
	checkTxnState(t, where, p, vfs.Default, p.Dir(), false)
	if lastData == nil {
		return 0
	}
	// The producer's last entry in the log is a batch: its retry is a
	// duplicate and moves nothing.
	end := p.LogEndOffset()
	sent := prodBatch(t, pid, lastData.ProducerEpoch(), lastData.BaseSequence(), int(lastData.LastSequence()-lastData.BaseSequence())+1,
		lastData.BaseTimestamp(), lastData.Attributes().IsTransactional())
	info, err := p.AppendBatchInfo(sent)
	require.NoError(t, err, "%s: retry of the batch at %d", where, lastData.BaseOffset())
	require.Equal(t, plog.AppendInfo{Base: lastData.BaseOffset(), LastOffset: lastData.NextOffset() - 1, Duplicate: true}, info, "%s: retry", where)
	require.Equal(t, end, p.LogEndOffset(), "%s: the retry moved the log end", where)
	return 1
}
