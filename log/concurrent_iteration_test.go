package log_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// TestConcurrentIteration ranges over Records.All and Records.Batches of
// one partition from eight goroutines at once, each with its own read
// result, and checks that every goroutine sees every record. Under the
// race detector (CI runs this package with -race) it is the reliability
// issue's second case: the readers' cache-line touching stored into a
// shared package variable, a data race that failed the -race test suite of
// every program that iterates from two goroutines.
func TestConcurrentIteration(t *testing.T) {
	p, _ := openT(t, plog.Config{})
	const batches, perBatch = 200, 5
	for i := range batches {
		_, err := p.AppendBatch(logtest.MakeBatch(perBatch, 100, int64(1000+i), byte(i)))
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r, err := p.ReadFrom(0, 1<<30)
			if !assert.NoError(t, err) {
				return
			}
			defer r.Close()
			n := 0
			if g%2 == 0 {
				for rec, err := range r.All(nil) {
					if !assert.NoError(t, err) {
						return
					}
					assert.Equal(t, int64(n), rec.Offset)
					n++
				}
			} else {
				for b, err := range r.Batches() {
					if !assert.NoError(t, err) {
						return
					}
					n += int(b.RecordsCount())
				}
			}
			assert.Equal(t, batches*perBatch, n, "goroutine %d", g)
		})
	}
	wg.Wait()
}
