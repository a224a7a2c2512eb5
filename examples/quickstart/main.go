// Command quickstart is partlog's first program: it creates a partition in a
// temporary directory, appends the field report's scenario (a batch of 11
// records, then one of 3), reads everything back, looks records up by time,
// closes and reopens the partition, and prints what it did.
//
//	go run ./examples/quickstart
//
// The field report behind partlog described a Kafka-compatible server whose
// storage counted one offset per append call and kept the producer's base
// offset of 0 in every stored batch, so a consumer saw 1 message of 11.
// partlog assigns each batch base = log end and advances the log end by
// lastOffsetDelta + 1: bases 0 and 11, log end 14.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

func main() {
	keep := flag.Bool("keep", false, "keep the partition directory instead of removing it")
	flag.Parse()
	if err := run(*keep); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(keep bool) error {
	root, err := os.MkdirTemp("", "partlog-quickstart-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(root)
	}
	dir := filepath.Join(root, "orders-0") // Kafka's topic-partition directory name
	fmt.Println("partition directory:", dir)

	// Small segments so that the demo rolls a few times; the zero Config
	// would use Kafka's defaults (1 GiB segments).
	cfg := plog.Config{SegmentBytes: 4096}
	p, err := plog.Open(dir, cfg)
	if err != nil {
		return err
	}

	// 1. The field report's scenario. A producer sends batches with base
	// offset 0; the partition assigns the real offsets.
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC).UnixMilli()
	b11 := build(0, 11, start)
	b3 := build(11, 3, start+11)
	base1, err := p.AppendBatch(b11)
	if err != nil {
		return err
	}
	base2, err := p.AppendBatch(b3)
	if err != nil {
		return err
	}
	fmt.Printf("appended 11 records at base %d and 3 records at base %d; log end offset %d\n",
		base1, base2, p.LogEndOffset())

	// 2. More traffic: 40 batches of 5 records, enough to roll segments.
	for i := 0; i < 40; i++ {
		first := p.LogEndOffset()
		if _, err := p.AppendBatch(build(first, 5, start+first)); err != nil {
			return err
		}
	}
	fmt.Printf("after 40 more batches: log end offset %d, high watermark %d, segments %d\n",
		p.LogEndOffset(), p.HighWatermark(), countSegments(dir))

	// 3. Bad input changes nothing: a flipped byte fails the CRC.
	bad := build(0, 2, start)
	bad[len(bad)-1] ^= 0xff
	_, err = p.AppendBatch(bad)
	fmt.Printf("corrupt batch rejected: %v (ErrCorrupt: %t); log end still %d\n",
		err, errors.Is(err, batch.ErrCorrupt), p.LogEndOffset())

	// 4. Read everything back from offset 0, one ReadFrom at a time.
	n, err := readAll(p)
	if err != nil {
		return err
	}
	fmt.Printf("read back %d records, offsets 0..%d in order\n", n, n-1)

	// 5. Time lookup: the first record at or after start+100 ms.
	to, found, err := p.OffsetForTimestamp(start + 100)
	if err != nil {
		return err
	}
	fmt.Printf("first record at or after t+100ms: offset %d (timestamp t+%dms, found %t)\n",
		to.Offset, to.Timestamp-start, found)

	// 6. Close and reopen: offsets survive.
	if err := p.Close(); err != nil {
		return err
	}
	p, err = plog.Open(dir, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	fmt.Printf("reopened: log start %d, log end %d\n", p.LogStartOffset(), p.LogEndOffset())
	n, err = readAll(p)
	if err != nil {
		return err
	}
	fmt.Printf("read back %d records after reopen\n", n)
	return nil
}

// build encodes a producer batch of n records; record i of the whole demo
// has key "key-<offset>" and a timestamp one millisecond after the one
// before. The base offset in the header stays 0, as a producer sends it.
func build(firstOffset int64, n int, ts int64) []byte {
	bld := batch.NewBuilder(batch.BuilderOptions{})
	for i := 0; i < n; i++ {
		off := firstOffset + int64(i)
		err := bld.Add(batch.Record{
			Key:       []byte(fmt.Sprintf("key-%d", off)),
			Value:     []byte(fmt.Sprintf("order %d", off)),
			Timestamp: ts + int64(i),
		})
		if err != nil {
			panic(fmt.Sprintf("quickstart: building a batch: %v", err))
		}
	}
	b, err := bld.Build()
	if err != nil {
		panic(fmt.Sprintf("quickstart: building a batch: %v", err))
	}
	return b
}

// readAll reads the partition from offset 0 to the high watermark and checks
// that the records come back with consecutive offsets.
func readAll(p *plog.Partition) (int, error) {
	var dec batch.Decoder
	next := int64(0)
	for next < p.HighWatermark() {
		recs, err := p.ReadFrom(next, 1<<20)
		if err != nil {
			return 0, err
		}
		set := recs.Bytes()
		for len(set) > 0 {
			b, rest, err := batch.Parse(set)
			if err != nil {
				recs.Close()
				return 0, err
			}
			for rec, err := range b.All(&dec) {
				if err != nil {
					recs.Close()
					return 0, err
				}
				if rec.Offset != next {
					recs.Close()
					return 0, fmt.Errorf("offset %d where %d was expected", rec.Offset, next)
				}
				next++
			}
			set = rest
		}
		if err := recs.Close(); err != nil {
			return 0, err
		}
	}
	return int(next), nil
}

func countSegments(dir string) int {
	m, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	return len(m)
}
