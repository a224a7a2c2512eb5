package index

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
)

// TestIndexFlushSyncsOnlyChanges: Flush syncs an index only when it
// changed since the last Flush: an entry written, or the file's length
// changed (TrimToValidSize). A Flush after nothing, or after a truncation
// of entries (which writes no byte), makes no sync: on ext4 an msync of a
// clean mapping still flushes the disk's cache, and an open after a crash
// flushes indexes recovery left as they were. On the in-memory filesystem
// (a heap region, whose sync is the file's, counted by the injector) and
// for both index kinds.
func TestIndexFlushSyncsOnlyChanges(t *testing.T) {
	type index struct {
		append     func(i int) error
		truncateTo func(i int) error
		trim       func() error
		flush      func() error
		close      func() error
	}
	kinds := []struct {
		name string
		open func(t *testing.T, fs vfs.FS, path string) index
	}{
		{"offset", func(t *testing.T, fs vfs.FS, path string) index {
			idx := openOffset(t, fs, path, 0, 4096)
			return index{
				append:     func(i int) error { return idx.Append(int64(i*10+5), int64(i*100)) },
				truncateTo: func(i int) error { return idx.TruncateTo(int64(i*10 + 5)) },
				trim:       idx.TrimToValidSize, flush: idx.Flush, close: idx.Close,
			}
		}},
		{"time", func(t *testing.T, fs vfs.FS, path string) index {
			idx := openTime(t, fs, path, 0, 4096)
			return index{
				append:     func(i int) error { return idx.MaybeAppend(int64(1000+i), int64(i*10), false) },
				truncateTo: func(i int) error { return idx.TruncateTo(int64(i * 10)) },
				trim:       idx.TrimToValidSize, flush: idx.Flush, close: idx.Close,
			}
		}},
	}
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			in := vfs.NewInjector(vfs.NewMem())
			const path = "/0.index"
			idx := kind.open(t, in, path)
			defer func() { require.NoError(t, idx.close()) }()
			syncs := 0
			in.SetHook(func(op vfs.Op) error {
				if op.Kind == vfs.OpSync && op.Path == path {
					syncs++
				}
				return nil
			})
			steps := []struct {
				name string
				do   func() error
				want int // syncs of the Flush after it
			}{
				// A new file's length is made durable by the trim
				// that seals it (a mapped index never synced it at
				// Flush either): nothing written yet.
				{"created", nil, 0},
				{"nothing", nil, 0},
				{"three entries", func() error {
					for i := range 3 {
						if err := idx.append(i); err != nil {
							return err
						}
					}
					return nil
				}, 1},
				{"nothing again", nil, 0},
				{"entries truncated", func() error { return idx.truncateTo(1) }, 0},
				{"an entry", func() error { return idx.append(1) }, 1},
				{"trimmed to its entries", idx.trim, 1},
				{"nothing after the trim", nil, 0},
			}
			for _, st := range steps {
				if st.do != nil {
					require.NoError(t, st.do(), st.name)
				}
				syncs = 0
				require.NoError(t, idx.flush(), st.name)
				assert.Equal(t, st.want, syncs, "syncs of the Flush after: %s", st.name)
			}
		})
	}
}
