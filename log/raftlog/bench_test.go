package raftlog_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/raftlog"
)

// startGroup starts a group of n replicas in process (localNet), on
// partitions under b's temporary directory, and returns the leader once it
// accepts proposals.
func startGroup(b testing.TB, n int) *raftlog.Replica {
	b.Helper()
	root := b.TempDir()
	net := &localNet{nodes: make(map[uint64]*raftlog.Node)}
	var peers []uint64
	for i := range n {
		peers = append(peers, uint64(i+1))
	}
	var replicas []*raftlog.Replica
	for _, id := range peers {
		dir := filepath.Join(root, fmt.Sprint("node", id))
		require.NoError(b, os.MkdirAll(dir, 0o755))
		part, err := log.Open(filepath.Join(dir, "bench-0"), log.Config{DisableAutoHighWatermark: true, StampLeaderEpoch: true})
		require.NoError(b, err)
		node, err := raftlog.NewNode(raftlog.Config{ID: id, Transport: net, StateDir: dir})
		require.NoError(b, err)
		b.Cleanup(func() { _ = part.Close() })
		b.Cleanup(func() { _ = node.Close() })
		net.mu.Lock()
		net.nodes[id] = node
		net.mu.Unlock()
		r, err := node.Start("bench-0", part, raftlog.Membership{Voters: peers})
		require.NoError(b, err)
		replicas = append(replicas, r)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, r := range replicas {
			if r.ReadyTerm() != 0 {
				return r
			}
		}
	}
	b.Fatal("no leader in 30s")
	return nil
}

// benchBatch is a batch of 10 records of 100 bytes.
func benchBatch(b *testing.B) []byte {
	bld := batch.NewBuilder(batch.BuilderOptions{})
	for range 10 {
		require.NoError(b, bld.Add(batch.Record{Value: make([]byte, 100), Timestamp: time.Now().UnixMilli()}))
	}
	out, err := bld.Build()
	require.NoError(b, err)
	return out
}

// BenchmarkPropose measures AcksAll proposals of a 10-record batch on a
// group of 1 and 3 in-process replicas on the local disk (every entry
// synced before it counts): one proposal at a time (commit latency: its
// p50 and p99), and 64 at a time (proposals per second; the leader syncs
// the entries of all queued proposals at once).
func BenchmarkPropose(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("replicas=%d/inflight=1", n), func(b *testing.B) {
			r := startGroup(b, n)
			rec := benchBatch(b)
			lat := make([]time.Duration, 0, b.N)
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				t0 := time.Now()
				_, err := r.Propose(ctx, rec, raftlog.ProposeOptions{Acks: raftlog.AcksAll})
				require.NoError(b, err)
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(len(lat))/b.Elapsed().Seconds(), "proposals/s")
		})
		b.Run(fmt.Sprintf("replicas=%d/inflight=64", n), func(b *testing.B) {
			r := startGroup(b, n)
			rec := benchBatch(b)
			ctx := context.Background()
			b.SetParallelism(32) // 64 goroutines on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := r.Propose(ctx, rec, raftlog.ProposeOptions{Acks: raftlog.AcksAll}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "proposals/s")
		})
	}
}
