package mmap

import (
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
)

// cutUnderneath maps a file of size bytes read-only and then truncates the
// file to 0 behind the mapping's back: every page of the mapping now lies
// past the end of the file and touching one raises SIGBUS, as a media
// error does.
func cutUnderneath(t *testing.T, size int) (*Region, string) {
	t.Helper()
	if !mmapSupported {
		t.Skip("no mmap on this platform")
	}
	path := filepath.Join(t.TempDir(), "cut.log")
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i)
	}
	require.NoError(t, os.WriteFile(path, data, 0o644))
	f, err := vfs.Default.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	r, err := Map(f, size, false)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Unmap() })
	require.Equal(t, data[size-1], r.Bytes()[size-1], "readable before the cut")
	require.NoError(t, os.Truncate(path, 0))
	return r, path
}

// sink keeps reads of mapped bytes from being optimised away.
var sink byte

func TestFaultBecomesError(t *testing.T) {
	const size = 3 << 16
	tests := []struct {
		name    string
		read    func(b []byte) error
		wantOff func(off int64) bool
	}{
		{"one byte at 70000", func(b []byte) error {
			return Guard(func() { sink = b[70000] })
		}, func(off int64) bool { return off == 70000 }},
		{"SafeCopy", func(b []byte) error {
			dst := make([]byte, 4096)
			n, err := SafeCopy(dst, b[8192:])
			if n != 0 {
				return errors.New("SafeCopy reported bytes copied")
			}
			return err
		}, func(off int64) bool { return off >= 8192 && off < 8192+4096 }},
		{"CRC-32C in assembly", func(b []byte) error {
			return Guard(func() { _ = crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) })
		}, func(off int64) bool { return off >= 0 && off < size }},
		{"Protect and Recover", func(b []byte) (err error) {
			defer Recover(Protect(), &err)
			for _, c := range b[size-10:] {
				sink += c
			}
			return nil
		}, func(off int64) bool { return off >= size-10 && off < size }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, path := cutUnderneath(t, size)
			before := Faults()
			err := tc.read(r.Bytes())
			require.ErrorIs(t, err, ErrFault)
			var fe *FaultError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, path, fe.File)
			assert.True(t, tc.wantOff(fe.Off), "offset %d", fe.Off)
			assert.Contains(t, err.Error(), path)
			assert.Equal(t, before+1, Faults())
			assert.False(t, debug.SetPanicOnFault(false), "the goroutine's setting is restored")
		})
	}
}

func TestFaultNamesRenamedFile(t *testing.T) {
	r, _ := cutUnderneath(t, 8192)
	r.SetName("/somewhere/else.log.deleted")
	err := Guard(func() { sink = r.Bytes()[4096] })
	var fe *FaultError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "/somewhere/else.log.deleted", fe.File)
	assert.Equal(t, int64(4096), fe.Off)
}

func TestGuardPassesOtherPanics(t *testing.T) {
	tests := []struct {
		name string
		fn   func()
	}{
		{"plain panic", func() { panic("boom") }},
		{"index out of range", func() {
			var b []byte
			i := 3
			_ = b[i]
		}},
		{"nil pointer", func() {
			var p *int
			_ = *p
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Panics(t, func() { _ = Guard(tc.fn) })
			assert.False(t, debug.SetPanicOnFault(false))
		})
	}
}

func TestGuardNoFault(t *testing.T) {
	f := openFile(t, []byte("0123456789"))
	r, err := Map(f, 10, false)
	require.NoError(t, err)
	defer r.Unmap()
	var got byte
	require.NoError(t, Guard(func() { got = r.Bytes()[9] }))
	assert.Equal(t, byte('9'), got)
	dst := make([]byte, 10)
	n, err := SafeCopy(dst, r.Bytes())
	require.NoError(t, err)
	assert.Equal(t, 10, n)
	assert.Equal(t, "0123456789", string(dst))
}

func TestShrink(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			size := 3 * int(pageSize)
			data := make([]byte, size)
			data[99] = 'x'
			f := openFile(t, data)
			r, err := Map(m.wrap(f), size, false)
			require.NoError(t, err)
			require.NoError(t, r.Shrink(100))
			assert.Equal(t, 100, r.Len())
			assert.Len(t, r.Bytes(), 100)
			assert.Equal(t, byte('x'), r.Bytes()[99])
			if m.mapped {
				assert.Equal(t, pageSize, r.mlen, "the pages past the new size are unmapped")
			}
			require.NoError(t, r.Sync())
			require.NoError(t, r.Advise(Random))
			require.ErrorIs(t, r.Shrink(101), ErrOutOfRange)
			require.NoError(t, r.Shrink(0))
			assert.Empty(t, r.Bytes())
			require.NoError(t, r.Sync())
			require.NoError(t, r.Advise(Random))
			require.NoError(t, r.Unmap())
			require.ErrorIs(t, r.Shrink(0), ErrUnmapped)
		})
	}
}

// TestUnmappedRegionIsNotAFault: a fault at an address no live region
// covers (here: a mapping already unmapped) is a bug, not an I/O error:
// Recover does not turn it into one.
func TestUnmappedRegionIsNotAFault(t *testing.T) {
	if !mmapSupported {
		t.Skip("no mmap on this platform")
	}
	f := openFile(t, make([]byte, 8192))
	r, err := Map(f, 8192, false)
	require.NoError(t, err)
	b := r.Bytes()
	require.NoError(t, r.Unmap())
	assert.Nil(t, lookupFault(uintptr(unsafe.Pointer(unsafe.SliceData(b)))+10))
}
