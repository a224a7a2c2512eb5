package segment

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/vfs"
)

// openState is what a segment answers from memory.
type openState struct {
	Next, Size, MaxTs, MaxTsOffset, FirstMaxTs int64
	OffEntries, TimeEntries                    int
	Aborted                                    []AbortedTxn
	Sealed, Mapped                             bool
}

func stateOf(s *Segment) openState {
	st := openState{Next: s.NextOffset(), Size: s.Size(), FirstMaxTs: s.FirstBatchMaxTimestamp(),
		Aborted: s.AbortedTxns(), Sealed: s.Sealed(), Mapped: s.Mapped()}
	st.MaxTs, st.MaxTsOffset = s.MaxTimestamp()
	st.OffEntries, st.TimeEntries = s.IndexEntries()
	return st
}

// appendBytes appends p to the file at path.
func appendBytes(t *testing.T, fsys vfs.FS, path string, p []byte) {
	t.Helper()
	f, err := fsys.OpenReadWrite(path)
	require.NoError(t, err)
	st, err := f.Stat()
	require.NoError(t, err)
	_, err = f.WriteAt(p, st.Size())
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// TestOpenCleanAtRest: under a Budget, OpenClean of a segment whose
// indexes are small and whose files pass the full open's checks leaves
// the files closed (no descriptor, no mapping) and answers what the full
// open answers (next offset, size, largest and first timestamps, index
// entry counts, aborted transactions); UnsealOnWrite leaves it closed;
// the first read reopens it once, and every lookup and an append work.
// Whatever the full open would rebuild or report (a damaged, missing or
// mismatched index, an index over 64 KiB, bytes past the last batch) is
// opened in full, with the same answers.
func TestOpenCleanAtRest(t *testing.T) {
	const interval = 1024
	batches := func(n, maxAt int) func(t *testing.T, s *Segment) {
		return func(t *testing.T, s *Segment) {
			for i := range n {
				ts := 1_000 + int64(i)
				if i == maxAt {
					ts = 9_000
				}
				mustAppend(t, s, simpleBatch(t, int64(i), 1, ts, 200))
			}
		}
	}
	tests := []struct {
		name     string
		interval int // IndexIntervalBytes; interval when 0
		write    func(t *testing.T, s *Segment)
		damage   func(t *testing.T, fsys vfs.FS, dir string)
		atRest   bool
		// fewLookups checks the batches and indexes, not every lookup
		// (thousands of batches).
		fewLookups bool
	}{
		{name: "empty", write: batches(0, -1), atRest: true},
		{name: "one batch", write: batches(1, -1), atRest: true},
		{name: "index entries, largest timestamp before the tail", write: batches(60, 7), atRest: true},
		{name: "index entries, largest timestamp in the tail", write: batches(60, 59), atRest: true},
		{name: "aborted transaction", write: func(t *testing.T, s *Segment) {
			batches(5, -1)(t, s)
			require.NoError(t, s.AppendAbortedTxn(AbortedTxn{ProducerID: 7, FirstOffset: 1, LastOffset: 3, LastStableOffset: 4}))
		}, atRest: true},
		{name: "offset index over 64 KiB", interval: 1, write: func(t *testing.T, s *Segment) {
			for i := range restOpenMaxIndexBytes/8 + 2 {
				mustAppend(t, s, simpleBatch(t, int64(i), 1, 1_000, 1))
			}
		}, fewLookups: true},
		{name: "offset index with a zero tail", write: batches(60, 7), damage: func(t *testing.T, fsys vfs.FS, dir string) {
			appendBytes(t, fsys, segPath(dir, 0, IndexSuffix), make([]byte, 16))
		}},
		{name: "offset index entry not its batch's", write: batches(60, 7), damage: func(t *testing.T, fsys vfs.FS, dir string) {
			// The last entry's offset one below its batch's last.
			path := segPath(dir, 0, IndexSuffix)
			b := readAll(t, fsys, path)
			b[len(b)-5]--
			require.NoError(t, fsys.Remove(path))
			appendBytes(t, fsys, path, b)
		}},
		{name: "offset index entry past the log's end", write: batches(60, 7), damage: func(t *testing.T, fsys vfs.FS, dir string) {
			path := segPath(dir, 0, IndexSuffix)
			b := readAll(t, fsys, path)
			b[len(b)-3] = 0x7f // position 0x7fxxxx
			require.NoError(t, fsys.Remove(path))
			appendBytes(t, fsys, path, b)
		}},
		{name: "offset index without its entries", write: batches(60, 7), damage: func(t *testing.T, fsys vfs.FS, dir string) {
			truncateFile(t, fsys, segPath(dir, 0, IndexSuffix), 0)
		}},
		{name: "missing time index", write: batches(60, 7), damage: func(t *testing.T, fsys vfs.FS, dir string) {
			require.NoError(t, fsys.Remove(segPath(dir, 0, TimeIndexSuffix)))
		}},
		{name: "time index entry not its batch's", write: batches(60, 7), damage: func(t *testing.T, fsys vfs.FS, dir string) {
			// The final entry's offset moved to the batch after it.
			path := segPath(dir, 0, TimeIndexSuffix)
			b := readAll(t, fsys, path)
			b[len(b)-1]++
			require.NoError(t, fsys.Remove(path))
			appendBytes(t, fsys, path, b)
		}},
		{name: "bytes past the last batch", write: batches(60, 7), damage: func(t *testing.T, fsys vfs.FS, dir string) {
			appendBytes(t, fsys, segPath(dir, 0, LogSuffix), []byte{1, 2, 3})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forBudgetFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
				cfg := Config{IndexIntervalBytes: interval, MaxSegmentBytes: 8 << 20, MaxIndexBytes: 1 << 20}
				if tt.interval != 0 {
					cfg.IndexIntervalBytes = tt.interval
				}
				s, err := Create(fsys, dir, 0, cfg)
				require.NoError(t, err)
				tt.write(t, s)
				mustClose(t, s)
				if tt.damage != nil {
					tt.damage(t, fsys, dir)
				}

				b := NewBudget(16)
				bcfg := cfg
				bcfg.Budget = b
				s, err = OpenClean(fsys, dir, 0, bcfg)
				require.NoError(t, err)
				defer func() { mustClose(t, s) }()
				got := stateOf(s)
				require.Equal(t, !tt.atRest, s.Resident(), "files open after OpenClean")
				if fds, maps, ok := openResources(t, dir); ok && fsys == vfs.Default && tt.atRest {
					assert.Zero(t, fds, "descriptors")
					assert.Zero(t, maps, "mappings")
				}

				// The full open's answers, from the same files.
				ref, err := OpenClean(fsys, dir, 0, cfg)
				require.NoError(t, err)
				want := stateOf(ref)
				require.NoError(t, ref.Close())
				require.Equal(t, want, got)

				require.NoError(t, s.UnsealOnWrite())
				assert.Equal(t, !tt.atRest, s.Resident(), "files open after UnsealOnWrite")
				if tt.atRest {
					assert.True(t, s.Sealed(), "unsealed before the first append")
				}
				assert.Zero(t, b.Stats().Reopens)
				lookups := func() {
					m := checkSegment(t, s)
					if !tt.fewLookups {
						checkLookups(t, s, m)
					}
				}
				lookups()
				if tt.atRest {
					assert.Equal(t, int64(1), b.Stats().Reopens, "reopens by the reads")
				}
				next := s.NextOffset()
				mustAppend(t, s, simpleBatch(t, next, 2, 20_000, 100))
				lookups()
				mustClose(t, s)

				s, err = Open(fsys, dir, 0, cfg)
				require.NoError(t, err)
				assert.Equal(t, next+2, s.NextOffset())
				ts, _ := s.MaxTimestamp()
				assert.Equal(t, int64(20_001), ts)
				lookups()
			})
		})
	}
}

// A segment opened at rest is closed, renamed and removed by its names:
// MarkDeleted renames its files without opening them, and the last Unref
// removes them.
func TestOpenCleanAtRestDeleted(t *testing.T) {
	forBudgetFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		cfg := Config{IndexIntervalBytes: 1024, MaxSegmentBytes: 1 << 20, MaxIndexBytes: 1 << 20}
		s, err := Create(fsys, dir, 0, cfg)
		require.NoError(t, err)
		for i := range 20 {
			mustAppend(t, s, simpleBatch(t, int64(i), 1, 1_000, 200))
		}
		require.NoError(t, s.AppendAbortedTxn(AbortedTxn{ProducerID: 7, FirstOffset: 1, LastOffset: 3, LastStableOffset: 4}))
		mustClose(t, s)

		cfg.Budget = NewBudget(4)
		s, err = OpenClean(fsys, dir, 0, cfg)
		require.NoError(t, err)
		require.False(t, s.Resident())
		require.NoError(t, s.MarkDeleted())
		for _, kind := range []string{LogSuffix, IndexSuffix, TimeIndexSuffix, TxnIndexSuffix} {
			_, err := fsys.Stat(segPath(dir, 0, kind) + DeletedSuffix)
			require.NoError(t, err, "%s renamed", kind)
		}
		require.NoError(t, s.Close())
		names, err := fsys.List(dir)
		require.NoError(t, err)
		assert.Empty(t, names, fmt.Sprintf("files left: %v", names))
	})
}

// TestOpenCleanAtRestLastEntryIntoAValue: under a Budget, OpenClean proves
// the offset index's last entry a batch boundary, as the full open does
// (DESIGN law 5). The last entry's position is moved into the last batch's
// value, where bytes frame as a batch of the offset before it that runs to
// the end of the .log; the last batch's timestamp is below the largest, so
// the time index's last entry names that offset too. The scan from the
// entry alone frames to the end and takes the fake batch for the last one:
// the segment lost its last offset (NextOffset one short, the offset not
// found) where the full open rebuilds the index.
func TestOpenCleanAtRestLastEntryIntoAValue(t *testing.T) {
	const n = 20
	forBudgetFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		cfg := Config{IndexIntervalBytes: -1, MaxSegmentBytes: 1 << 20, MaxIndexBytes: 1 << 20}
		s, err := Create(fsys, dir, 0, cfg)
		require.NoError(t, err)
		// The fake batch: offset n-2's header, its length reaching the
		// end of the value and the record's header count after it.
		value := append(bytes.Clone(simpleBatch(t, n-2, 1, 1000+n-2, 40)[:batch.HeaderSize]), bytes.Repeat([]byte{'v'}, 200)...)
		binary.BigEndian.PutUint32(value[8:], uint32(len(value)+1-12))
		for off := range int64(n) {
			rec := batch.Record{Timestamp: 1000 + off, Value: bytes.Repeat([]byte{'v'}, 260)}
			if off == n-1 {
				rec = batch.Record{Timestamp: 500, Value: value}
			}
			bld := batch.NewBuilder(batch.BuilderOptions{BaseOffset: off})
			require.NoError(t, bld.Add(rec))
			b, err := bld.Build()
			require.NoError(t, err)
			mustAppend(t, s, b)
		}
		m := checkSegment(t, s)
		mustClose(t, s)

		logBytes := readAll(t, fsys, segPath(dir, 0, LogSuffix))
		inside := bytes.Index(logBytes[m.pos[n-1]:], value)
		require.Positive(t, inside)
		require.Equal(t, len(logBytes), int(m.pos[n-1])+inside+len(value)+1, "the fake batch ends with the .log")
		idxPath := segPath(dir, 0, IndexSuffix)
		idx := readAll(t, fsys, idxPath)
		at := len(idx) - index.OffsetEntrySize
		require.Equal(t, uint32(n-1), binary.BigEndian.Uint32(idx[at:]))
		require.Equal(t, uint32(m.pos[n-1]), binary.BigEndian.Uint32(idx[at+4:]))
		binary.BigEndian.PutUint32(idx[at+4:], uint32(m.pos[n-1]+int64(inside)))
		writeFile(t, fsys, idxPath, idx)

		bcfg := cfg
		bcfg.Budget = NewBudget(16)
		s, err = OpenClean(fsys, dir, 0, bcfg)
		require.NoError(t, err)
		got := stateOf(s)
		pos, _, found, err := s.Translate(n-1, 0)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, m.pos[n-1], pos)
		mustClose(t, s)

		// The full open's answers (it rebuilds the index).
		ref, err := OpenClean(fsys, dir, 0, cfg)
		require.NoError(t, err)
		want := stateOf(ref)
		require.NoError(t, ref.Close())
		require.Equal(t, int64(n), want.Next)
		want.Mapped = got.Mapped // the full open maps the .log at once
		require.Equal(t, want, got)
	})
}

// TestOpenIndexOverMaxFileBytes: an index file damaged to a length past
// what an index may be (over 2 GiB, a sparse file) is rebuilt by Open, as
// any other index that fails its checks (DESIGN law 5), instead of failing
// the segment's open.
func TestOpenIndexOverMaxFileBytes(t *testing.T) {
	for _, kind := range []string{IndexSuffix, TimeIndexSuffix} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{IndexIntervalBytes: 100, MaxSegmentBytes: 1 << 20, MaxIndexBytes: 1 << 20}
			s, err := Create(vfs.Default, dir, 0, cfg)
			require.NoError(t, err)
			for i := range int64(20) {
				mustAppend(t, s, simpleBatch(t, i, 1, 1000+i, 200))
			}
			want := stateOf(s)
			mustClose(t, s)
			path := segPath(dir, 0, kind)
			bcfg := cfg
			bcfg.Budget = NewBudget(4)
			for _, open := range []struct {
				name string
				open func() (*Segment, error)
			}{
				{"Open", func() (*Segment, error) { return Open(vfs.Default, dir, 0, cfg) }},
				{"OpenClean", func() (*Segment, error) { return OpenClean(vfs.Default, dir, 0, cfg) }},
				{"OpenClean under a Budget", func() (*Segment, error) { return OpenClean(vfs.Default, dir, 0, bcfg) }},
			} {
				require.NoError(t, os.Truncate(path, 3<<30))
				s, err = open.open()
				require.NoError(t, err, open.name)
				got := stateOf(s)
				want.Sealed, want.Mapped = got.Sealed, got.Mapped
				require.Equal(t, want, got, open.name)
				checkLookups(t, s, checkSegment(t, s))
				mustClose(t, s)
				st, err := os.Stat(path)
				require.NoError(t, err)
				require.Less(t, st.Size(), int64(1<<20))
			}
		})
	}
}
