package log_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/killtest"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// killConfig is the configuration parent and child open the partition
// with: per-append durability, small segments so that rolls happen.
func killConfig() plog.Config {
	return plog.Config{FlushMessages: 1, SegmentBytes: 256 << 10, IndexIntervalBytes: 1024}
}

// TestKillHelperProcess is not a test: TestKill runs the test binary again
// with -test.run selecting it and $PARTLOG_KILL_CHILD_DIR set. It opens the
// partition there and appends from four goroutines under the per-append
// policy until it is killed, printing "ack <base> <next>" for every
// acknowledged batch.
func TestKillHelperProcess(t *testing.T) {
	dir := os.Getenv(killChildEnv)
	if dir == "" {
		t.Skip("helper process for TestKill")
	}
	p, err := plog.Open(dir, killConfig())
	if err != nil {
		fmt.Fprintf(os.Stdout, "error open: %v\n", err)
		os.Exit(3)
	}
	var out sync.Mutex
	var wg sync.WaitGroup
	stop := time.Now().Add(20 * time.Second) // never outlive a lost parent
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				b := logtest.MakeBatch(1+(i+g)%9, 10+(i*37+g)%900, time.Now().UnixMilli(), byte(i))
				base, err := p.AppendBatch(b)
				if err != nil {
					fmt.Fprintf(os.Stdout, "error append: %v\n", err)
					os.Exit(3)
				}
				line := fmt.Sprintf("ack %d %d\n", base, base+int64(batch.Batch(b).LastOffsetDelta())+1)
				out.Lock()
				_, _ = os.Stdout.WriteString(line) // unbuffered: once written, the parent sees it
				out.Unlock()
			}
		}()
	}
	wg.Wait()
	_ = p.Close()
}

// TestKill is the real crash test: a child process (this test binary,
// running TestKillHelperProcess) appends to a partition on the real
// filesystem under the per-append policy and prints each acknowledged
// batch; the parent kills it with SIGKILL at a random moment (during
// appends, rolls, group syncs, or while it is still opening and
// recovering from the previous kill), reopens the partition and checks
// that every acknowledged batch is there, with its offsets, and that the
// log is a clean prefix: Verify passes (every batch valid, indexes
// consistent) and the batches are contiguous from the log start. Then it
// starts the next child on the same directory. SIGKILL loses the process,
// not the page cache: what this proves is that acknowledgement comes only
// after the write, and that recovery copes with whatever a dead process
// left (TestCrashPoints covers lost unsynced writes).
func TestKill(t *testing.T) {
	if os.Getenv(killChildEnv) != "" {
		t.Skip("in the helper process")
	}
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 11))
	dir := t.TempDir() + "/kill-0"
	kills := 24
	if testing.Short() {
		kills = 8
	}
	acked := map[int64]int64{} // base -> next of every acknowledged batch
	var maxNext int64
	for round := 0; round < kills; round++ {
		child := killtest.Start(t, "TestKillHelperProcess", killChildEnv+"="+dir)
		delay := time.Duration(10+rng.IntN(240)) * time.Millisecond
		n := 0
		child.KillAfter(delay, func(line string) {
			if next, ok := killtest.RecordAck(t, round, line, acked); ok {
				maxNext = max(maxNext, next)
				n++
			}
		})

		p, err := plog.Open(dir, killConfig())
		require.NoError(t, err)
		require.NoError(t, p.Verify())
		require.GreaterOrEqual(t, p.LogEndOffset(), maxNext, "round %d (killed after %v): the log ends before the last acknowledged offset", round, delay)
		// Walk the log: contiguous batches, every acknowledged one there.
		seen := 0
		next := killWalk(t, p, round, func(b batch.Batch) {
			if want, ok := acked[b.BaseOffset()]; ok {
				require.False(t, want != b.NextOffset(), "round %d: batch [%d, %d) was acknowledged as [%d, %d)", round, b.BaseOffset(), b.NextOffset(), b.BaseOffset(), want)
				seen++
			}
		})
		require.False(t, seen != len(acked), "round %d: %d of %d acknowledged batches found", round, seen, len(acked))
		require.NoError(t, p.Close())
		t.Logf("round %d: killed after %v, %d acks this round, log end %d", round, delay, n, next)
	}
}
