package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/vfs"
)

// TestCrashRecovery appends, flushes some batches, appends more without
// flushing, crashes the in-memory filesystem (unsynced writes dropped, cut
// or torn at random), then reopens and recovers: the log is a prefix of
// what was appended, holds every flushed batch, and recovery cut exactly
// the partial tail.
func TestCrashRecovery(t *testing.T) {
	seeds := uint64(200)
	if raceEnabled {
		seeds = 40
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			mem := vfs.NewMem()
			dir := "/p"
			mustMkdir(t, mem, dir)
			cfg := Config{IndexIntervalBytes: rng.IntN(500), MaxIndexBytes: 4096}
			s, err := Create(mem, dir, 5, cfg)
			require.NoError(t, err)
			mem.SyncAll()
			var appended []batch.Batch
			synced := 0
			next := int64(5)
			for i := range 5 + rng.IntN(25) {
				b := simpleBatch(t, next+int64(rng.IntN(2)), 1+rng.IntN(4), int64(1000+rng.IntN(100)), rng.IntN(400))
				mustAppend(t, s, b)
				appended = append(appended, b)
				next = b.NextOffset()
				if rng.IntN(4) == 0 || i == 2 {
					require.NoError(t, s.Flush())
					synced = len(appended)
				}
			}
			opts := vfs.CrashOptions{UnsyncedDataPercent: rng.IntN(101), TornPercent: rng.IntN(101), Reorder: rng.IntN(4) == 0, Seed: seed}
			clone := mem.CrashClone(opts)
			mustClose(t, s)

			r, err := Open(clone, dir, 5, cfg)
			require.NoError(t, err, "open after crash (%+v): %v\n%s", opts, err, clone)
			defer mustClose(t, r)
			res, err := r.Recover(0)
			require.NoError(t, err)
			if res.Cause != nil && !opts.Reorder {
				require.True(t, base.IsTornTail(res.Cause), "crash without reordering left corruption, not a torn tail: %v", res.Cause)
			}
			if res.Cause != nil {
				require.True(t, base.IsCorruption(res.Cause), "cause is not a corruption error: %v", res.Cause)
			}
			m := checkSegment(t, r)
			require.GreaterOrEqual(t, len(m.batches), synced, "%d batches survived, %d were synced (%+v)", len(m.batches), synced, opts)
			for i, b := range m.batches {
				require.Equal(t, string(appended[i]), string(b), "batch %d differs from what was appended", i)
			}
			require.Equal(t, r.Size(), res.ValidBytes, "result %+v, segment size %d next %d", res, r.Size(), r.NextOffset())
			require.Equal(t, r.NextOffset(), res.NextOffset, "result %+v, segment size %d next %d", res, r.Size(), r.NextOffset())
			checkLookups(t, r, m)
			// The recovered segment takes appends again.
			require.NoError(t, r.Unseal())
			mustAppend(t, r, simpleBatch(t, r.NextOffset(), 2, 3000, 10))
			checkSegment(t, r)
		})
	}
}

// TestRecoverCauses checks the torn-tail / corruption distinction and what
// Recover reports.
func TestRecoverCauses(t *testing.T) {
	good := []batch.Batch{}
	for i := range 3 {
		good = append(good, simpleBatch(t, int64(i*10), 3, 100, 50))
	}
	var whole []byte
	for _, b := range good {
		whole = append(whole, b...)
	}
	b2 := int64(len(good[0]) + len(good[1]))
	flip := func(at int64) []byte {
		d := append([]byte(nil), whole...)
		d[at] ^= 0xff
		return d
	}
	for _, tc := range []struct {
		name      string
		data      []byte
		valid     int64
		torn      bool
		corrupt   bool
		maxBatch  int
		nextAfter int64
	}{
		{"clean", whole, int64(len(whole)), false, false, 0, 23},
		{"short header", append(append([]byte(nil), whole...), 1, 2, 3), int64(len(whole)), true, true, 0, 23},
		{"partial batch", whole[:len(whole)-5], b2, true, true, 0, 13},
		{"zero tail", append(append([]byte(nil), whole...), make([]byte, 100)...), int64(len(whole)), true, true, 0, 23},
		{"bad crc in the last batch", flip(int64(len(whole)) - 1), b2, true, true, 0, 13},
		{"bad crc in the middle", flip(b2 - 1), int64(len(good[0])), false, true, 0, 3},
		{"garbage after", append(append([]byte(nil), whole...), []byte("not a batch, not zeros, just text")...), int64(len(whole)), true, true, 0, 23},
		{"bad length in the middle", setLength(whole, int64(len(good[0])), 1<<30), int64(len(good[0])), false, true, 0, 3},
		{"garbage in the middle", overwrite(whole, int64(len(good[0])), make([]byte, 20)), int64(len(good[0])), false, true, 0, 3},
		// baseOffset is outside the CRC: MaxInt64 + lastOffsetDelta 2
		// wraps, and the wrapped last offset minus the base 0 passed the
		// relative offset check.
		{"baseOffset wraps in the middle", wrapBaseOffsetAt(whole, int64(len(good[0]))), int64(len(good[0])), false, true, 0, 3},
		{"batch over the limit", whole, 0, false, true, len(good[0]) - 1, 0},
		{"empty", nil, 0, false, false, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			mustMkdir(t, mem, "/p")
			f, err := mem.Create(segPath("/p", 0, LogSuffix))
			require.NoError(t, err)
			_, err = f.Write(tc.data)
			require.NoError(t, err)
			f.Close()
			s, err := Open(mem, "/p", 0, Config{})
			require.NoError(t, err)
			defer mustClose(t, s)
			res, err := s.Recover(tc.maxBatch)
			require.NoError(t, err)
			require.Equal(t, tc.valid, res.ValidBytes, "Recover = %+v", res)
			require.Equal(t, int64(len(tc.data))-tc.valid, res.TruncatedBytes, "Recover = %+v", res)
			require.Equal(t, tc.nextAfter, res.NextOffset, "Recover = %+v", res)
			got := base.IsCorruption(res.Cause)
			require.Equal(t, tc.corrupt, got, "corruption %v, want %v: %v", got, tc.corrupt, res.Cause)
			got = base.IsTornTail(res.Cause)
			require.Equal(t, tc.torn, got, "torn %v, want %v: %v", got, tc.torn, res.Cause)
			var ce *base.CorruptionError
			if res.Cause != nil {
				require.ErrorAs(t, res.Cause, &ce, "cause does not say where: %#v", res.Cause)
				require.Equal(t, s.LogPath(), ce.File, "cause does not say where: %#v", res.Cause)
				require.GreaterOrEqual(t, ce.Pos, tc.valid, "cause does not say where: %#v", res.Cause)
			}
			st, _ := mem.Stat(s.LogPath())
			require.Equal(t, tc.valid, st.Size(), "file is %d bytes after recovery", st.Size())
			checkSegment(t, s)
		})
	}
}

// TestFaultInjection runs create, appends, flush, seal and close with the
// k-th filesystem operation failing, for every k: only the injected error
// is ever returned, nothing panics, and the files reopen (and recover) to
// exactly the batches whose Append succeeded.
func TestFaultInjection(t *testing.T) {
	var batches []batch.Batch
	next := int64(0)
	for i := range 12 {
		b := simpleBatch(t, next, 1+i%3, int64(2000-i*7%5), 30+i*40)
		batches = append(batches, b)
		next = b.NextOffset() + int64(i%2)
	}
	var more []batch.Batch
	for i := range 3 {
		b := simpleBatch(t, next, 2, int64(3000+i), 200)
		more = append(more, b)
		next = b.NextOffset()
	}
	for _, kind := range []string{"mem", "os-mmap"} {
		t.Run(kind, func(t *testing.T) { faultWalk(t, kind, batches, more) })
	}
}

func faultWalk(t *testing.T, kind string, batches, more []batch.Batch) {
	root := t.TempDir()
	for k := int64(0); ; k++ {
		var mem vfs.FS = vfs.NewMem()
		dir := "/p"
		if kind != "mem" {
			mem, dir = vfs.Default, filepath.Join(root, fmt.Sprint(k))
		}
		mustMkdir(t, mem, dir)
		in := vfs.NewInjector(mem)
		in.FailNth(k, vfs.AllOps)
		cfg := Config{IndexIntervalBytes: 100, MaxIndexBytes: 1024}
		check := func(what string, err error) bool {
			if err != nil {
				require.ErrorIs(t, err, vfs.ErrInjected, "k=%d: %s: not the injected error: %v", k, what, err)
			}
			return err == nil
		}
		var acked []batch.Batch
		s, err := Create(in, dir, 0, cfg)
		if check("create", err) {
			for _, b := range batches {
				if _, err := s.Append(b); check("append", err) {
					acked = append(acked, b)
				}
			}
			check("flush", s.Flush())
			check("seal", s.Seal())
			check("close", s.Close())
			// Phase 2: reopen the last segment, make it active, append.
			r, err := Open(in, dir, 0, cfg)
			if check("reopen", err) {
				if check("unseal", r.Unseal()) {
					for _, b := range more {
						if b.BaseOffset() < r.NextOffset() {
							continue
						}
						if _, err := r.Append(b); check("append 2", err) {
							acked = append(acked, b)
						}
					}
				}
				check("flush 2", r.Flush())
				check("close 2", r.Close())
			}
		}
		injected := in.Injected()

		r, err := Open(mem, dir, 0, cfg)
		if errors.Is(err, fs.ErrNotExist) && s == nil {
			continue // Create failed and cleaned up
		}
		require.NoError(t, err, "k=%d: reopen", k)
		res, err := r.Recover(0)
		require.NoError(t, err, "k=%d: recover: %+v, %v", k, res, err)
		require.NoError(t, res.Cause, "k=%d: recover: %+v, %v", k, res, err)
		m := checkSegment(t, r)
		require.Len(t, m.batches, len(acked), "k=%d: %d batches after reopen, %d acknowledged", k, len(m.batches), len(acked))
		for i := range acked {
			require.Equal(t, string(acked[i]), string(m.batches[i]), "k=%d: batch %d differs", k, i)
		}
		checkLookups(t, r, m)
		mustClose(t, r)
		if injected == 0 {
			require.Len(t, acked, len(batches)+len(more), "no injection but %d of %d appends failed", len(batches)+len(more)-len(acked), len(batches)+len(more))
			t.Logf("scenario has %d operations", k)
			break
		}
	}
}
