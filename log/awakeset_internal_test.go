package log

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	"github.com/partlog/partlog/segment"
)

// The awake set without partitions: fake cores (awakeCore) that rest when
// asked unless busy.

// fakeAwake stands in for a partition core.
type fakeAwake struct {
	busy  bool
	rests int
}

func (f *fakeAwake) tryRest() bool {
	if f.busy {
		return false
	}
	f.rests++
	return true
}

// TestAwakeSetClock: the set holds at most the budget's partitions awake
// and rests the coldest by CLOCK: a partition written since the hand last
// passed gets a second chance, the writer is never rested, a busy one is
// skipped (the set stays over budget rather than loop), one at rest is
// not counted, and one that left never joins again.
func TestAwakeSetClock(t *testing.T) {
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll(partDir, 0o755))
	cfg := Config{FS: mem, SegmentBytes: 1 << 16, SegmentIndexBytes: 4 << 10}
	cfg.ensureDefaults()
	writing, err := segment.Create(mem, partDir, 0, cfg.segmentConfig())
	require.NoError(t, err)
	defer func() { require.NoError(t, writing.Close()) }()
	resting, err := segment.Create(mem, partDir, 100, cfg.segmentConfig())
	require.NoError(t, err)
	defer func() { require.NoError(t, resting.Close()) }()
	require.NoError(t, resting.Seal())

	budget := segment.NewBudget(2)
	set := newAwakeSet(budget)
	parts := make(map[string]*awakeState)
	cores := make(map[string]*fakeAwake)
	for _, name := range []string{"a", "b", "c", "d"} {
		cores[name] = &fakeAwake{}
		parts[name] = &awakeState{}
		parts[name].init(set, cores[name])
	}
	awake := func() []string {
		var names []string
		for _, name := range []string{"a", "b", "c", "d"} {
			if parts[name].slot >= 0 {
				names = append(names, name)
			}
		}
		require.Equal(t, len(names), budget.Stats().Active, "the budget counts the awake partitions")
		return names
	}
	rests := func() map[string]int {
		m := make(map[string]int)
		for name, c := range cores {
			m[name] = c.rests
		}
		return m
	}

	parts["a"].noteWrittenLocked(writing)
	parts["b"].noteWrittenLocked(writing)
	require.Equal(t, []string{"a", "b"}, awake())

	// c joins: a and b were written since the hand passed, so each gets a
	// second chance; the hand comes round to a, the coldest.
	parts["c"].noteWrittenLocked(writing)
	require.Equal(t, []string{"b", "c"}, awake())
	require.Equal(t, map[string]int{"a": 1, "b": 0, "c": 0, "d": 0}, rests())

	// a comes back: c (written, its mark still set) gets its second
	// chance, b (whose mark the last sweep cleared) rests.
	parts["a"].noteWrittenLocked(writing)
	require.Equal(t, []string{"a", "c"}, awake())
	require.Equal(t, map[string]int{"a": 1, "b": 1, "c": 0, "d": 0}, rests())

	// A write to a segment at rest marks the partition but does not wake
	// it: the budget may close that segment.
	parts["d"].noteWrittenLocked(resting)
	require.Equal(t, []string{"a", "c"}, awake())
	require.True(t, parts["d"].referenced.Load())

	// Busy partitions are not rested: the set stays over budget and the
	// sweep ends.
	cores["a"].busy, cores["c"].busy = true, true
	parts["b"].noteWrittenLocked(writing)
	require.Equal(t, []string{"a", "b", "c"}, awake())
	require.Equal(t, map[string]int{"a": 1, "b": 1, "c": 0, "d": 0}, rests())

	// Leaving takes the partition out for good.
	parts["b"].leaveLocked()
	parts["b"].noteWrittenLocked(writing)
	require.Equal(t, []string{"a", "c"}, awake())
}
