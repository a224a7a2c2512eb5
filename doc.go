// Package partlog is an embeddable library that stores Kafka-style partition
// logs, byte for byte in Apache Kafka's on-disk format. This package holds
// no code; the library is its packages:
//
//	log          a Partition (Open): appends with Kafka's offset rules,
//	             zero-copy reads, durability policies, crash recovery,
//	             idempotent producers, transactions, follower logs; and a
//	             Dir (OpenDir): a whole Kafka log directory
//	batch        the RecordBatch v2 codec: Parse, Validate, a Builder for
//	             every compression codec, transaction markers
//	compaction   retention and key compaction as policies a Partition
//	             carries out, and runners for one partition or a Dir
//	segment      one segment (.log, .index, .timeindex) on its own
//	index        Kafka's offset and time index files on their own
//	index/vfs    the filesystem every file goes through: implement or wrap
//	             it (Config.FS) to count, delay or fail operations
//	log/logtest  a reference model of a partition, for property tests
//
// A first program: a partition in a directory, a batch of records built
// and appended, read back. The log package shadows the standard library's
// log, so import it under another name:
//
//	import (
//		"github.com/partlog/partlog/batch"
//		plog "github.com/partlog/partlog/log"
//	)
//
//	p, err := plog.Open(dir, plog.Config{}) // the zero Config is Kafka's defaults
//	if err != nil {
//		return err
//	}
//	defer p.Close()
//	bld := batch.NewBuilder(batch.BuilderOptions{})
//	if err := bld.Add(batch.Record{Key: []byte("k"), Value: []byte("v")}); err != nil {
//		return err
//	}
//	info, err := p.AppendBuilder(bld) // the partition assigns the offsets
//	if err != nil {
//		return err
//	}
//	recs, err := p.ReadFrom(info.Base, 1<<20) // whole batches, zero-copy
//	if err != nil {
//		return err
//	}
//	defer recs.Close()
//	for rec, err := range recs.All(nil) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(rec.Offset, string(rec.Value))
//	}
//
// The repository's README.md has the same program complete, with the
// commands that test and measure the library; docs/format.md describes the
// files, docs/crash-safety.md what survives a crash.
package partlog
