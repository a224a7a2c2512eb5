package log_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// memIndexBytes is segment.index.bytes for the tests on MemFS whose
// segments are small: room for every index entry they write. With Kafka's
// 10 MiB default every segment's .index and .timeindex are 10 MiB in
// memory, and every crash clone copies them and every Verify and reopen
// reads them: most of such a test's time, ten times more under -race.
const memIndexBytes = 4096

// raceCrashStride is how far apart the crash points of crashAtEveryOp
// are under -race.
const raceCrashStride = 8

// crashPoint names one crash of a walk: the operation of the run it comes
// before (counting from 0), how many operations the counted run did, and
// what of the unsynced writes the crash kept.
type crashPoint struct {
	Op, Ops int64
	Opts    vfs.CrashOptions
}

// String describes the crash for a failure message.
func (c crashPoint) String() string {
	return fmt.Sprintf("crash at operation %d of %d %+v", c.Op, c.Ops, c.Opts)
}

// partModel is a partition and the model of what was appended to it:
// what the walks over one partition's operations share.
type partModel struct {
	p *plog.Partition
	m *logtest.Model
}

// crashWalk is a history to crash at each of its filesystem operations in
// turn (see crashAtEveryOp). F is what setup builds and run, finish and
// check share (a partition and its model, the acknowledgements run
// recorded); struct{} when there is nothing to share.
type crashWalk[F any] struct {
	// setup, when set, builds what run starts from on fs. Its operations
	// are neither counted nor crashed at.
	setup func(t *testing.T, fs vfs.FS) F
	// run does the operations to crash at, on the filesystem setup built
	// on. crashed reports whether the crash state has been taken: what run
	// sees acknowledged (a sync returned, an append under per-append
	// durability returned) binds the model only while it reports false.
	run func(t *testing.T, fs vfs.FS, f F, crashed func() bool)
	// finish, when set, runs after run, with the crash hook removed (it
	// closes what run left open); its operations are not crashed at.
	finish func(t *testing.T, f F)
	// options returns the crashes to take at operation k of total: one
	// run of the history each.
	options func(k, total int64) []vfs.CrashOptions
	// mayEndEarly says a run may do fewer operations than the counted one
	// (goroutines in the background do some of them): a run that never
	// reaches operation k takes no crash and the point is skipped. When
	// false such a run fails the test.
	mayEndEarly bool
	// check gets the state the crash at left (run went on to its end on
	// the live filesystem, and finish ran, after the state was taken) and
	// checks the laws on it: it reopens the state and compares.
	check func(t *testing.T, f F, state *vfs.MemFS, at crashPoint)
}

// randomCrash is a crashWalk's options for one crash a point that keeps a
// random share of the unsynced writes and tears a random share of the cut
// ones, drawn from rng.
func randomCrash(rng *rand.Rand) func(k, total int64) []vfs.CrashOptions {
	return func(int64, int64) []vfs.CrashOptions {
		return []vfs.CrashOptions{{UnsyncedDataPercent: rng.IntN(101), TornPercent: rng.IntN(101), Seed: rng.Uint64()}}
	}
}

// crashAtEveryOp crashes w's history at every filesystem operation of
// w.run and returns how many crash states it checked and how many
// operations the run does. It first runs setup and run once on a counting filesystem to
// learn how many operations run does (total). Then, for each operation k
// in turn and each of w.options(k, total), it runs setup and run again on
// a fresh MemFS behind an injector whose hook, just before the k-th
// operation that reaches the filesystem after setup (from any goroutine,
// counting from 0), takes state = mem.CrashClone(opts): what a machine
// crash at that instant would leave, the k-th operation not done. It
// guarantees:
//
//   - every crash point is taken exactly once a run, the rest of run
//     going on unharmed on the live filesystem (the state is a copy);
//   - crashed reports true from the instant the state is taken, so what
//     run records as acknowledged while it reports false was acknowledged
//     before the crash;
//   - the hook is removed before finish and check run, and neither is
//     crashed at;
//   - every crash point is checked unless w.mayEndEarly and the run
//     ended first: a run that never reaches its point fails the test,
//     and a walk that checks no state at all fails it too;
//   - the count of points is logged with the test.
//
// Under -race it crashes at every raceCrashStride-th operation only (and
// at the last one): the walks are histories of one goroutine, or nearly,
// in which the race detector has little to see and which it slows about
// tenfold, and the plain run crashes at every operation.
func crashAtEveryOp[F any](t *testing.T, w crashWalk[F]) (points int, ops int64) {
	t.Helper()
	setup := func(t *testing.T, fs vfs.FS) F {
		var f F
		if w.setup != nil {
			f = w.setup(t, fs)
		}
		return f
	}
	counter := vfs.NewInjector(vfs.NewMem())
	f := setup(t, counter)
	before := counter.Ops()
	w.run(t, counter, f, func() bool { return false })
	total := counter.Ops() - before
	if w.finish != nil {
		w.finish(t, f)
	}
	require.Positive(t, total, "the run does no filesystem operation")

	stride := int64(1)
	if raceEnabled {
		stride = raceCrashStride
	}
	for k := range total {
		if k%stride != 0 && k != total-1 {
			continue
		}
		for _, opts := range w.options(k, total) {
			at := crashPoint{Op: k, Ops: total, Opts: opts}
			mem := vfs.NewMem()
			in := vfs.NewInjector(mem)
			f := setup(t, in)
			var mu sync.Mutex
			var state *vfs.MemFS
			n := int64(0)
			in.SetHook(func(vfs.Op) error {
				mu.Lock()
				defer mu.Unlock()
				if n == k {
					state = mem.CrashClone(opts)
				}
				n++
				return nil
			})
			crashed := func() bool {
				mu.Lock()
				defer mu.Unlock()
				return state != nil
			}
			w.run(t, in, f, crashed)
			in.SetHook(nil)
			if w.finish != nil {
				w.finish(t, f)
			}
			mu.Lock()
			taken := state
			mu.Unlock()
			if taken == nil {
				require.True(t, w.mayEndEarly, "%s: the run ended before it", at)
				continue
			}
			points++
			w.check(t, f, taken, at)
		}
	}
	require.Positive(t, points, "no crash state checked")
	if stride > 1 {
		t.Logf("%d crash points of %d operations (every %dth under -race)", points, total, stride)
	} else {
		t.Logf("%d crash points of %d operations", points, total)
	}
	return points, total
}
