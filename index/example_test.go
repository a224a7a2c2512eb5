package index_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/index/vfs"
)

// Example indexes two batches of a segment whose base offset is 100, looks
// offsets and timestamps up, and seals the indexes.
func Example() {
	dir, err := os.MkdirTemp("", "index-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	idx, err := index.OpenOffsetIndex(vfs.Default, filepath.Join(dir, "00000000000000000100.index"), 100, index.DefaultMaxIndexSize)
	if err != nil {
		panic(err)
	}
	tidx, err := index.OpenTimeIndex(vfs.Default, filepath.Join(dir, "00000000000000000100.timeindex"), 100, index.DefaultMaxIndexSize)
	if err != nil {
		panic(err)
	}
	// Batch 100..105 at position 0 with max timestamp 1000; batch 106..110
	// at position 4096 with max timestamp 1700.
	for _, b := range []struct{ last, pos, maxTs int64 }{{105, 0, 1000}, {110, 4096, 1700}} {
		if err := idx.Append(b.last, b.pos); err != nil {
			panic(err)
		}
		if err := tidx.MaybeAppend(b.maxTs, b.last, false); err != nil {
			panic(err)
		}
	}
	fmt.Println(idx.Lookup(99), idx.Lookup(107), idx.Lookup(500))
	fmt.Println(tidx.Lookup(999), tidx.Lookup(1200))

	// Seal: the final time entry (here equal to the last, so ignored),
	// then trim both files to their entries.
	if err := tidx.MaybeAppend(1700, 110, true); err != nil {
		panic(err)
	}
	for _, c := range []interface{ Close() error }{idx, tidx} {
		if err := c.Close(); err != nil {
			panic(err)
		}
	}
	st, _ := os.Stat(filepath.Join(dir, "00000000000000000100.index"))
	fmt.Println(st.Size(), "bytes")
	// Output:
	// {100 0} {105 0} {110 4096}
	// {-1 100} {1000 105}
	// 16 bytes
}
