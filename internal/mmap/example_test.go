package mmap_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"

	"github.com/partlog/partlog/internal/mmap"
	"github.com/partlog/partlog/internal/vfs"
)

// Example writes one offset-index entry (relative offset, position) through
// a writable mapping and reads it back from the file.
func Example() {
	dir, err := os.MkdirTemp("", "mmap-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "00000000000000000000.index")

	fs := vfs.Default
	f, err := fs.OpenReadWrite(path)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	const maxIndexSize = 4096
	if err := f.Truncate(maxIndexSize); err != nil {
		panic(err)
	}
	r, err := mmap.Map(f, maxIndexSize, true)
	if err != nil {
		panic(err)
	}
	var entry [8]byte
	binary.BigEndian.PutUint32(entry[0:], 42)   // relative offset
	binary.BigEndian.PutUint32(entry[4:], 4096) // position in the .log
	if err := r.WriteAt(entry[:], 0); err != nil {
		panic(err)
	}
	if err := r.Sync(); err != nil {
		panic(err)
	}
	if err := r.Unmap(); err != nil {
		panic(err)
	}

	var back [8]byte
	if _, err := f.ReadAt(back[:], 0); err != nil {
		panic(err)
	}
	fmt.Println(binary.BigEndian.Uint32(back[0:]), binary.BigEndian.Uint32(back[4:]))
	// Output: 42 4096
}
