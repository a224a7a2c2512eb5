package remotetest

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/killtest"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// KillDirEnv names the environment variable Kill sets in its child to the
// test's directory; KillHelper skips its test without it.
const KillDirEnv = "PARTLOG_TIER_KILL_DIR"

// KillConfig is what Kill needs to know about a store and its test binary.
type KillConfig struct {
	// Helper names the test of the same test binary that calls
	// KillHelper with the same Open; Kill runs the binary again with
	// -test.run selecting it.
	Helper string
	// Open returns the store the test's Dir tiers to, dir being the
	// test's directory (Kill's temporary directory, also the child's
	// $PARTLOG_TIER_KILL_DIR). The parent and the child call it; both
	// must get the same store.
	Open func(dir string) (plog.RemoteStorage, error)
	// Env is added to the child's environment ("NAME=value"): what Open
	// needs in the child beside dir, e.g. a server's address.
	Env []string
	// Kills is how many times the child is killed; 0 means
	// $PARTLOG_TIER_KILLS when set, else 24 (8 with -short).
	Kills int
	// Seed seeds the kill moments; 0 means $PARTLOG_CRASH_SEED when set,
	// else the clock (logged, to replay a failure).
	Seed uint64
	// Pass runs one pass of d's copier and deleter over every partition
	// and returns when it is done. When nil, Kill closes the Dir and opens
	// it again with a copier running every few milliseconds, and waits
	// until the passes have settled the partition (every sealed segment
	// copied and deleted locally, the store holding as many copies as are
	// recorded), failing after a minute.
	Pass func(d *plog.Dir)
}

// The environment that sets Kill's defaults: the number of kills and the
// seed of the kill moments.
const (
	killCountEnv = "PARTLOG_TIER_KILLS"
	killSeedEnv  = "PARTLOG_CRASH_SEED"
)

// killTP is the partition the kill test appends to.
var killTP = plog.TopicPartition{Topic: "tiered", Partition: 0}

// killDirConfig is the Dir the kill test's child and parent open: per-append
// durability, 16 KiB segments tiered to st with a local retention of one
// byte (only the active segment and the segments not copied yet stay
// local) and a copier running a pass every interval.
func killDirConfig(st plog.RemoteStorage, interval time.Duration) plog.DirConfig {
	return plog.DirConfig{
		Config: plog.Config{FlushMessages: 1, SegmentBytes: 16 << 10, IndexIntervalBytes: 1024,
			Logger: slog.New(slog.DiscardHandler)}, // recovery's warnings are expected here
		Remote: &plog.RemoteConfig{Storage: st, LocalRetentionBytes: 1, Interval: interval, Workers: 1},
	}
}

// announcingStore is the child's store: it prints "copy" when a copy
// starts, so that the parent can kill the child during one.
type announcingStore struct{ plog.RemoteStorage }

func (s announcingStore) CopySegment(ctx context.Context, md plog.RemoteSegmentMetadata, d plog.RemoteSegmentData) error {
	_, _ = os.Stdout.WriteString("copy\n")
	return s.RemoteStorage.CopySegment(ctx, md, d)
}

// KillHelper is the body of the helper test Kill runs in its child; it
// skips t unless $PARTLOG_TIER_KILL_DIR is set. It opens the tiered Dir
// there, its store from open, and appends small batches to one partition
// while the Dir's copier copies the sealed segments every millisecond and
// deletes them locally, until it is killed, printing "ack <base> <next>"
// for every acknowledged batch and "copy" when a copy starts.
func KillHelper(t *testing.T, open func(dir string) (plog.RemoteStorage, error)) {
	dir := os.Getenv(KillDirEnv)
	if dir == "" {
		t.Skip("helper process of remotetest.Kill")
	}
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stdout, "error "+format+"\n", args...)
		os.Exit(3)
	}
	st, err := open(dir)
	if err != nil {
		fail("open the store: %v", err)
	}
	d, err := plog.OpenDir(dir+"/data", killDirConfig(announcingStore{st}, time.Millisecond))
	if err != nil {
		fail("open: %v", err)
	}
	p, err := d.CreatePartition(killTP.Topic, killTP.Partition)
	if err != nil {
		fail("create: %v", err)
	}
	stop := time.Now().Add(20 * time.Second) // never outlive a lost parent
	for i := 0; time.Now().Before(stop); i++ {
		b := logtest.MakeBatch(1+i%4, 100+(i*37)%400, time.Now().UnixMilli(), byte(i))
		base, err := p.AppendBatch(b)
		if err != nil {
			fail("append: %v", err)
		}
		// Unbuffered: once written, the parent sees it.
		_, _ = fmt.Fprintf(os.Stdout, "ack %d %d\n", base, base+int64(batch.Batch(b).LastOffsetDelta())+1)
		time.Sleep(300 * time.Microsecond) // copies keep up with appends
	}
	_ = d.Close()
}

// Kill kills the copier: a child process (cfg.Helper, calling KillHelper)
// appends to a partition of a tiered Dir while its copier copies sealed
// segments to the store, records them and deletes them locally, and Kill
// kills it with SIGKILL cfg.Kills times: in even rounds at a random moment
// (during appends, a copy, a local deletion, the child's start and its
// cleanup of the previous kill), in odd rounds within 4 milliseconds of
// the start of a copy (during the copy, between the copy and its record,
// or during the local deletion that follows). After each kill it reopens
// the Dir and checks that every acknowledged batch reads back from offset
// 0, across the local/remote boundary, with its offsets, in a log
// contiguous from 0; then it has the next start's pass run (its cleanup,
// then copies) and checks the reads again and that the store holds exactly
// the copies the metadata records: no orphan is left. After the last round
// it opens the Dir once more and checks, before any pass, that the store
// lists exactly the recorded copies. Kill skips t in the child.
func Kill(t *testing.T, cfg KillConfig) {
	if os.Getenv(KillDirEnv) != "" {
		t.Skip("in the helper process")
	}
	if cfg.Kills == 0 {
		cfg.Kills = 24
		if testing.Short() {
			cfg.Kills = 8
		}
		if v := os.Getenv(killCountEnv); v != "" {
			n, err := strconv.Atoi(v)
			require.NoError(t, err, killCountEnv)
			cfg.Kills = n
		}
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
		if v := os.Getenv(killSeedEnv); v != "" {
			n, err := strconv.ParseUint(v, 10, 64)
			require.NoError(t, err, killSeedEnv)
			cfg.Seed = n
		}
		t.Logf("seed %d (replay with %s=%d)", cfg.Seed, killSeedEnv, cfg.Seed)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 31))
	dir := t.TempDir()
	store, err := cfg.Open(dir)
	require.NoError(t, err)
	env := append([]string{KillDirEnv + "=" + dir}, cfg.Env...)
	ctx := context.Background()
	acked := map[int64]int64{} // base -> next of every acknowledged batch
	var maxNext int64
	var leftovers, copies int
	for round := range cfg.Kills {
		child := killtest.Start(t, cfg.Helper, env...)
		delay := time.Duration(30+rng.IntN(270)) * time.Millisecond
		timer := time.NewTimer(delay)
		atCopy := round%2 == 1 // kill at the first copy after the delay
		armed := false
		n := 0
	collect:
		for {
			select {
			case line, ok := <-child.Lines:
				if !ok {
					break collect
				}
				if line == "copy" {
					if armed {
						time.Sleep(time.Duration(rng.IntN(4000)) * time.Microsecond)
						child.Kill()
						armed = false
					}
					continue
				}
				next, ok := killtest.RecordAck(t, round, line, acked)
				if !ok {
					continue
				}
				maxNext = max(maxNext, next)
				n++
			case <-timer.C:
				if atCopy {
					armed = true
					timer.Reset(5 * time.Second) // no copy started: kill anyway
					atCopy = false
					continue
				}
				child.Kill()
			}
		}
		child.Wait()
		timer.Stop()

		before, err := store.ListSegments(ctx, killTP)
		require.NoError(t, err)
		d, err := plog.OpenDir(dir+"/data", killDirConfig(store, time.Hour))
		require.NoError(t, err, "round %d", round)
		p := d.Partition(killTP.Topic, killTP.Partition)
		if p == nil {
			require.Empty(t, acked, "round %d: the partition is gone", round)
			require.NoError(t, d.Close())
			continue
		}
		require.GreaterOrEqual(t, p.LogEndOffset(), maxNext, "round %d (killed after %v): the log ends before the last acknowledged offset", round, delay)
		killCheck(t, p, acked, round, "after the restart")
		recorded := p.Stats().Remote.Segments

		d, p = killPass(t, cfg, store, dir, d, p, round)
		s := p.Stats()
		require.Zero(t, s.Remote.DeleteFailures, "round %d: the cleanup failed", round)
		after, err := store.ListSegments(ctx, killTP)
		require.NoError(t, err)
		require.Len(t, after, s.Remote.Segments, "round %d: the store holds exactly the recorded copies after the cleanup", round)
		killCheck(t, p, acked, round, "after the next pass")
		if len(before) > recorded {
			leftovers++ // the kill left a partial or unrecorded copy
		}
		copies = s.Remote.Segments
		require.NoError(t, d.Close())
		t.Logf("round %d: killed after %v (at a copy: %v), %d acks, %d copies recorded, %d in the store before the cleanup, local log start %d, log end %d",
			round, delay, round%2 == 1, n, recorded, len(before), s.LogStartOffset, p.LogEndOffset())
	}

	// The final start: nothing is left for its first pass to clean.
	d, err := plog.OpenDir(dir+"/data", killDirConfig(store, time.Hour))
	require.NoError(t, err, "the final start")
	if p := d.Partition(killTP.Topic, killTP.Partition); p != nil {
		listed, err := store.ListSegments(ctx, killTP)
		require.NoError(t, err)
		require.Len(t, listed, p.Stats().Remote.Segments, "the final start: the store lists exactly the recorded copies")
		killCheck(t, p, acked, cfg.Kills, "at the final start")
	}
	require.NoError(t, d.Close())
	t.Logf("%d kills, %d left a partial or unrecorded copy that the next start deleted; %d copies in the end", cfg.Kills, leftovers, copies)
}

// killPass has the next start's pass run on d, the Dir Kill reopened in dir
// (cfg.Pass, else by reopening it with a running copier and waiting until
// the partition is settled), and returns the Dir and partition to check.
func killPass(t *testing.T, cfg KillConfig, store plog.RemoteStorage, dir string, d *plog.Dir, p *plog.Partition, round int) (*plog.Dir, *plog.Partition) {
	t.Helper()
	if cfg.Pass != nil {
		cfg.Pass(d)
		return d, p
	}
	require.NoError(t, d.Close())
	d, err := plog.OpenDir(dir+"/data", killDirConfig(store, 5*time.Millisecond))
	require.NoError(t, err, "round %d", round)
	p = d.Partition(killTP.Topic, killTP.Partition)
	require.NotNil(t, p, "round %d", round)
	deadline := time.Now().Add(time.Minute)
	for {
		s := p.Stats()
		listed, err := store.ListSegments(context.Background(), killTP)
		require.NoError(t, err)
		if s.Segments == 1 && s.Remote.CopyLagSegments == 0 && len(listed) == s.Remote.Segments {
			return d, p
		}
		require.True(t, time.Now().Before(deadline), "round %d: not settled within a minute: %d local segments, %d listed, %+v",
			round, s.Segments, len(listed), s.Remote)
		time.Sleep(10 * time.Millisecond)
	}
}

// killCheck reads the whole log from offset 0 with ReadFromFollower
// (remote copies below the local log start) and checks that its batches
// are contiguous from 0 and that every acknowledged batch is there with
// its offsets.
func killCheck(t *testing.T, p *plog.Partition, acked map[int64]int64, round int, when string) {
	t.Helper()
	seen := 0
	next := int64(0)
	for next < p.LogEndOffset() {
		r, err := p.ReadFromFollower(next, 64<<10)
		require.NoError(t, err, "round %d %s: read offset %d", round, when, next)
		data := r.Bytes()
		require.NotEmpty(t, data, "round %d %s: read offset %d", round, when, next)
		for len(data) > 0 {
			b, rest, err := batch.Parse(data)
			require.NoError(t, err, "round %d %s", round, when)
			require.Equal(t, next, b.BaseOffset(), "round %d %s: a hole after offset %d", round, when, next-1)
			if want, ok := acked[b.BaseOffset()]; ok {
				require.Equal(t, want, b.NextOffset(), "round %d %s: batch at %d", round, when, next)
				seen++
			}
			next = b.NextOffset()
			data = rest
		}
		require.NoError(t, r.Close())
	}
	require.Equal(t, len(acked), seen, "round %d %s: acknowledged batches found", round, when)
}
