package index

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/partlog/partlog/internal/vfs"
)

// genOffsetEntries draws a base offset and strictly increasing entries:
// sometimes few and hand-shaped, sometimes thousands (past the warm
// section's 1024 entries) from a drawn seed.
func genOffsetEntries(t *rapid.T) (int64, []OffsetEntry) {
	base := rapid.OneOf(rapid.Int64Range(0, 1000), rapid.Just(int64(MaxBaseOffset))).Draw(t, "base")
	var gaps []int64
	if rapid.Bool().Draw(t, "many") {
		n := rapid.IntRange(0, 4000).Draw(t, "n")
		maxGap := rapid.Int64Range(1, 1000).Draw(t, "maxGap")
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 1))
		for range n {
			gaps = append(gaps, 1+rng.Int64N(maxGap))
		}
	} else {
		gaps = rapid.SliceOfN(rapid.Int64Range(1, 5), 0, 20).Draw(t, "gaps")
	}
	var es []OffsetEntry
	off, pos := base-1, int64(0)
	for i, g := range gaps {
		if off+g-base > math.MaxInt32 {
			break
		}
		off += g
		if i == 0 && rapid.Bool().Draw(t, "startAtBase") {
			off = base
		}
		es = append(es, OffsetEntry{Offset: off, Position: pos})
		pos += g * 100
	}
	return base, es
}

// targetsFor returns every interesting target for sorted keys: each key
// and its neighbours, and the extremes.
func targetsFor(keys []int64) []int64 {
	ts := []int64{math.MinInt64, -1, 0, math.MaxInt64}
	for _, k := range keys {
		ts = append(ts, k-1, k, k+1)
	}
	return ts
}

func TestPropOffsetLookup(t *testing.T) {
	forEachMode(t, func(t *testing.T, fsys vfs.FS, dir string) {
		iter := 0
		rapid.Check(t, func(t *rapid.T) {
			base, es := genOffsetEntries(t)
			iter++
			idx, err := OpenOffsetIndex(fsys, filepath.Join(dir, fmt.Sprintf("%d.index", iter)), base, max(len(es), 1)*OffsetEntrySize)
			require.NoError(t, err)
			defer idx.Delete()
			for _, e := range es {
				require.NoError(t, idx.Append(e.Offset, e.Position))
			}
			require.NoError(t, idx.SanityCheck())
			keys := make([]int64, len(es))
			for i, e := range es {
				keys[i] = e.Offset
			}
			b := idx.x.view()
			targets := append(targetsFor(keys), rapid.SliceOfN(rapid.Int64(), 0, 20).Draw(t, "targets")...)
			for _, target := range targets {
				got, want := idx.Lookup(target), linearOffset(es, base, target)
				require.Equal(t, want, got, "Lookup(%d) = %v, linear scan %v", target, got, want)
				w, p := searchOffsets(b, base, target), searchOffsetsPlain(b, base, target)
				require.Equal(t, p, w, "target %d: warm-section search slot %d, plain binary search %d", target, w, p)
			}
		})
	})
}

func TestPropTimeLookup(t *testing.T) {
	forEachMode(t, func(t *testing.T, fsys vfs.FS, dir string) {
		iter := 0
		rapid.Check(t, func(t *rapid.T) {
			base, oes := genOffsetEntries(t)
			// Timestamps grow by 0..3 per batch, so some appends are
			// ignored (equal) and some offsets repeat never; the model
			// keeps what MaybeAppend keeps.
			ts := rapid.Int64Range(-1, 1<<40).Draw(t, "ts0")
			rng := rand.New(rand.NewPCG(uint64(len(oes)), 7))
			iter++
			idx, err := OpenTimeIndex(fsys, filepath.Join(dir, fmt.Sprintf("%d.timeindex", iter)), base, (len(oes)+1)*TimeEntrySize)
			require.NoError(t, err)
			defer idx.Delete()
			var model []TimeEntry
			last := TimeEntry{Timestamp: NoTimestamp, Offset: base}
			for _, e := range oes {
				ts += rng.Int64N(4) - 1 // may go back by one: ignored
				require.NoError(t, idx.MaybeAppend(ts, e.Offset, false))
				if ts > last.Timestamp {
					last = TimeEntry{ts, e.Offset}
					model = append(model, last)
				}
			}
			got := timeEntries(idx)
			require.Equal(t, fmt.Sprint(model), fmt.Sprint(got), "entries %v, model %v", got, model)
			require.NoError(t, idx.SanityCheck())
			keys := make([]int64, len(model))
			for i, e := range model {
				keys[i] = e.Timestamp
			}
			b := idx.x.view()
			for _, target := range append(targetsFor(keys), rapid.SliceOfN(rapid.Int64(), 0, 20).Draw(t, "targets")...) {
				want := TimeEntry{Timestamp: NoTimestamp, Offset: base}
				for _, e := range model {
					if e.Timestamp <= target {
						want = e
					}
				}
				got := idx.Lookup(target)
				require.Equal(t, want, got, "Lookup(%d) = %v, linear scan %v", target, got, want)
				w, p := searchTimes(b, target), searchTimesPlain(b, target)
				require.Equal(t, p, w, "target %d: warm-section search slot %d, plain binary search %d", target, w, p)
			}
		})
	})
}

// TestPropOffsetModel runs random operations against an OffsetIndex and a
// slice model: append, truncate, reset, seal/unseal, reopen, lookup.
func TestPropOffsetModel(t *testing.T) {
	forEachMode(t, func(t *testing.T, fsys vfs.FS, dir string) {
		iter := 0
		rapid.Check(t, func(t *rapid.T) {
			iter++
			base := rapid.Int64Range(0, 1<<40).Draw(t, "base")
			maxSize := rapid.IntRange(OffsetEntrySize, 64*OffsetEntrySize).Draw(t, "maxSize")
			path := filepath.Join(dir, fmt.Sprintf("%d.index", iter))
			idx, err := OpenOffsetIndex(fsys, path, base, maxSize)
			require.NoError(t, err)
			defer func() { _ = idx.Delete() }()
			var model []OffsetEntry
			// slots models MaxEntries: trimming sets it to the entry
			// count, Resize and Reset to maxSize's, reopening to the
			// larger of those.
			fullSlots := maxSize / OffsetEntrySize
			slots := fullSlots
			next := func() int64 {
				if len(model) == 0 {
					return base
				}
				return model[len(model)-1].Offset + 1
			}
			pick := func(t *rapid.T) int64 {
				return rapid.Int64Range(base-2, next()+2).Draw(t, "offset")
			}
			t.Repeat(map[string]func(*rapid.T){
				"append": func(t *rapid.T) {
					off := next() + rapid.Int64Range(0, 3).Draw(t, "gap")
					pos := int64(len(model)) * 50
					if len(model) > 0 {
						pos = model[len(model)-1].Position + 1
					}
					err := idx.Append(off, pos)
					full := len(model) >= slots
					require.Equal(t, err != nil, full, "Append(%d) with %d entries of %d: %v", off, len(model), slots, err)
					if err == nil {
						model = append(model, OffsetEntry{off, pos})
					}
				},
				"appendNotIncreasing": func(t *rapid.T) {
					if len(model) == 0 {
						t.Skip("empty")
					}
					require.Error(t, idx.Append(model[len(model)-1].Offset-rapid.Int64Range(0, 2).Draw(t, "back"), 1<<30), "non-increasing append accepted")
				},
				"truncate": func(t *rapid.T) {
					off := pick(t)
					require.NoError(t, idx.TruncateTo(off))
					k := sort.Search(len(model), func(i int) bool { return model[i].Offset >= off })
					model = model[:k]
				},
				"reset": func(t *rapid.T) {
					require.NoError(t, idx.Reset())
					model, slots = nil, fullSlots
				},
				"seal": func(t *rapid.T) {
					require.NoError(t, idx.TrimToValidSize())
					got := fileSize(t, fsys, path)
					require.Equal(t, int64(len(model))*OffsetEntrySize, got, "trimmed file is %d bytes for %d entries", got, len(model))
					slots = len(model)
				},
				"unseal": func(t *rapid.T) {
					require.NoError(t, idx.Resize(maxSize))
					slots = fullSlots
				},
				"reopen": func(t *rapid.T) {
					require.NoError(t, idx.Close())
					idx, err = OpenOffsetIndex(fsys, path, base, maxSize)
					require.NoError(t, err)
					require.NoError(t, idx.SanityCheck())
					slots = max(fullSlots, len(model))
				},
				"lookup": func(t *rapid.T) {
					target := pick(t)
					got, want := idx.Lookup(target), linearOffset(model, base, target)
					require.Equal(t, want, got, "Lookup(%d) = %v, model %v", target, got, want)
				},
				"": func(t *rapid.T) {
					got := offsetEntries(idx)
					require.Equal(t, fmt.Sprint(model), fmt.Sprint(got), "entries %v, model %v", got, model)
					require.Equal(t, len(model) >= slots, idx.IsFull(), "IsFull %v, MaxEntries %d with %d entries, model %d slots", idx.IsFull(), idx.MaxEntries(), len(model), slots)
					require.Equal(t, slots, idx.MaxEntries(), "IsFull %v, MaxEntries %d with %d entries, model %d slots", idx.IsFull(), idx.MaxEntries(), len(model), slots)
				},
			})
		})
	})
}

// TestPropTimeModel does the same for a TimeIndex, including the reserved
// last slot and ignored appends.
func TestPropTimeModel(t *testing.T) {
	forEachMode(t, func(t *testing.T, fsys vfs.FS, dir string) {
		iter := 0
		rapid.Check(t, func(t *rapid.T) {
			iter++
			base := rapid.Int64Range(0, 1<<40).Draw(t, "base")
			maxSize := rapid.IntRange(TimeEntrySize, 32*TimeEntrySize).Draw(t, "maxSize")
			slots := maxSize / TimeEntrySize
			path := filepath.Join(dir, fmt.Sprintf("%d.timeindex", iter))
			idx, err := OpenTimeIndex(fsys, path, base, maxSize)
			require.NoError(t, err)
			defer func() { _ = idx.Delete() }()
			var model []TimeEntry
			last := func() TimeEntry {
				if len(model) == 0 {
					return TimeEntry{NoTimestamp, base}
				}
				return model[len(model)-1]
			}
			t.Repeat(map[string]func(*rapid.T){
				"maybeAppend": func(t *rapid.T) {
					l := last()
					ts := l.Timestamp + rapid.Int64Range(-1, 3).Draw(t, "dts")
					off := l.Offset + rapid.Int64Range(0, 3).Draw(t, "doff")
					skip := rapid.Bool().Draw(t, "skip")
					err := idx.MaybeAppend(ts, off, skip)
					switch {
					case ts <= l.Timestamp:
						require.NoError(t, err, "ignored MaybeAppend(%d, %d) =", ts, off)
					case len(model) >= slots || (!skip && len(model) >= slots-1):
						require.Error(t, err, "MaybeAppend into a full index (%d of %d, skip %v) accepted", len(model), slots, skip)
					default:
						require.NoError(t, err)
						model = append(model, TimeEntry{ts, off})
					}
				},
				"truncate": func(t *rapid.T) {
					off := rapid.Int64Range(base-1, last().Offset+2).Draw(t, "offset")
					require.NoError(t, idx.TruncateTo(off))
					k := sort.Search(len(model), func(i int) bool { return model[i].Offset >= off })
					model = model[:k]
				},
				"reopen": func(t *rapid.T) {
					require.NoError(t, idx.Close())
					idx, err = OpenTimeIndex(fsys, path, base, maxSize)
					require.NoError(t, err)
					require.NoError(t, idx.SanityCheck())
				},
				"lookup": func(t *rapid.T) {
					target := rapid.Int64Range(-2, last().Timestamp+2).Draw(t, "target")
					want := TimeEntry{NoTimestamp, base}
					for _, e := range model {
						if e.Timestamp <= target {
							want = e
						}
					}
					got := idx.Lookup(target)
					require.Equal(t, want, got, "Lookup(%d) = %v, model %v", target, got, want)
				},
				"": func(t *rapid.T) {
					got := timeEntries(idx)
					require.Equal(t, fmt.Sprint(model), fmt.Sprint(got), "entries %v, model %v", got, model)
				},
			})
		})
	})
}
