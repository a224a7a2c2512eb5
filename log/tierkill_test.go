package log_test

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
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// Environment of TestTierKill: the helper's directory (the helper does
// nothing without it), and the number of kills (PARTLOG_TIER_KILLS, to
// run more than the default).
const (
	tierKillDirEnv   = "PARTLOG_TIER_KILL_DIR"
	tierKillCountEnv = "PARTLOG_TIER_KILLS"
)

var tierKillTP = plog.TopicPartition{Topic: "tiered", Partition: 0}

// tierKillConfig is the Dir the kill test's child and parent open below
// dir: per-append durability, 16 KiB segments tiered to a directory-backed
// store in dir/remote, with a local retention of one byte (only the active
// segment and the segments not copied yet stay local). The child's copier
// runs a pass every millisecond; the parent's (interval) runs passes only
// when it asks.
func tierKillConfig(st plog.RemoteStorage, interval time.Duration) plog.DirConfig {
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

// TestTierKillHelperProcess is not a test: TestTierKill runs the test
// binary again with -test.run selecting it and $PARTLOG_TIER_KILL_DIR set.
// It opens the tiered Dir there and appends small batches to one partition
// while the Dir's copier copies the sealed segments and deletes them
// locally, until it is killed, printing "ack <base> <next>" for every
// acknowledged batch and "copy" when a copy starts.
func TestTierKillHelperProcess(t *testing.T) {
	dir := os.Getenv(tierKillDirEnv)
	if dir == "" {
		t.Skip("helper process for TestTierKill")
	}
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stdout, "error "+format+"\n", args...)
		os.Exit(3)
	}
	st := announcingStore{plog.NewDirRemoteStorage(dir+"/remote", nil)}
	d, err := plog.OpenDir(dir+"/data", tierKillConfig(st, time.Millisecond))
	if err != nil {
		fail("open: %v", err)
	}
	p, err := d.CreatePartition(tierKillTP.Topic, tierKillTP.Partition)
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

// TestTierKill kills the copier: a child process (TestTierKillHelperProcess)
// appends to a partition of a tiered Dir while its copier copies sealed
// segments to a directory-backed store, records them and deletes them
// locally, and the parent kills it with SIGKILL: in even rounds at a
// random moment (during appends, a copy, a local deletion, the child's
// start and its cleanup of the previous kill), in odd rounds within a few
// milliseconds of the start of a copy (during the copy, between the copy
// and its record, or during the local deletion that follows). After each kill
// the parent reopens the Dir and checks that every acknowledged batch reads
// back from offset 0, across the local/remote boundary, with its offsets,
// in a log contiguous from 0; then it runs one pass (the next start's
// cleanup, then copies) and checks the reads again and that the store
// holds exactly the copies the metadata records: no orphan is left. 24
// kills (8 with -short; PARTLOG_TIER_KILLS sets the count).
func TestTierKill(t *testing.T) {
	if os.Getenv(tierKillDirEnv) != "" {
		t.Skip("in the helper process")
	}
	kills := 24
	if testing.Short() {
		kills = 8
	}
	if v := os.Getenv(tierKillCountEnv); v != "" {
		var err error
		kills, err = strconv.Atoi(v)
		require.NoError(t, err, tierKillCountEnv)
	}
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 31))
	dir := t.TempDir()
	store := plog.NewDirRemoteStorage(dir+"/remote", nil)
	ctx := context.Background()
	acked := map[int64]int64{} // base -> next of every acknowledged batch
	var maxNext int64
	var leftovers, copies int
	for round := range kills {
		child := startKillChild(t, "TestTierKillHelperProcess", tierKillDirEnv+"="+dir)
		delay := time.Duration(30+rng.IntN(270)) * time.Millisecond
		timer := time.NewTimer(delay)
		atCopy := round%2 == 1 // kill at the first copy after the delay
		armed := false
		n := 0
	collect:
		for {
			select {
			case line, ok := <-child.lines:
				if !ok {
					break collect
				}
				if line == "copy" {
					if armed {
						time.Sleep(time.Duration(rng.IntN(4000)) * time.Microsecond)
						child.kill()
						armed = false
					}
					continue
				}
				next, ok := recordAck(t, round, line, acked)
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
				child.kill()
			}
		}
		child.wait()
		timer.Stop()

		before, err := store.ListSegments(ctx, tierKillTP)
		require.NoError(t, err)
		d, err := plog.OpenDir(dir+"/data", tierKillConfig(store, time.Hour))
		require.NoError(t, err, "round %d", round)
		p := d.Partition(tierKillTP.Topic, tierKillTP.Partition)
		if p == nil {
			require.Empty(t, acked, "round %d: the partition is gone", round)
			require.NoError(t, d.Close())
			continue
		}
		require.GreaterOrEqual(t, p.LogEndOffset(), maxNext, "round %d (killed after %v): the log ends before the last acknowledged offset", round, delay)
		tierKillCheck(t, p, acked, round, "after the restart")
		recorded := p.Stats().Remote.Segments

		d.RunTierPass()
		s := p.Stats()
		require.Zero(t, s.Remote.DeleteFailures, "round %d: the cleanup failed", round)
		after, err := store.ListSegments(ctx, tierKillTP)
		require.NoError(t, err)
		require.Len(t, after, s.Remote.Segments, "round %d: the store holds exactly the recorded copies after the cleanup", round)
		tierKillCheck(t, p, acked, round, "after the next pass")
		if len(before) > recorded {
			leftovers++ // the kill left a partial or unrecorded copy
		}
		copies = s.Remote.Segments
		require.NoError(t, d.Close())
		t.Logf("round %d: killed after %v (at a copy: %v), %d acks, %d copies recorded, %d in the store before the cleanup, local log start %d, log end %d",
			round, delay, round%2 == 1, n, recorded, len(before), s.LogStartOffset, p.LogEndOffset())
	}
	t.Logf("%d kills, %d left a partial or unrecorded copy that the next start deleted; %d copies in the end", kills, leftovers, copies)
}

// tierKillCheck reads the whole log from offset 0 with ReadFromFollower
// (remote copies below the local log start) and checks that its batches
// are contiguous from 0 and that every acknowledged batch is there with
// its offsets.
func tierKillCheck(t *testing.T, p *plog.Partition, acked map[int64]int64, round int, when string) {
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
