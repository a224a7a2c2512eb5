package segment

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
)

// Batches(from) and Headers are the damage walk over the segment's bytes:
// Batches yields every entry whose last offset is at or after from, whole;
// Headers yields a v2 batch's header and a control batch whole; a batch
// that fails its CRC ends Batches with an error wrapping base.ErrCorrupt
// that names the .log and the batch's position.
func TestBatchesAndHeaders(t *testing.T) {
	fsys := vfs_NewMemForTest(t)
	s, err := Create(fsys, "/x", 0, Config{IndexIntervalBytes: 100})
	require.NoError(t, err)
	var all []batch.Batch
	var pos []int64
	for i := range 8 {
		var b batch.Batch
		if i == 5 {
			b, err = batch.AppendControlBatch(nil, batch.TxnMarker{Type: batch.ControlCommit, ProducerID: 7,
				BaseOffset: s.NextOffset(), Timestamp: 100})
			require.NoError(t, err)
		} else {
			b = simpleBatch(t, s.NextOffset(), 3, int64(100+i), 50)
		}
		pos = append(pos, s.Size())
		mustAppend(t, s, b)
		all = append(all, b)
	}
	defer func() { mustClose(t, s) }()

	for _, tc := range []struct {
		name  string
		from  int64
		first int // index in all of the first batch yielded
	}{
		{"from the base", 0, 0},
		{"from inside a batch", 4, 1},
		{"from the control batch", all[5].BaseOffset(), 5},
		{"from the last offset", s.NextOffset() - 1, 7},
		{"past the end", s.NextOffset(), 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []batch.Batch
			for b, err := range s.Batches(tc.from) {
				require.NoError(t, err)
				got = append(got, append(batch.Batch(nil), b...))
			}
			assert.Equal(t, len(all)-tc.first, len(got))
			for i, b := range got {
				assert.Equal(t, all[tc.first+i], b)
			}
		})
	}

	var hdrs []batch.Batch
	for b, err := range s.Headers() {
		require.NoError(t, err)
		hdrs = append(hdrs, append(batch.Batch(nil), b...))
	}
	require.Len(t, hdrs, len(all))
	for i, h := range hdrs {
		if i == 5 {
			assert.Equal(t, all[i], h, "a control batch comes whole")
			continue
		}
		assert.Equal(t, all[i][:batch.HeaderSize], h)
	}

	// A byte of batch 3's records flipped behind the segment's back.
	f, err := fsys.OpenReadWrite(segPath("/x", 0, LogSuffix))
	require.NoError(t, err)
	at := pos[3] + int64(len(all[3])) - 1
	var c [1]byte
	_, err = f.ReadAt(c[:], at)
	require.NoError(t, err)
	c[0] ^= 0xff
	_, err = f.WriteAt(c[:], at)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	n := 0
	var werr error
	for _, err := range s.Batches(0) {
		if err != nil {
			werr = err
			break
		}
		n++
	}
	assert.Equal(t, 3, n)
	require.ErrorIs(t, werr, base.ErrCorrupt)
	var ce *base.CorruptionError
	require.ErrorAs(t, werr, &ce)
	assert.Equal(t, segPath("/x", 0, LogSuffix), ce.File)
	assert.GreaterOrEqual(t, ce.Pos, pos[3], "the position is in batch 3: %v", werr)
	assert.Less(t, ce.Pos, pos[4], "the position is in batch 3: %v", werr)
	// Headers checks no CRC but the control batch's: it still yields all.
	n = 0
	for _, err := range s.Headers() {
		require.NoError(t, err)
		n++
	}
	assert.Equal(t, len(all), n)
}

// A consumer that stops early ends the walk, and a panic in its loop body
// is its own: the walk neither swallows it nor goes on after it.
func TestBatchesStopAndPanic(t *testing.T) {
	fsys := vfs_NewMemForTest(t)
	s, err := Create(fsys, "/x", 0, Config{})
	require.NoError(t, err)
	defer func() { mustClose(t, s) }()
	for i := range 4 {
		mustAppend(t, s, simpleBatch(t, s.NextOffset(), 2, int64(i), 10))
	}
	n := 0
	for _, err := range s.Batches(0) {
		require.NoError(t, err)
		if n++; n == 2 {
			break
		}
	}
	assert.Equal(t, 2, n)
	assert.PanicsWithValue(t, "body", func() {
		for range s.Headers() {
			panic("body")
		}
	})
	// The read lease was released: a truncation goes through.
	_, err = s.TruncateTo(2)
	require.NoError(t, err)
}
