package log_test

import (
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
)

// The soak (docs/crash-safety.md, "The soak"): TestSoakKill, TestSoakDiskFull,
// TestSoakBadInput and TestSoakRace are the adversarial programs of issue 28
// as tests. Each runs a fixed number of rounds in every go test run (seconds,
// seeded); with -soak=D each goes on with new rounds until D has passed:
//
//	go test -race -run Soak -timeout 0 ./log -soak=10m
var soakFor = flag.Duration("soak", 0, "run each TestSoak* this long (its fixed rounds first, then more until the time has passed)")

// soakLoop runs round(0), round(1), ... : at least rounds of them, then more
// until -soak has passed since the call. It returns how many ran. The clock
// only decides when to stop; nothing is asserted about time.
func soakLoop(t *testing.T, rounds int, round func(i int)) int {
	t.Helper()
	until := time.Now().Add(*soakFor)
	i := 0
	for ; i < rounds || time.Now().Before(until); i++ {
		round(i)
		if t.Failed() {
			break
		}
	}
	return i
}

// soakSeed returns the seed of a soak: $PARTLOG_CRASH_SEED when set, else
// a fixed one for the fixed rounds of a plain go test run and the clock for a
// -soak run, logged as crashSeed logs it.
func soakSeed(t *testing.T) uint64 {
	t.Helper()
	if os.Getenv("PARTLOG_CRASH_SEED") != "" || *soakFor > 0 {
		return crashSeed(t)
	}
	t.Logf("seed %d (the fixed one; PARTLOG_CRASH_SEED=<n> or -soak=<duration> to vary it)", soakFixedSeed)
	return soakFixedSeed
}

// soakFixedSeed is the seed of the soaks' fixed rounds.
const soakFixedSeed = 28

// soakTS0 is the first record timestamp of the soak's plain batches: a
// fixed time, so that a batch can be rebuilt byte for byte from where it
// lies (under the default message.timestamp.before.max.ms, unlimited, a
// past timestamp is accepted).
const soakTS0 = 1_700_000_000_000

// soakPlainBatch is the producer batch the soak appends to partition part
// when its log ends at base: its record count, keys, values and timestamps
// follow from (part, base) alone, so that a reader of the log can tell the
// batch at base from any other and check the log holds nothing but what
// was appended, in order.
func soakPlainBatch(t failer, part int, base int64) []byte {
	t.Helper()
	h := uint64(part)*0x9e3779b97f4a7c15 ^ uint64(base)*0xbf58476d1ce4e5b9
	h ^= h >> 29
	n := 1 + int(h%6)
	size := 16 + int(h>>8%300)
	bld := batch.NewBuilder(batch.BuilderOptions{})
	val := make([]byte, size)
	for i := range val {
		val[i] = byte(h>>16) + byte(i)
	}
	for i := range n {
		key := fmt.Appendf(nil, "p%d-o%d-r%d", part, base, i)
		require.NoError(t, bld.Add(batch.Record{Key: key, Value: val, Timestamp: soakTS0 + base + int64(i)}))
	}
	b, err := bld.Build()
	require.NoError(t, err)
	return append([]byte(nil), b...)
}

// soakSameBatch reports whether stored, a batch read from the log, is what
// a producer sent as sent: the same bytes from the magic byte on (the
// partition rewrites only baseOffset, batchLength and the leader epoch in
// front of it).
func soakSameBatch(stored, sent []byte) bool {
	return len(stored) == len(sent) && string(stored[16:]) == string(sent[16:])
}
