package batch

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func iterateAll(b Batch, dec *Decoder) int {
	n := 0
	it := b.Records(dec)
	for {
		_, ok, err := it.Next()
		if err != nil || !ok {
			return n
		}
		n++
	}
}

// Iterating an uncompressed batch, and validating it, allocate nothing:
// keys and values alias the batch and the header scratch lives in the
// Decoder.
func TestZeroAllocsUncompressed(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	b := build(t, BuilderOptions{}, numbered(200, 1)...) // every record has a header
	var dec Decoder
	n := iterateAll(b, &dec)
	require.Equal(t, 200, n, "iterated %d records", n)
	a := testing.AllocsPerRun(50, func() { iterateAll(b, &dec) })
	assert.Zero(t, a, "iteration: %v allocs per batch of 200 records, want 0", a)
	a = testing.AllocsPerRun(50, func() {
		require.NoError(t, b.Validate())
	})
	assert.Zero(t, a, "Validate: %v allocs, want 0", a)
	a = testing.AllocsPerRun(50, func() {
		for r, err := range b.All(&dec) {
			require.NoError(t, err)
			require.True(t, r.Key != nil, "record without a key") // NotNil would box the slice: an allocation
		}
	})
	assert.Zero(t, a, "range over All: %v allocs, want 0", a)
}

// A compressed batch costs a constant number of allocations per batch
// (decompressor state), none per record, once the Decoder's buffer has
// grown.
func TestAllocsCompressedPerBatch(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	for _, c := range allCodecs[1:] {
		small := build(t, BuilderOptions{Compression: c}, numbered(10, 1)...)
		large := build(t, BuilderOptions{Compression: c}, numbered(1000, 1)...)
		var dec Decoder
		iterateAll(large, &dec)
		as := testing.AllocsPerRun(20, func() { iterateAll(small, &dec) })
		al := testing.AllocsPerRun(20, func() { iterateAll(large, &dec) })
		assert.LessOrEqual(t, al, as+1, "%s: %v allocs for 10 records, %v for 1000", c, as, al)
		av := testing.AllocsPerRun(20, func() { dec.Validate(large) })
		t.Logf("%s: %v allocs/batch iterating 10 records, %v iterating 1000, %v validating 1000", c, as, al, av)
	}
}

// Validate, iteration and building share package-level codec pools: any
// number of goroutines may use them at once (run with -race).
func TestConcurrentUse(t *testing.T) {
	var batches []Batch
	for _, c := range allCodecs {
		batches = append(batches, build(t, BuilderOptions{Compression: c}, numbered(50, 1)...))
	}
	done := make(chan error)
	for g := 0; g < 4; g++ {
		go func() {
			var dec Decoder
			for i := 0; i < 20; i++ {
				for _, b := range batches {
					if err := b.Validate(); err != nil {
						done <- err
						return
					}
					if n := iterateAll(b, &dec); n != 50 {
						done <- fmt.Errorf("%d records", n)
						return
					}
					bld := NewBuilder(BuilderOptions{Compression: b.Attributes().Compression()})
					bld.Add(Record{Value: []byte("x")})
					if _, err := bld.Build(); err != nil {
						done <- err
						return
					}
				}
			}
			done <- nil
		}()
	}
	for g := 0; g < 4; g++ {
		require.NoError(t, <-done)
	}
}
