package segment_test

import (
	"fmt"
	"os"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/segment"
)

// Append two batches to a new segment, look offsets and timestamps up,
// read the batches back, then reopen the segment.
func Example() {
	dir, err := os.MkdirTemp("", "topic-0")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := segment.Create(nil, dir, 100, segment.Config{}) // nil: the OS's filesystem
	if err != nil {
		panic(err)
	}
	for i, n := range []int{3, 2} {
		bld := batch.NewBuilder(batch.BuilderOptions{BaseOffset: s.NextOffset()})
		for j := range n {
			if err := bld.Add(batch.Record{Value: []byte("v"), Timestamp: int64(1000*i + j + 1)}); err != nil {
				panic(err)
			}
		}
		b, err := bld.Build()
		if err != nil {
			panic(err)
		}
		if _, err := s.Append(b); err != nil {
			panic(err)
		}
	}
	fmt.Println("next offset:", s.NextOffset())

	s.AcquireRead()
	one, _ := s.Read(104, 1, s.Size(), true)
	fmt.Println("offset 104 is in batch", one.FirstOffset, "-", one.NextOffset-1, "at position", one.Start)
	off, ts, found, _ := s.FindOffsetByTimestamp(2, 0)
	fmt.Println("first record at or after t=2:", off, ts, found)

	sl, _ := s.Read(101, 1<<20, s.Size(), true)
	p, _ := s.Bytes(sl.Start, sl.End, nil)
	fmt.Println("read", len(p), "bytes of offsets", sl.FirstOffset, "to", sl.NextOffset-1)
	s.ReleaseRead()
	if err := s.Close(); err != nil {
		panic(err)
	}

	r, err := segment.Open(nil, dir, 100, segment.Config{})
	if err != nil {
		panic(err)
	}
	defer r.Close()
	maxTs, at := r.MaxTimestamp()
	fmt.Println("reopened: next offset", r.NextOffset(), "max timestamp", maxTs, "at", at, "sealed", r.Sealed())
	// Output:
	// next offset: 105
	// offset 104 is in batch 103 - 104 at position 85
	// first record at or after t=2: 101 2 true
	// read 162 bytes of offsets 100 to 104
	// reopened: next offset 105 max timestamp 1002 at 104 sealed true
}
