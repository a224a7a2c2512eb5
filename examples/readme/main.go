// Command readme is the program of partlog's README: it stores two batches
// in a partition in a temporary directory, reads their records back and
// closes the partition.
package main

import (
	"fmt"
	"log"
	"os"
	"time"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log" // the package is named log too
)

func main() {
	dir, err := os.MkdirTemp("", "partlog-readme-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// A partition is a directory of Kafka's segment files. The zero Config
	// is Kafka's defaults.
	p, err := plog.Open(dir, plog.Config{})
	if err != nil {
		log.Fatal(err)
	}

	// Encode records into a RecordBatch v2 and append it. The partition
	// assigns the offsets: the first batch gets 0-2, the second 3-4.
	bld := batch.NewBuilder(batch.BuilderOptions{})
	for _, values := range [][]string{{"apple", "banana", "cherry"}, {"damson", "elder"}} {
		for _, v := range values {
			rec := batch.Record{Key: []byte("fruit"), Value: []byte(v), Timestamp: time.Now().UnixMilli()}
			if err := bld.Add(rec); err != nil {
				log.Fatal(err)
			}
		}
		info, err := p.AppendBuilder(bld)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("appended offsets %d-%d\n", info.Base, info.LastOffset)
		bld.Reset(batch.BuilderOptions{}) // the next batch reuses the buffers
	}

	// Read from offset 0: whole batches, straight from the segment file's
	// memory mapping, then their records.
	recs, err := p.ReadFrom(0, 1<<20)
	if err != nil {
		log.Fatal(err)
	}
	for rec, err := range recs.All(nil) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d %s=%s\n", rec.Offset, rec.Key, rec.Value)
	}
	if err := recs.Close(); err != nil {
		log.Fatal(err)
	}
	if err := p.Close(); err != nil {
		log.Fatal(err)
	}
}
