package batch_test

import (
	"errors"
	"fmt"

	"github.com/partlog/partlog/batch"
)

// A producer builds batches with base offset 0; a broker frames the record
// set, validates every batch, assigns offsets in place and reads records
// back.
func Example() {
	var set []byte
	for _, n := range []int{11, 3} {
		bld := batch.NewBuilder(batch.BuilderOptions{Compression: batch.CompressionZstd})
		for i := range n {
			bld.Add(batch.Record{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v"), Timestamp: 1700000000000})
		}
		set, _ = bld.AppendTo(set)
	}

	next := int64(0)
	for rest := set; len(rest) > 0; {
		b, r, err := batch.Parse(rest)
		if err != nil {
			fmt.Println(err)
			return
		}
		if err := b.Validate(); err != nil {
			fmt.Println(err)
			return
		}
		b.SetBaseOffset(next)
		fmt.Printf("batch of %d records: offsets %d..%d\n", b.RecordsCount(), b.BaseOffset(), b.LastOffset())
		next = b.NextOffset()
		rest = r
	}
	fmt.Println("log end offset", next)
	// Output:
	// batch of 11 records: offsets 0..10
	// batch of 3 records: offsets 11..13
	// log end offset 14
}

func ExampleBatch_Records() {
	bld := batch.NewBuilder(batch.BuilderOptions{BaseOffset: 100, Compression: batch.CompressionLZ4})
	bld.Add(batch.Record{Key: []byte("user-1"), Value: []byte("hello"), Timestamp: 1000,
		Headers: []batch.RecordHeader{{Key: []byte("trace"), Value: []byte("abc")}}})
	bld.Add(batch.Record{Key: nil, Value: nil, Timestamp: 1005}) // null key, tombstone
	b, _ := bld.Build()

	var dec batch.Decoder // reused across batches: no allocation per record
	it := b.Records(&dec)
	for {
		rec, ok, err := it.Next()
		if err != nil {
			fmt.Println(err)
			return
		}
		if !ok {
			break
		}
		fmt.Printf("%d @%d key=%q (null %v) value=%q headers=%d\n",
			rec.Offset, rec.Timestamp, rec.Key, rec.Key == nil, rec.Value, len(rec.Headers))
	}
	// Output:
	// 100 @1000 key="user-1" (null false) value="hello" headers=1
	// 101 @1005 key="" (null true) value="" headers=0
}

func ExampleBatch_Validate() {
	b, _ := batch.NewBuilder(batch.BuilderOptions{}).Build()
	b[len(b)-1] ^= 0xff // damage a byte under the CRC (recordsCount)
	err := b.Validate()
	fmt.Println(errors.Is(err, batch.ErrCorrupt))
	fmt.Println(err)
	// Output:
	// true
	// partlog: corrupt data: stored 0x3830a8fa, computed 0x954dfbab (crc at byte 17)
}

func ExampleAppendControlBatch() {
	out, _ := batch.AppendControlBatch(nil, batch.TxnMarker{
		Type: batch.ControlCommit, CoordinatorEpoch: 15, ProducerID: 42, ProducerEpoch: 1,
		BaseOffset: 7, Timestamp: 1700000000000,
	})
	b, _, _ := batch.Parse(out)
	fmt.Println(b.Attributes())
	for rec, err := range b.All(nil) {
		if err != nil {
			fmt.Println(err)
			return
		}
		cr, err := batch.ParseControlRecord(rec)
		fmt.Println(rec.Offset, cr.Type, cr.CoordinatorEpoch, err)
	}
	// Output:
	// codec=none|transactional|control
	// 7 COMMIT 15 <nil>
}
