package log_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

// producerBatch encodes n records the way a Kafka producer sends them:
// base offset 0, leader epoch -1.
func producerBatch(n int) []byte {
	bld := batch.NewBuilder(batch.BuilderOptions{PartitionLeaderEpoch: batch.NoPartitionLeaderEpoch})
	for i := 0; i < n; i++ {
		_ = bld.Add(batch.Record{Value: fmt.Appendf(nil, "event %d", i), Timestamp: 1_700_000_000_000 + int64(i)})
	}
	b, _ := bld.Build()
	return b
}

// The field report's scenario: a batch of 11 records and one of 3 get
// offsets 0-10 and 11-13; the log end offset is 14, also after a reopen.
func Example() {
	dir, _ := os.MkdirTemp("", "partlog-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "orders-0")

	p, err := plog.Open(path, plog.Config{})
	if err != nil {
		panic(err)
	}
	for _, n := range []int{11, 3} {
		base, err := p.AppendBatch(producerBatch(n))
		if err != nil {
			panic(err)
		}
		fmt.Printf("appended %d records at base offset %d\n", n, base)
	}
	fmt.Println("log end offset:", p.LogEndOffset())
	if err := p.Close(); err != nil {
		panic(err)
	}

	p, err = plog.Open(path, plog.Config{})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	recs, err := p.ReadFrom(0, 1<<20)
	if err != nil {
		panic(err)
	}
	defer recs.Close()
	for rest := recs.Bytes(); len(rest) > 0; {
		b, tail, err := batch.Parse(rest)
		if err != nil {
			panic(err)
		}
		fmt.Printf("batch [%d, %d]\n", b.BaseOffset(), b.LastOffset())
		rest = tail
	}
	fmt.Println("log end offset after reopen:", p.LogEndOffset())
	// Output:
	// appended 11 records at base offset 0
	// appended 3 records at base offset 11
	// log end offset: 14
	// batch [0, 10]
	// batch [11, 13]
	// log end offset after reopen: 14
}

// Kafka's ListOffsets: the first record at or after a timestamp, and the
// sentinels.
func ExamplePartition_OffsetForTimestamp() {
	dir, _ := os.MkdirTemp("", "partlog-example")
	defer os.RemoveAll(dir)
	p, err := plog.Open(dir, plog.Config{})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	_, _ = p.AppendBatch(producerBatch(5)) // timestamps ...000 to ...004

	to, found, _ := p.OffsetForTimestamp(1_700_000_000_003)
	fmt.Println(to.Offset, to.Timestamp, found)
	to, _, _ = p.OffsetForTimestamp(plog.LatestTimestamp)
	fmt.Println("latest:", to.Offset)
	to, _, _ = p.OffsetForTimestamp(plog.MaxTimestamp)
	fmt.Println("max timestamp at:", to.Offset)
	// Output:
	// 3 1700000000003 true
	// latest: 5
	// max timestamp at: 4
}

// Per-append durability: AppendBatch returns once an fdatasync covers the
// batch (concurrent appenders share fdatasyncs), and a reopen after a
// crash refuses to cut anything but a torn tail.
func ExampleConfig_durability() {
	dir, _ := os.MkdirTemp("", "partlog-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "payments-0")

	cfg := plog.Config{
		FlushMessages: 1, // flush.messages=1
		Recovery:      plog.StrictRecovery{AllowTornTail: true},
	}
	p, err := plog.Open(path, cfg)
	if err != nil {
		panic(err)
	}
	base, err := p.AppendBatch(producerBatch(5))
	if err != nil {
		// errors.Is(err, plog.ErrFailed) after a failed fsync: reopen.
		panic(err)
	}
	fmt.Println("durable at base offset", base, "high watermark", p.HighWatermark())
	if err := p.Close(); err != nil { // marks a clean shutdown
		panic(err)
	}
	p, err = plog.Open(path, cfg) // clean: no batch is read
	if err != nil {
		panic(err)
	}
	defer p.Close()
	fmt.Println("log end offset", p.LogEndOffset())
	// Output:
	// durable at base offset 0 high watermark 5
	// log end offset 5
}

// A program that builds its own records appends them from the Builder:
// one Builder reused for every batch, no byte slice built, the records
// written from the Builder's buffer.
func ExamplePartition_AppendBuilder() {
	dir, _ := os.MkdirTemp("", "partlog-example")
	defer os.RemoveAll(dir)
	p, err := plog.Open(filepath.Join(dir, "events-0"), plog.Config{})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	bld := batch.NewBuilder(batch.BuilderOptions{})
	for round := range 2 {
		bld.Reset(batch.BuilderOptions{})
		for i := range 3 {
			if err := bld.Add(batch.Record{Value: fmt.Appendf(nil, "event %d.%d", round, i), Timestamp: time.Now().UnixMilli()}); err != nil {
				panic(err)
			}
		}
		info, err := p.AppendBuilder(bld)
		if err != nil {
			panic(err)
		}
		fmt.Printf("offsets %d-%d\n", info.Base, info.LastOffset)
	}
	// Output:
	// offsets 0-2
	// offsets 3-5
}
