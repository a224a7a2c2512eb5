package compaction

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// TestSwapIncompleteLeavesPartitionWritable: after a swap fails past its
// commit point (ErrSwapIncomplete) the partition must refuse writes (its
// files disagree with its list). When it stayed writable, a follower
// truncation made a segment whose files were already renamed .deleted the
// active one, and synced appends were lost at reopen. Reopening completes
// the swap and keeps every record.
func TestSwapIncompleteLeavesPartitionWritable(t *testing.T) {
	mem := vfs.NewMem()
	in := vfs.NewInjector(mem)
	dir := "/p/topic-0"
	open := func(fs vfs.FS) *plog.Partition {
		p, err := plog.Open(dir, plog.Config{FS: fs, SegmentBytes: 600})
		require.NoError(t, err)
		return p
	}
	p := open(in)
	for i := 0; i < 30; i++ {
		b := buildBatch(t, batch.CompressionNone, nil, kv{key: k(fmt.Sprintf("k%d", i%3)), value: k(fmt.Sprintf("v%d", i)), ts: 1000})
		_, err := p.AppendBatch(b)
		require.NoError(t, err)
	}
	require.NoError(t, p.Roll())
	segsBefore := p.SegmentInfos()
	endBefore := p.LogEndOffset()
	in.FailOnce(func(op vfs.Op) bool {
		return op.Kind == vfs.OpRename && strings.HasSuffix(op.Path, ".log.swap")
	})
	now := time.Unix(100000, 0)
	c, err := NewCompactor(compactCfg(&now))
	require.NoError(t, err)
	_, err = c.Apply(context.Background(), p)
	require.ErrorIs(t, err, plog.ErrSwapIncomplete, "Apply: %v, want ErrSwapIncomplete", err)
	_, err = p.AppendBatch(buildBatch(t, batch.CompressionNone, nil, kv{key: k("x"), value: k("y"), ts: 1000}))
	require.ErrorIs(t, err, plog.ErrFailed, "AppendBatch after an incomplete swap: %v, want ErrFailed", err)
	err = p.TruncateTo(segsBefore[0].NextOffset - 2)
	require.ErrorIs(t, err, plog.ErrFailed, "TruncateTo after an incomplete swap: %v, want ErrFailed", err)
	_ = p.Close()
	p2 := open(mem)
	defer p2.Close()
	require.Equal(t, endBefore, p2.LogEndOffset(), "log end after reopen %d, want %d", p2.LogEndOffset(), endBefore)
	last := map[string]string{}
	for _, r := range readPartition(t, p2) {
		last[r.Key] = string(r.Value)
	}
	for i := 27; i < 30; i++ {
		got, want := last[fmt.Sprintf("k%d", i%3)], fmt.Sprintf("v%d", i)
		assert.Equal(t, want, got, "k%d = %q after reopen, want %q", i%3, got, want)
	}
	require.NoError(t, p2.Verify())
}

// TestRaceCompactReadClose: readers (some keeping Records past Close),
// compaction and retention rounds, appends, truncations and Close, all at
// once (run it with -race): every read is whole valid batches, and Records
// held across Close stay valid.
func TestRaceCompactReadClose(t *testing.T) {
	for _, mm := range []bool{true, false} {
		t.Run(fmt.Sprint("mmap=", mm), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "t-0")
			p, err := plog.Open(dir, plog.Config{SegmentBytes: 2048, IndexIntervalBytes: 128, DisableMmap: !mm})
			require.NoError(t, err)
			now := time.Unix(1e6, 0)
			cfg := Config{CleanupPolicy: PolicyCompact + "," + PolicyDelete, MinCleanableDirtyRatio: 0.0001,
				OffsetMapBytes: 1 << 20, RetentionBytes: 20000, Now: func() time.Time { return now }}
			pols, err := Policies(cfg)
			require.NoError(t, err)
			valid := func(b []byte) error {
				for len(b) > 0 {
					bt, rest, err := batch.Parse(b)
					if err != nil {
						return err
					}
					if err := bt.Validate(); err != nil {
						return err
					}
					b = rest
				}
				return nil
			}
			var done, closing atomic.Bool
			var wg sync.WaitGroup
			var held sync.Mutex
			var keep []plog.Records
			for r := 0; r < 3; r++ {
				wg.Add(1)
				go func(seed uint64) {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(seed, 1))
					for !done.Load() {
						s, h := p.LogStartOffset(), p.HighWatermark()
						if h < s {
							continue
						}
						o := s + rng.Int64N(h-s+1)
						rec, err := p.ReadFrom(o, rng.IntN(3000))
						if errors.Is(err, plog.ErrClosed) {
							return
						}
						if errors.Is(err, plog.ErrOffsetOutOfRange) {
							continue
						}
						if !assert.NoError(t, err, "ReadFrom(%d)", o) {
							return
						}
						assert.NoError(t, valid(rec.Bytes()), "ReadFrom(%d)", o)
						_, _ = rec.WriteTo(io.Discard)
						if rng.IntN(50) == 0 && closing.Load() {
							held.Lock()
							keep = append(keep, rec)
							held.Unlock()
						} else {
							_ = rec.Close()
						}
						_, _, _ = p.OffsetForTimestamp(int64(rng.IntN(600)))
					}
				}(uint64(r))
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !done.Load() {
					for _, pol := range pols {
						_, err := pol.Apply(context.Background(), p)
						if err != nil && !errors.Is(err, plog.ErrSegmentsChanged) {
							assert.ErrorIs(t, err, plog.ErrClosed, "%s: %v", pol.Name(), err)
						}
					}
					time.Sleep(time.Millisecond)
				}
			}()
			for i := 0; i < 400; i++ {
				bld := batch.NewBuilder(batch.BuilderOptions{Compression: batch.Compression(i % 3)})
				for j := 0; j < 1+i%4; j++ {
					_ = bld.Add(batch.Record{Key: []byte(fmt.Sprint("k", (i+j)%17)), Value: []byte(fmt.Sprint("v", i)), Timestamp: int64(i)})
				}
				b, _ := bld.Build()
				_, err := p.AppendBatch(append([]byte(nil), b...))
				require.NoError(t, err)
				if i%97 == 96 {
					// The records are dated 1970, so retention also rolls
					// and deletes the active segment: the log start may
					// have passed the target, which TruncateTo refuses.
					to := p.LogEndOffset() - 3
					if err := p.TruncateTo(to); err != nil {
						require.ErrorIs(t, err, plog.ErrOffsetOutOfRange)
						require.Greater(t, p.LogStartOffset(), to, "TruncateTo(%d): %v", to, err)
					}
				}
			}
			assert.NoError(t, p.Verify(), "Verify")
			closing.Store(true)
			time.Sleep(20 * time.Millisecond)
			assert.NoError(t, p.Close(), "Close")
			done.Store(true)
			wg.Wait()
			held.Lock()
			defer held.Unlock()
			for _, r := range keep {
				assert.NoError(t, valid(r.Bytes()), "Records held across Close")
				_, _ = r.WriteTo(io.Discard)
				_ = r.Close()
			}
		})
	}
}
