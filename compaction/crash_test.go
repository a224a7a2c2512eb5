package compaction

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
)

// TestCrashAtEveryStep crashes a compaction at its k-th filesystem
// operation, for every k, and checks that the directory, after RecoverDir,
// reads back as exactly the old records or exactly the new ones.
func TestCrashAtEveryStep(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	setup := func() (*vfs.MemFS, *vfs.Injector, *testLog) {
		mem := vfs.NewMem()
		in := vfs.NewInjector(mem)
		l, err := openTestLog(in, "/p/topic-0", smallCfg(), 500)
		require.NoError(t, err)
		fillLog(t, l, 12, 4, now.UnixMilli())
		// Close ends the appends' background work (the rolls' flushes,
		// the next segment's spare), so the walk below counts the
		// compaction's filesystem operations alone, the same every run
		// (a spare's operations, counted in some runs and not in others,
		// shift which operation a crash point hits).
		require.NoError(t, l.close())
		l, err = openTestLog(in, "/p/topic-0", smallCfg(), 500)
		require.NoError(t, err)
		mem.SyncAll()
		return mem, in, l
	}
	_, _, ref := setup()
	oldRecs := ref.readAll(t)
	old := fmt.Sprint(oldRecs)
	c, _ := NewCompactor(compactCfg(&now))
	res, err := c.Apply(context.Background(), ref)
	require.NoError(t, err, "reference compaction: %+v %v", res, err)
	require.True(t, res.Compacted, "reference compaction: %+v %v", res, err)
	require.GreaterOrEqual(t, res.SegmentsWritten, 2, "reference compaction: %+v %v", res, err)
	newList := ref.readAll(t)
	newRecs := fmt.Sprint(newList)
	require.NotEqual(t, newRecs, old, "compaction changed nothing")
	// Groups are swapped one at a time, each atomically: the allowed
	// states are the old records with the first j groups replaced. The
	// groups start at the new segments' bases.
	newBases := bases(t, ref)
	allowed := map[string]int{}
	for j := range newBases {
		var mixed []rec
		for _, r := range newList {
			if r.Offset < newBases[j] {
				mixed = append(mixed, r)
			}
		}
		for _, r := range oldRecs {
			if r.Offset >= newBases[j] {
				mixed = append(mixed, r)
			}
		}
		allowed[fmt.Sprint(mixed)] = j
	}
	allowed[newRecs] = len(newBases)
	sawNew, sawOld := false, false
	for k := int64(0); ; k++ {
		mem, in, l := setup()
		taken := crashAtOp(mem, in, k)
		c, _ := NewCompactor(compactCfg(&now))
		_, err := c.Apply(context.Background(), l)
		in.SetHook(nil)
		clones := taken()
		if clones == nil {
			require.NoError(t, err, "k=%d: no crash but", k)
			break
		}
		for i, clone := range clones {
			l2, err := openTestLog(clone, "/p/topic-0", smallCfg(), 500)
			require.NoError(t, err, "k=%d clone %d: reopen: %v\n%s", k, i, err, clone)
			names, _ := clone.List("/p/topic-0")
			for _, n := range names {
				require.False(t, strings.HasSuffix(n, ".swap"), "k=%d clone %d: %s left after recovery", k, i, n)
				require.False(t, strings.HasSuffix(n, ".cleaned"), "k=%d clone %d: %s left after recovery", k, i, n)
				require.False(t, strings.HasSuffix(n, ".deleted"), "k=%d clone %d: %s left after recovery", k, i, n)
			}
			got := fmt.Sprint(l2.readAll(t))
			j, ok := allowed[got]
			switch {
			case got == old:
				sawOld = true
			case got == newRecs:
				sawNew = true
			case ok && j > 0:
			default:
				require.Failf(t, "a mix after the crash", "k=%d clone %d:\n%s\nold %s\nnew %s\n%s", k, i, got, old, newRecs, clone)
			}
			l2.close()
		}
		require.LessOrEqual(t, k, int64(5000), "too many steps")
	}
	require.True(t, sawOld, "crash walk saw old=%v new=%v", sawOld, sawNew)
	require.True(t, sawNew, "crash walk saw old=%v new=%v", sawOld, sawNew)
}

// crashAtOp sets a hook on in that, just before the k-th operation from
// now (counting from 0), takes three crash clones of mem (keeping none,
// half and all of the unsynced writes, half of the cut ones torn, seeded
// with k) and fails that operation with an error wrapping
// vfs.ErrInjected: the work stops there as a crash would stop it. taken
// returns the clones, none when the run did not reach operation k. The
// caller removes the hook. The operations count from every goroutine (a
// partition's background work, such as preparing its spare segment, may
// run beside the compaction), under a lock: the injector calls the hook
// without its own.
func crashAtOp(mem *vfs.MemFS, in *vfs.Injector, k int64) (taken func() []*vfs.MemFS) {
	var mu sync.Mutex
	var clones []*vfs.MemFS
	var ops int64
	in.SetHook(func(op vfs.Op) error {
		mu.Lock()
		defer mu.Unlock()
		ops++
		if ops-1 == k {
			for _, pct := range []int{0, 50, 100} {
				clones = append(clones, mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: pct, TornPercent: 50, Seed: uint64(k)}))
			}
			return fmt.Errorf("crash at op %d (%v): %w", k, op, vfs.ErrInjected)
		}
		return nil
	})
	return func() []*vfs.MemFS {
		mu.Lock()
		defer mu.Unlock()
		return clones
	}
}
