package vfstest

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/index/vfs"

	"github.com/stretchr/testify/require"
)

// TestLock checks every FS's Lock: a second owner gets ErrLocked (also
// from the same process), Close releases the lock, the file is created
// empty and left in place, and the injector can fail the operation.
func TestLock(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   func(t *testing.T) (vfs.FS, string)
	}{
		{"os", func(t *testing.T) (vfs.FS, string) { return vfs.Default, t.TempDir() }},
		{"mem", func(t *testing.T) (vfs.FS, string) {
			m := NewMem()
			require.NoError(t, m.MkdirAll("/d", 0o755))
			return m, "/d"
		}},
		{"injector", func(t *testing.T) (vfs.FS, string) {
			m := NewMem()
			require.NoError(t, m.MkdirAll("/d", 0o755))
			return NewInjector(m), "/d"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, dir := tc.fs(t)
			name := filepath.Join(dir, "x.lock")
			l1, err := fs.Lock(name)
			require.NoError(t, err)
			_, err = fs.Lock(name)
			require.ErrorIs(t, err, vfs.ErrLocked)
			st, err := fs.Stat(name)
			require.NoError(t, err)
			require.Zero(t, st.Size())

			other := filepath.Join(dir, "y.lock")
			l2, err := fs.Lock(other)
			require.NoError(t, err, "locks of different files are independent")
			require.NoError(t, l2.Close())

			require.NoError(t, l1.Close())
			l3, err := fs.Lock(name)
			require.NoError(t, err, "Close released the lock")
			require.NoError(t, l3.Close())
			_, err = fs.Stat(name)
			require.NoError(t, err, "the lock file stays")
		})
	}
	t.Run("crash clone starts unlocked", func(t *testing.T) {
		m := NewMem()
		require.NoError(t, m.MkdirAll("/d", 0o755))
		l, err := m.Lock("/d/x.lock")
		require.NoError(t, err)
		defer l.Close()
		m.SyncAll()
		c := m.CrashClone(CrashOptions{Seed: 1})
		l2, err := c.Lock("/d/x.lock")
		require.NoError(t, err)
		require.NoError(t, l2.Close())
	})
	t.Run("injected failure", func(t *testing.T) {
		m := NewMem()
		require.NoError(t, m.MkdirAll("/d", 0o755))
		in := NewInjector(m)
		in.Add(Rule{Kinds: Kinds(OpLock)})
		_, err := in.Lock("/d/x.lock")
		require.ErrorIs(t, err, ErrInjected)
		require.False(t, errors.Is(err, vfs.ErrLocked))
		l, err := in.Lock("/d/x.lock")
		require.NoError(t, err)
		require.NoError(t, l.Close())
	})
}
