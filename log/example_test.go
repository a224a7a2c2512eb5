package log_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

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

// A log directory holds many partitions: OpenDir opens (or creates) it and
// every partition in it, Lookup finds one and says why when there is
// none, and Close marks a clean shutdown, so that the next OpenDir
// recovers nothing.
func ExampleOpenDir() {
	dir, _ := os.MkdirTemp("", "partlog-example")
	defer os.RemoveAll(dir)

	d, err := plog.OpenDir(dir, plog.DirConfig{})
	if err != nil {
		panic(err)
	}
	for part := range int32(2) {
		p, err := d.CreatePartition("orders", part)
		if err != nil {
			panic(err)
		}
		if _, err := p.AppendBatch(producerBatch(2 + int(part))); err != nil {
			panic(err)
		}
	}
	if err := d.Close(); err != nil {
		panic(err)
	}

	d, err = plog.OpenDir(dir, plog.DirConfig{})
	if err != nil {
		panic(err)
	}
	defer d.Close()
	for _, tp := range d.Partitions() {
		p, err := d.Lookup(tp.Topic, tp.Partition)
		if err != nil {
			panic(err)
		}
		fmt.Println(tp, "log end offset", p.LogEndOffset(), "clean", p.Stats().Recovery.Clean)
	}
	_, err = d.Lookup("payments", 0)
	fmt.Println("payments-0 unknown:", errors.Is(err, plog.ErrUnknownPartition))
	// Output:
	// orders-0 log end offset 2 clean true
	// orders-1 log end offset 3 clean true
	// payments-0 unknown: true
}

// CreatePartition creates a partition's directory, or returns the
// partition when the Dir holds it; a partition closed on its own is
// reopened with OpenPartition while the Dir stays open.
func ExampleDir_CreatePartition() {
	dir, _ := os.MkdirTemp("", "partlog-example")
	defer os.RemoveAll(dir)
	d, err := plog.OpenDir(dir, plog.DirConfig{})
	if err != nil {
		panic(err)
	}
	defer d.Close()

	p, err := d.CreatePartition("events", 0)
	if err != nil {
		panic(err)
	}
	again, _ := d.CreatePartition("events", 0)
	fmt.Println("same partition:", again == p)
	_, err = d.CreatePartition("no/slashes", 0)
	fmt.Println("invalid name:", errors.Is(err, plog.ErrInvalidPartition))

	if _, err := p.AppendBatch(producerBatch(3)); err != nil {
		panic(err)
	}
	if err := p.Close(); err != nil { // closed alone: it stays in the Dir, closed
		panic(err)
	}
	_, err = d.Lookup("events", 0)
	fmt.Println("closed:", errors.Is(err, plog.ErrClosed))
	p, err = d.OpenPartition("events", 0)
	if err != nil {
		panic(err)
	}
	fmt.Println("reopened, log end offset", p.LogEndOffset())
	// Output:
	// same partition: true
	// invalid name: true
	// closed: true
	// reopened, log end offset 3
}

// A consumer tails a partition with Records: one range loop yields the
// records below the high watermark, waits for the next append, and yields
// its records, until its context ends.
func ExamplePartition_Records_tail() {
	dir, _ := os.MkdirTemp("", "partlog-example")
	defer os.RemoveAll(dir)
	p, err := plog.Open(filepath.Join(dir, "events-0"), plog.Config{})
	if err != nil {
		panic(err)
	}
	defer p.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for rec, err := range p.Records(ctx, 0) {
			if err != nil {
				fmt.Println("stopped:", err)
				return
			}
			fmt.Printf("%d: %s\n", rec.Offset, rec.Value)
			if rec.Offset == 4 {
				return // a real consumer ranges on
			}
		}
	}()
	// The producer: the consumer waits between the appends.
	for _, n := range []int{2, 3} {
		if _, err := p.AppendBatch(producerBatch(n)); err != nil {
			panic(err)
		}
	}
	<-consumed
	// Output:
	// 0: event 0
	// 1: event 1
	// 2: event 0
	// 3: event 1
	// 4: event 2
}

// A bounded read: Poll yields up to maxRecords records from an offset,
// those visible now, and waits only when there is none yet (a long poll,
// bounded by its context). The offset after the last record yielded is
// where the next Poll continues.
func ExamplePartition_Poll() {
	dir, _ := os.MkdirTemp("", "partlog-example")
	defer os.RemoveAll(dir)
	p, err := plog.Open(filepath.Join(dir, "events-0"), plog.Config{})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	_, _ = p.AppendBatch(producerBatch(4)) // offsets 0-3
	_, _ = p.AppendBatch(producerBatch(3)) // offsets 4-6

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	next := int64(2)
	for round := range 3 {
		for rec, err := range p.Poll(ctx, next, 3) {
			if err != nil {
				fmt.Printf("poll %d: %v\n", round, err) // nothing came before the deadline
				break
			}
			fmt.Printf("poll %d: %d: %s\n", round, rec.Offset, rec.Value)
			next = rec.Offset + 1
		}
	}
	fmt.Println("next offset:", next)
	// Output:
	// poll 0: 2: event 2
	// poll 0: 3: event 3
	// poll 0: 4: event 0
	// poll 1: 5: event 1
	// poll 1: 6: event 2
	// poll 2: context deadline exceeded
	// next offset: 7
}

// Transactions: a transactional producer's batches stay above the last
// stable offset until a marker ends the transaction; a read_committed
// consumer reads below it with ReadCommitted, which names the aborted
// transactions whose batches it must drop.
func ExamplePartition_ReadCommitted() {
	dir, _ := os.MkdirTemp("", "partlog-example")
	defer os.RemoveAll(dir)
	p, err := plog.Open(filepath.Join(dir, "payments-0"), plog.Config{})
	if err != nil {
		panic(err)
	}
	defer p.Close()

	// txn encodes n records of a transactional producer, as it sends them.
	txn := func(producerID int64, n int) []byte {
		bld := batch.NewBuilder(batch.BuilderOptions{
			PartitionLeaderEpoch: batch.NoPartitionLeaderEpoch,
			Producer:             &batch.Producer{ID: producerID, Epoch: 0, BaseSequence: 0},
			Transactional:        true,
		})
		for i := range n {
			_ = bld.Add(batch.Record{Value: fmt.Appendf(nil, "payment %d.%d", producerID, i)})
		}
		b, _ := bld.Build()
		return b
	}
	end := func(t batch.ControlType, producerID int64) {
		if _, err := p.AppendMarker(batch.TxnMarker{Type: t, ProducerID: producerID}); err != nil {
			panic(err)
		}
		fmt.Printf("%s of producer %d: last stable offset %d\n", t, producerID, p.LastStableOffset())
	}
	for _, id := range []int64{7, 8} {
		if _, err := p.AppendBatch(txn(id, 2)); err != nil {
			panic(err)
		}
	}
	fmt.Println("high watermark", p.HighWatermark(), "last stable offset", p.LastStableOffset())
	end(batch.ControlAbort, 8)
	end(batch.ControlCommit, 7)

	recs, aborted, err := p.ReadCommitted(0, 1<<20)
	if err != nil {
		panic(err)
	}
	defer recs.Close()
	isAborted := func(b batch.Batch) bool {
		for _, a := range aborted {
			if a.ProducerID == b.ProducerID() && b.BaseOffset() >= a.FirstOffset && b.BaseOffset() <= a.LastOffset {
				return true
			}
		}
		return false
	}
	for b, err := range recs.Batches() {
		if err != nil {
			panic(err)
		}
		switch {
		case b.Attributes().IsControl():
			fmt.Printf("[%d, %d] marker of producer %d\n", b.BaseOffset(), b.LastOffset(), b.ProducerID())
		case isAborted(b):
			fmt.Printf("[%d, %d] producer %d: aborted, dropped\n", b.BaseOffset(), b.LastOffset(), b.ProducerID())
		default:
			fmt.Printf("[%d, %d] producer %d: committed\n", b.BaseOffset(), b.LastOffset(), b.ProducerID())
		}
	}
	// Output:
	// high watermark 4 last stable offset 0
	// ABORT of producer 8: last stable offset 0
	// COMMIT of producer 7: last stable offset 6
	// [0, 1] producer 7: committed
	// [2, 3] producer 8: aborted, dropped
	// [4, 4] marker of producer 8
	// [5, 5] marker of producer 7
}
