// Package partlog is an embeddable library that stores Kafka-style partition
// logs, byte for byte in Apache Kafka's on-disk format.
//
// The module is layered; imports only point down, and each layer is usable
// on its own:
//
//	compaction  retention and key-based compaction as pluggable policies
//	log         Partition: a directory of segments; AppendBatch, ReadFrom, offsets
//	segment     one segment: .log + .index + .timeindex; append, lookup, read, recover
//	index       Kafka's sparse mmap'd offset and time indexes
//	index/vfs   the filesystem every file goes through; implement or wrap it
//	batch       zero-copy codec for RecordBatch v2
//	internal    crash-simulating and fault-injecting filesystems, mmap, checkpoints
//
// A first example, with the log package imported under another name because
// it shadows the standard library's log:
//
//	import plog "github.com/partlog/partlog/log"
//
//	p, err := plog.Open(dir, plog.Config{})
//	if err != nil {
//		return err
//	}
//	defer p.Close()
//	base, err := p.AppendBatch(encodedBatch) // assigns offsets: base, base+1, ...
//	recs, err := p.ReadFrom(base, 1<<20)     // whole batches, zero-copy
//	defer recs.Close()
//
// See README.md for what works today, and DESIGN.md for the file map and the
// lock order.
package partlog
