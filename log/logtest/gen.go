package logtest

import (
	"fmt"

	"github.com/partlog/partlog/batch"
)

// MakeBatch returns an uncompressed producer batch (base offset 0, leader
// epoch -1, no producer id) of n >= 1 records. Record i has the key
// "k<i>", a value of valueSize bytes filled from seed, and the timestamp
// ts + i. It panics on a builder error, which would be a bug.
func MakeBatch(n, valueSize int, ts int64, seed byte) []byte {
	bld := batch.NewBuilder(batch.BuilderOptions{PartitionLeaderEpoch: batch.NoPartitionLeaderEpoch})
	value := make([]byte, valueSize)
	for i := range value {
		value[i] = seed + byte(i)
	}
	for i := 0; i < n; i++ {
		if err := bld.AddAt(batch.Record{Offset: int64(i), Key: fmt.Appendf(nil, "k%d", i), Value: value, Timestamp: ts + int64(i)}); err != nil {
			panic(fmt.Sprintf("partlog/logtest: MakeBatch: %v", err))
		}
	}
	b, err := bld.Build()
	if err != nil {
		panic(fmt.Sprintf("partlog/logtest: MakeBatch: %v", err))
	}
	return b
}
