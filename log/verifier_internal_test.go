package log

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/vfs"
	"github.com/partlog/partlog/segment"
)

// The verifier without a Partition: segments written on an in-memory
// directory, some files then damaged, and one walk over them.

const verifierDir = "/v/t-0"

// txnData is a transactional batch of one record of producer pid at
// offset.
func txnData(t *testing.T, pid, offset int64) batch.Batch {
	t.Helper()
	bld := batch.NewBuilder(batch.BuilderOptions{BaseOffset: offset, Producer: &batch.Producer{ID: pid}, Transactional: true})
	require.NoError(t, bld.Add(batch.Record{Value: []byte("v"), Timestamp: 1000 + offset}))
	b, err := bld.Build()
	require.NoError(t, err)
	return b
}

// abortMarker is producer pid's ABORT marker at offset.
func abortMarker(t *testing.T, pid, offset int64) batch.Batch {
	t.Helper()
	b, err := batch.AppendControlBatch(nil, batch.TxnMarker{Type: batch.ControlAbort, ProducerID: pid, BaseOffset: offset, Timestamp: 1000 + offset})
	require.NoError(t, err)
	return b
}

// overwrite writes data at off of the file name in verifierDir.
func overwrite(t *testing.T, fs vfs.FS, name string, off int64, data []byte) {
	t.Helper()
	f, err := fs.OpenReadWrite(filepath.Join(verifierDir, name))
	require.NoError(t, err)
	_, err = f.WriteAt(data, off)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// TestVerifierSegments: the walk accepts segments whose batches follow one
// another across segments, whose indexes point at their batches and whose
// .txnindex lists every transaction the batches show aborted; it reports,
// naming the file, a segment starting below the previous one's end, an
// offset or time index entry of a sealed segment that does not match the
// batches (an active segment's preallocated index is checked only up to
// the first entry that does not fit), and an aborted transaction without
// its entry, also when the transaction began in an earlier segment.
func TestVerifierSegments(t *testing.T) {
	type seg struct {
		base    int64
		batches func(t *testing.T) []batch.Batch
		aborted []segment.AbortedTxn
	}
	data := func(spans ...span) func(t *testing.T) []batch.Batch {
		return func(t *testing.T) []batch.Batch {
			out := make([]batch.Batch, len(spans))
			for i, s := range spans {
				out[i] = s.batch(t)
			}
			return out
		}
	}
	three := data(span{0, 2}, span{2, 2}, span{4, 2})
	bump := func(b []byte) []byte { // a big-endian i32 + 1
		return binary.BigEndian.AppendUint32(nil, binary.BigEndian.Uint32(b)+1)
	}
	tests := []struct {
		name   string
		segs   []seg
		active bool // the last segment stays active
		// damage changes a file after the segments were written.
		damage func(t *testing.T, fs vfs.FS)
		// wantFile is the file the error names ("" for none); wantNext
		// the offset after the walk when it passes.
		wantFile string
		wantNext int64
	}{
		{name: "contiguous segments", segs: []seg{{0, three, nil}, {6, data(span{6, 3}), nil}}, active: true, wantNext: 9},
		{name: "gap between segments", segs: []seg{{0, three, nil}, {20, data(span{25, 1}), nil}}, wantNext: 26},
		{name: "empty last segment", segs: []seg{{0, three, nil}, {6, data(), nil}}, active: true, wantNext: 6},
		{name: "segment starting below the previous end", segs: []seg{{0, three, nil}, {4, data(span{6, 1}), nil}},
			wantFile: segment.FileName(4, segment.LogSuffix)},
		{name: "offset index entry not at a batch start", segs: []seg{{0, three, nil}},
			damage: func(t *testing.T, fs vfs.FS) {
				idx := readFileBytes(t, fs, segment.FileName(0, segment.IndexSuffix))
				overwrite(t, fs, segment.FileName(0, segment.IndexSuffix), offsetEntrySize+4, bump(idx[offsetEntrySize+4:]))
			},
			wantFile: segment.FileName(0, segment.IndexSuffix)},
		{name: "active segment: the index ends at the first entry that does not fit", segs: []seg{{0, three, nil}}, active: true,
			damage: func(t *testing.T, fs vfs.FS) {
				idx := readFileBytes(t, fs, segment.FileName(0, segment.IndexSuffix))
				overwrite(t, fs, segment.FileName(0, segment.IndexSuffix), offsetEntrySize+4, bump(idx[offsetEntrySize+4:]))
			},
			wantNext: 6},
		{name: "time index entry with another timestamp", segs: []seg{{0, three, nil}},
			damage: func(t *testing.T, fs vfs.FS) {
				ti := readFileBytes(t, fs, segment.FileName(0, segment.TimeIndexSuffix))
				ts := binary.BigEndian.Uint64(ti)
				overwrite(t, fs, segment.FileName(0, segment.TimeIndexSuffix), 0, binary.BigEndian.AppendUint64(nil, ts-1))
			},
			wantFile: segment.FileName(0, segment.TimeIndexSuffix)},
		{name: "aborted transaction with its entry",
			segs: []seg{{0, func(t *testing.T) []batch.Batch { return []batch.Batch{txnData(t, 7, 0), abortMarker(t, 7, 1)} },
				[]segment.AbortedTxn{{ProducerID: 7, FirstOffset: 0, LastOffset: 1, LastStableOffset: 2}}}},
			wantNext: 2},
		{name: "aborted transaction without its entry",
			segs:     []seg{{0, func(t *testing.T) []batch.Batch { return []batch.Batch{txnData(t, 7, 0), abortMarker(t, 7, 1)} }, nil}},
			wantFile: segment.FileName(0, segment.TxnIndexSuffix)},
		{name: "transaction aborted in the next segment without its entry",
			segs: []seg{
				{0, func(t *testing.T) []batch.Batch { return []batch.Batch{txnData(t, 7, 0)} }, nil},
				{1, func(t *testing.T) []batch.Batch { return []batch.Batch{abortMarker(t, 7, 1)} }, nil},
			},
			wantFile: segment.FileName(1, segment.TxnIndexSuffix)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := vfs.NewMem()
			require.NoError(t, mem.MkdirAll(verifierDir, 0o755))
			cfg := Config{FS: mem, SegmentIndexBytes: memTestIndexBytes, IndexIntervalBytes: -1}
			cfg.ensureDefaults()
			var list []*segment.Segment
			for i, s := range tt.segs {
				sg := createTestSegment(t, mem, verifierDir, cfg.segmentConfig(), s.base, true, s.batches(t)...)
				list = append(list, sg)
				for _, a := range s.aborted {
					require.NoError(t, sg.AppendAbortedTxn(a))
				}
				if !tt.active || i < len(tt.segs)-1 {
					require.NoError(t, sg.Seal())
				}
			}
			release(t, list)
			if tt.damage != nil {
				tt.damage(t, mem)
			}

			v := newVerifier(mem, verifierDir)
			var err error
			for _, s := range list {
				if err = v.checkSegment(s); err != nil {
					break
				}
			}
			if tt.wantFile == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.wantNext, v.next)
				return
			}
			require.ErrorIs(t, err, batch.ErrCorrupt)
			var ce *base.CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.wantFile, filepath.Base(ce.File))
		})
	}
}

// readFileBytes returns the file name of verifierDir.
func readFileBytes(t *testing.T, fs vfs.FS, name string) []byte {
	t.Helper()
	return []byte(memFiles(t, fs, verifierDir)[name])
}
