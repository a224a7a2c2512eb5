package index

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
)

// One appender and several readers, without locks, as the package doc
// allows: the appender appends, and now and then seals (TrimToValidSize),
// unseals and grows past the mapping (Resize) and flushes; the readers
// look up and check every answer against the invariants of what was
// appended. Run with -race: in the heap modes the entries live in Go
// memory, so the race detector sees every byte.
func TestConcurrentLookups(t *testing.T) {
	const (
		appends = 6000
		readers = 3
	)
	forEachMode(t, func(t *testing.T, fsys vfs.FS, dir string) {
		const base = 1000
		// Small at first, so that Resize has to remap while readers run.
		idx := openOffset(t, fsys, filepath.Join(dir, "c.index"), base, 64*OffsetEntrySize)
		tidx := openTime(t, fsys, filepath.Join(dir, "c.timeindex"), base, 64*TimeEntrySize)
		var done atomic.Bool
		var wg sync.WaitGroup
		errs := make(chan error, readers+1)
		// Entry i: offset base+3i+2, position 10i; time entry: timestamp
		// 5i+7 at offset base+3i+2.
		for r := range readers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(r), 0))
				for !done.Load() {
					n := idx.Entries()
					target := base + rng.Int64N(3*appends+10) - 5
					e := idx.Lookup(target)
					if e.Offset > target && e != (OffsetEntry{base, 0}) {
						errs <- fmt.Errorf("Lookup(%d) = %v above the target", target, e)
						return
					}
					if e != (OffsetEntry{base, 0}) {
						i := (e.Offset - base - 2) / 3
						if (e.Offset-base-2)%3 != 0 || e.Position != 10*i {
							errs <- fmt.Errorf("Lookup(%d) = %v, not an appended entry", target, e)
							return
						}
					}
					// Entries published before the lookup are seen.
					if n > 0 {
						lastSeen := int64(base + 3*(n-1) + 2)
						if want := min(target, lastSeen); target >= base+2 && e.Offset < want-2 {
							errs <- fmt.Errorf("Lookup(%d) = %v with %d entries published before", target, e, n)
							return
						}
					}
					te := tidx.Lookup(rng.Int64N(5*appends+20) - 5)
					if te.Timestamp != NoTimestamp && (te.Timestamp-7)%5 != 0 {
						errs <- fmt.Errorf("time Lookup = %v, not an appended entry", te)
						return
					}
					_ = idx.LastEntry()
					_ = tidx.LastEntry()
					_ = idx.IsFull()
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer done.Store(true)
			size := 64
			for i := range appends {
				if idx.IsFull() || tidx.IsFull() {
					size *= 2
					if err := idx.Resize(size * OffsetEntrySize); err != nil {
						errs <- err
						return
					}
					if err := tidx.Resize(size * TimeEntrySize); err != nil {
						errs <- err
						return
					}
				}
				if err := idx.Append(int64(base+3*i+2), int64(10*i)); err != nil {
					errs <- err
					return
				}
				if err := tidx.MaybeAppend(int64(5*i+7), int64(base+3*i+2), false); err != nil {
					errs <- err
					return
				}
				switch i % 1000 {
				case 500: // seal and unseal
					for _, err := range []error{idx.TrimToValidSize(), tidx.TrimToValidSize(), idx.Resize(size * OffsetEntrySize), tidx.Resize(size * TimeEntrySize)} {
						if err != nil {
							errs <- err
							return
						}
					}
				case 999:
					if err := idx.Flush(); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
		wg.Wait()
		close(errs)
		for err := range errs {
			assert.NoError(t, err)
		}
		require.Equal(t, appends, idx.Entries(), "%d and %d entries, want %d", idx.Entries(), tidx.Entries(), appends)
		require.Equal(t, appends, tidx.Entries(), "%d and %d entries, want %d", idx.Entries(), tidx.Entries(), appends)
		require.NoError(t, idx.Close())
		require.NoError(t, tidx.Close())
	})
}

func TestZeroAllocs(t *testing.T) {
	forEachMode(t, func(t *testing.T, fsys vfs.FS, dir string) {
		idx := openOffset(t, fsys, filepath.Join(dir, "a.index"), 0, 1<<16)
		defer idx.Close()
		tidx := openTime(t, fsys, filepath.Join(dir, "a.timeindex"), 0, 1<<16)
		defer tidx.Close()
		for i := range 3000 {
			require.NoError(t, idx.Append(int64(2*i), int64(i)))
			require.NoError(t, tidx.MaybeAppend(int64(2*i), int64(2*i), false))
		}
		var sink int64
		for name, f := range map[string]func(){
			"OffsetIndex.Lookup tail": func() { sink += idx.Lookup(5990).Position },
			"OffsetIndex.Lookup cold": func() { sink += idx.Lookup(17).Position },
			"TimeIndex.Lookup tail":   func() { sink += tidx.Lookup(5990).Offset },
			"TimeIndex.Lookup cold":   func() { sink += tidx.Lookup(17).Offset },
			"Entry/LastEntry":         func() { sink += idx.Entry(7).Offset + tidx.LastEntry().Offset },
		} {
			a := testing.AllocsPerRun(100, f)
			assert.Zero(t, a, "%s: %v allocs", name, a)
		}
		if _, mem := fsys.(*vfs.MemFS); mem {
			return // MemFS records every write for its crash model: that allocates
		}
		i := 3000
		a := testing.AllocsPerRun(100, func() {
			require.NoError(t, idx.Append(int64(2*i), int64(i)))
			require.NoError(t, tidx.MaybeAppend(int64(2*i), int64(2*i), false))
			i++
		})
		assert.Zero(t, a, "Append+MaybeAppend: %v allocs", a)
		_ = sink
	})
}
