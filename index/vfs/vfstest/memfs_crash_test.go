package vfstest

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/partlog/partlog/index/vfs"

	"github.com/stretchr/testify/require"

	"pgregory.net/rapid"
)

// crashModel tracks, for one directory, what a crash must keep: the
// entries as of the last directory sync and each file's data as of its
// last Sync.
type crashModel struct {
	nextID  int
	entries map[string]int // current name -> file id
	durable map[string]int // name -> file id as of the last directory sync
	data    map[int][]byte // current data per id
	synced  map[int][]byte // data as of the last Sync per id
}

// TestCrashModelProperty runs random operations in one directory and checks
// that a 0% crash clone is exactly the durable state of the model and a
// 100% clone exactly the current state.
func TestCrashModelProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		mem := NewMem()
		require.NoError(rt, mem.MkdirAll("/p", 0o755))
		mem.SyncAll()
		m := &crashModel{entries: map[string]int{}, durable: map[string]int{}, data: map[int][]byte{}, synced: map[int][]byte{}}
		names := []string{"a", "b", "c"}
		nameGen := rapid.SampledFrom(names)
		open := func(name string) vfs.File {
			f, err := mem.OpenReadWrite("/p/" + name)
			require.NoError(rt, err)
			return f
		}
		check := func(label string) {
			c := mem.CrashClone(CrashOptions{UnsyncedDataPercent: 0, TornPercent: 100, Seed: 1})
			got, _ := c.List("/p")
			want := slices.Sorted(maps.Keys(m.durable))
			require.True(rt, slices.Equal(got, want), "%s: 0%% clone lists %v, want %v\n%s", label, got, want, mem)
			for name, id := range m.durable {
				b, err := readFile(c, "/p/"+name)
				require.NoError(rt, err, "%s: 0%% clone %s = %q %v, want %q\n%s", label, name, b, err, m.synced[id], mem)
				require.Equal(rt, string(m.synced[id]), string(b), "%s: 0%% clone %s = %q %v, want %q\n%s", label, name, b, err, m.synced[id], mem)
			}
			c = mem.CrashClone(CrashOptions{UnsyncedDataPercent: 100})
			got, _ = c.List("/p")
			want = slices.Sorted(maps.Keys(m.entries))
			require.True(rt, slices.Equal(got, want), "%s: 100%% clone lists %v, want %v", label, got, want)
			for name, id := range m.entries {
				b, _ := readFile(c, "/p/"+name)
				require.Equal(rt, string(m.data[id]), string(b), "%s: 100%% clone %s = %q, want %q", label, name, b, m.data[id])
			}
		}
		n := rapid.IntRange(1, 60).Draw(rt, "steps")
		for i := range n {
			var label string
			switch rapid.IntRange(0, 7).Draw(rt, "op") {
			case 0: // create (or truncate)
				name := nameGen.Draw(rt, "name")
				label = "create " + name
				f, err := mem.Create("/p/" + name)
				require.NoError(rt, err)
				f.Close()
				id, ok := m.entries[name]
				if !ok {
					id = m.nextID
					m.nextID++
					m.entries[name] = id
				}
				m.data[id] = nil
			case 1: // write at an offset
				name := nameGen.Draw(rt, "name")
				id, ok := m.entries[name]
				if !ok {
					continue
				}
				off := rapid.IntRange(0, 20).Draw(rt, "off")
				p := rapid.SliceOfN(rapid.Byte(), 1, 8).Draw(rt, "p")
				label = fmt.Sprintf("writeAt %s %d %d", name, off, len(p))
				f := open(name)
				f.WriteAt(p, int64(off))
				f.Close()
				d := m.data[id]
				if need := off + len(p); need > len(d) {
					d = append(d, make([]byte, need-len(d))...)
				}
				copy(d[off:], p)
				m.data[id] = d
			case 2: // truncate
				name := nameGen.Draw(rt, "name")
				id, ok := m.entries[name]
				if !ok {
					continue
				}
				size := rapid.IntRange(0, 24).Draw(rt, "size")
				label = fmt.Sprintf("truncate %s %d", name, size)
				f := open(name)
				f.Truncate(int64(size))
				f.Close()
				d := m.data[id]
				if size <= len(d) {
					d = d[:size:size]
				} else {
					d = append(d, make([]byte, size-len(d))...)
				}
				m.data[id] = d
			case 3: // sync a file
				name := nameGen.Draw(rt, "name")
				id, ok := m.entries[name]
				if !ok {
					continue
				}
				label = "sync " + name
				f := open(name)
				f.Sync()
				f.Close()
				m.synced[id] = bytes.Clone(m.data[id])
			case 4: // sync the directory
				label = "syncdir"
				d, _ := mem.OpenDir("/p")
				d.Sync()
				d.Close()
				m.durable = maps.Clone(m.entries)
			case 5: // rename
				a, b := nameGen.Draw(rt, "old"), nameGen.Draw(rt, "new")
				id, ok := m.entries[a]
				if !ok {
					continue
				}
				label = "rename " + a + " " + b
				require.NoError(rt, mem.Rename("/p/"+a, "/p/"+b))
				delete(m.entries, a)
				m.entries[b] = id
			case 6: // remove
				name := nameGen.Draw(rt, "name")
				if _, ok := m.entries[name]; !ok {
					continue
				}
				label = "remove " + name
				require.NoError(rt, mem.Remove("/p/"+name))
				delete(m.entries, name)
			case 7: // take a clone of a clone: it must be stable
				label = "clone"
				c := mem.CrashClone(CrashOptions{UnsyncedDataPercent: 50, TornPercent: 50, Seed: uint64(i)})
				c2 := c.CrashClone(CrashOptions{})
				require.Equal(rt, c.String(), c2.String(), "a clone of a clone differs:\n%s\n%s", c, c2)
			}
			check(fmt.Sprintf("step %d (%s)", i, label))
		}
	})
}
