package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkClusterProduce measures produce throughput and latency with
// acks=all (idempotent franz-go producer, 64 records of 100 bytes in
// flight, one partition) against a 3-node cluster and, for comparison, a
// single-node broker (whose acks=all syncs the partition before the
// answer). Each node is its own process on loopback. Reported: records/s
// and the median and 99th percentile of the time from Produce to its
// acknowledgement.
func BenchmarkClusterProduce(b *testing.B) {
	for _, nodes := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			c := newTestCluster(b, nodes)
			c.plain = nodes == 1
			var seeds []string
			for id := 1; id <= nodes; id++ {
				c.start(id)
				seeds = append(seeds, c.node(id).kafka)
			}
			cl, err := kgo.NewClient(
				kgo.SeedBrokers(seeds...),
				kgo.DefaultProduceTopic("bench"),
				kgo.AllowAutoTopicCreation(),
				kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.RequiredAcks(kgo.AllISRAcks()),
			)
			require.NoError(b, err)
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*clusterTimeout)
			defer cancel()
			// One acknowledged record first: the topic exists and has a
			// leader before the clock starts.
			require.NoError(b, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("warm-up")}).FirstErr())

			value := make([]byte, 100)
			lat := make([]time.Duration, b.N)
			sem := make(chan struct{}, 64)
			var wg sync.WaitGroup
			var mu sync.Mutex
			var firstErr error
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				sem <- struct{}{}
				wg.Add(1)
				t0 := time.Now()
				cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
					lat[i] = time.Since(t0)
					if err != nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
					}
					<-sem
					wg.Done()
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			require.NoError(b, firstErr)
			slices.Sort(lat)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
