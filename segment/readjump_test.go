package segment

import (
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
)

// modelRead is Read computed from the model by a linear walk: the first
// batch whose last offset is >= start (given even past maxBytes with
// minOne), then every following batch that ends within maxBytes of its
// start and at or before maxPos.
func (m *model) read(start int64, maxBytes int, maxPos int64, minOne bool) Slice {
	i := m.translate(start)
	if i < 0 {
		return Slice{}
	}
	first, pos := m.batches[i], m.pos[i]
	if pos+int64(len(first)) > maxPos || (int64(len(first)) > int64(maxBytes) && !minOne) {
		return Slice{}
	}
	budget := max(int64(maxBytes), int64(len(first)))
	sl := Slice{Start: pos, End: pos + int64(len(first)), FirstOffset: first.BaseOffset(), NextOffset: first.NextOffset()}
	for j := i + 1; j < len(m.batches); j++ {
		end := m.pos[j] + int64(len(m.batches[j]))
		if end > maxPos || end-pos > budget {
			break
		}
		sl.End, sl.NextOffset = end, m.batches[j].NextOffset()
	}
	return sl
}

// TestReadLongRangeOfSmallBatches checks Read over ranges of many small
// batches (one-record batches, some with several records or offset gaps as
// compaction leaves them) against a linear walk, for every filesystem
// kind, and that a 1 MiB read does not read every header of the range: it
// looks its end up in the offset index (issue 16: Read walked about 6,000
// headers per 1 MiB of one-record batches, a fifth of the time of reading
// them). Without a mapping each header is a ReadAt, which the test counts.
func TestReadLongRangeOfSmallBatches(t *testing.T) {
	for _, k := range fsKinds {
		t.Run(k.name, func(t *testing.T) {
			fsys, dir := k.fs(t)
			in := vfs.NewInjector(fsys)
			var headerReads atomic.Int64
			in.SetHook(func(op vfs.Op) error {
				if op.Kind == vfs.OpReadAt && strings.HasSuffix(op.Path, LogSuffix) {
					headerReads.Add(1)
				}
				return nil
			})
			mustMkdir(t, in, dir)
			cfg := k.cfg
			cfg.MaxSegmentBytes = 8 << 20
			s, err := Create(in, dir, 0, cfg)
			require.NoError(t, err)
			defer mustClose(t, s)
			rng := rand.New(rand.NewPCG(16, 1))
			next := int64(0)
			for i := range 12_000 {
				n := 1
				if i%97 == 0 {
					n = 1 + rng.IntN(20)
				}
				next += int64(rng.IntN(2) * rng.IntN(3)) // gaps, as after compaction
				b := simpleBatch(t, next, n, 1_700_000_000_000+int64(i), 40+rng.IntN(100))
				mustAppend(t, s, b)
				next = b.NextOffset()
			}
			m := checkSegment(t, s)
			size := s.Size()
			for range 300 {
				start := rng.Int64N(next + 5)
				maxBytes := rng.IntN(1 << 20)
				maxPos := size
				if rng.IntN(3) == 0 {
					maxPos = rng.Int64N(size + 1)
				}
				minOne := rng.IntN(2) == 0
				got, err := s.Read(start, maxBytes, maxPos, minOne)
				require.NoError(t, err)
				require.Equal(t, m.read(start, maxBytes, maxPos, minOne), got, "Read(%d, %d, %d, %v)", start, maxBytes, maxPos, minOne)
			}
			if s.Mapped() {
				return
			}
			headerReads.Store(0)
			sl, err := s.Read(0, 1<<20, size, true)
			require.NoError(t, err)
			batches := 0
			for rest := s.mustBytes(t, sl); len(rest) > 0; batches++ {
				_, rest, err = batch.Parse(rest)
				require.NoError(t, err)
			}
			t.Logf("Read of %d bytes (%d batches): %d header reads", sl.Len(), batches, headerReads.Load())
			require.Less(t, headerReads.Load(), int64(batches/10), "Read walked the headers of the range")
		})
	}
}

// mustBytes returns the bytes of sl.
func (s *Segment) mustBytes(t *testing.T, sl Slice) []byte {
	t.Helper()
	b, err := s.Bytes(sl.Start, sl.End, nil)
	require.NoError(t, err)
	return b
}
