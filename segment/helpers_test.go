package segment

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/legacy"
	"github.com/partlog/partlog/internal/vfs"
)

// spec describes one test batch: the offsets its records have (ascending,
// gaps allowed; last is the batch's last offset) and their timestamps.
type spec struct {
	offsets    []int64
	timestamps []int64
	valueSize  int
	logAppend  int64 // > 0: LogAppendTime with this append time
	codec      batch.Compression
}

// build encodes s with the batch Builder.
func build(t tb, s spec) batch.Batch {
	t.Helper()
	opts := batch.BuilderOptions{BaseOffset: s.offsets[0], Compression: s.codec}
	if s.logAppend > 0 {
		opts.LogAppendTime, opts.AppendTime = true, s.logAppend
	}
	bld := batch.NewBuilder(opts)
	val := bytes.Repeat([]byte{'v'}, s.valueSize)
	for i, off := range s.offsets {
		require.NoError(t, bld.AddAt(batch.Record{Offset: off, Timestamp: s.timestamps[i], Key: []byte(fmt.Sprint(off)), Value: val}))
	}
	b, err := bld.Build()
	require.NoError(t, err)
	return b
}

// simpleBatch builds a batch of n records from base with timestamps ts,
// ts+1, ...
func simpleBatch(t tb, base int64, n int, ts int64, valueSize int) batch.Batch {
	sp := spec{valueSize: valueSize}
	for i := range n {
		sp.offsets = append(sp.offsets, base+int64(i))
		sp.timestamps = append(sp.timestamps, ts+int64(i))
	}
	return build(t, sp)
}

// model is a linear scan of a .log's bytes: the reference answers.
type model struct {
	batches []batch.Batch
	pos     []int64
	size    int64
}

func parseLog(t tb, data []byte) *model {
	t.Helper()
	m := &model{}
	pos := int64(0)
	for len(data) > 0 {
		b, rest, err := batch.Parse(data)
		require.NoError(t, err, "log does not parse at %d", pos)
		require.NoError(t, b.Validate(), "batch at %d invalid", pos)
		m.batches = append(m.batches, b)
		m.pos = append(m.pos, pos)
		pos += int64(len(b))
		data = rest
	}
	m.size = pos
	return m
}

// translate: index of the first batch with LastOffset >= off, or -1.
func (m *model) translate(off int64) int {
	for i, b := range m.batches {
		if b.LastOffset() >= off {
			return i
		}
	}
	return -1
}

// findByTime: first record with ts >= target and offset >= start.
func (m *model) findByTime(t tb, target, start int64) (int64, int64, bool) {
	var dec batch.Decoder
	for _, b := range m.batches {
		for rec, err := range b.All(&dec) {
			require.NoError(t, err)
			if rec.Timestamp >= target && rec.Offset >= start {
				return rec.Offset, rec.Timestamp, true
			}
		}
	}
	return 0, 0, false
}

// readAll reads a whole file of fs.
func readAll(t tb, fsys vfs.FS, path string) []byte {
	t.Helper()
	f, err := fsys.Open(path)
	require.NoError(t, err)
	defer f.Close()
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	return b
}

// segmentModel parses the published bytes of s.
func segmentModel(t tb, s *Segment) *model {
	t.Helper()
	b, err := s.Bytes(0, s.Size(), nil)
	require.NoError(t, err)
	return parseLog(t, append([]byte(nil), b...))
}

// checkSegment is the consistency check run after tests: the published
// bytes are whole valid batches with increasing offsets, every index
// entry points at a batch start (index.Check), the time index is sorted,
// and the metadata matches a scan.
func checkSegment(t tb, s *Segment) *model {
	t.Helper()
	m := segmentModel(t, s)
	starts := map[int64]int64{}
	next := s.BaseOffset()
	maxTs, maxOff := int64(-1), int64(-1)
	for i, b := range m.batches {
		starts[m.pos[i]] = b.LastOffset()
		require.GreaterOrEqual(t, b.BaseOffset(), next, "batch %d at offset %d below %d", i, b.BaseOffset(), next)
		next = b.NextOffset()
		if b.MaxTimestamp() > maxTs {
			maxTs, maxOff = b.MaxTimestamp(), b.LastOffset()
		}
	}
	got := s.NextOffset()
	require.Equal(t, next, got, "NextOffset %d, scan says %d", got, next)
	// The offset is the last offset of the first batch with the max
	// timestamp, or (from a Kafka 2.x time index) an offset inside it.
	ts, off := s.MaxTimestamp()
	require.Equal(t, maxTs, ts, "MaxTimestamp (%d, %d), scan says (%d, %d)", ts, off, maxTs, maxOff)
	if maxTs >= 0 {
		require.Equal(t, m.translate(maxOff), m.translate(off), "MaxTimestamp (%d, %d), scan says (%d, %d)", ts, off, maxTs, maxOff)
	}
	err := s.offIdx.Check(s.Size(), func(pos int64) (int64, bool) {
		last, ok := starts[pos]
		return last, ok
	})
	require.NoError(t, err, "offset index")
	require.NoError(t, s.timeIdx.Check(next), "time index")
	for i := range s.timeIdx.Entries() {
		e := s.timeIdx.Entry(i)
		j := m.translate(e.Offset)
		require.GreaterOrEqual(t, j, 0, "time entry %d (%d, %d) does not match a batch", i, e.Timestamp, e.Offset)
		require.LessOrEqual(t, m.batches[j].BaseOffset(), e.Offset, "time entry %d (%d, %d) does not match a batch", i, e.Timestamp, e.Offset)
		require.Equal(t, e.Timestamp, m.batches[j].MaxTimestamp(), "time entry %d (%d, %d) does not match a batch", i, e.Timestamp, e.Offset)
	}
	return m
}

// checkLookups compares every offset and timestamp lookup of s with the
// linear scan m, but for Translate of the misled offsets (the exception
// DESIGN law 5 names: a damaged index entry that points at bytes framing
// as a batch with the entry's last offset).
func checkLookups(t tb, s *Segment, m *model, misled ...int64) {
	t.Helper()
	lo, hi := s.BaseOffset()-1, s.NextOffset()+1
	var offs []int64
	if hi-lo < 5000 {
		for off := lo; off <= hi; off++ {
			offs = append(offs, off)
		}
	} else {
		offs = append(offs, lo, hi)
		for _, b := range m.batches {
			offs = append(offs, b.BaseOffset()-1, b.BaseOffset(), b.BaseOffset()+1, b.LastOffset()-1, b.LastOffset(), b.LastOffset()+1)
		}
	}
	for _, off := range offs {
		if off < 0 || slices.Contains(misled, off) {
			continue
		}
		pos, info, found, err := s.Translate(off, 0)
		require.NoError(t, err, "Translate(%d)", off)
		j := m.translate(off)
		require.Equal(t, j >= 0, found, "Translate(%d) = %d, %v; scan says batch %d", off, pos, found, j)
		if found {
			require.Equal(t, m.pos[j], pos, "Translate(%d) = %d, %v; scan says batch %d", off, pos, found, j)
			require.Equal(t, m.batches[j].LastOffset(), info.LastOffset, "Translate(%d) = %d, %v; scan says batch %d", off, pos, found, j)
		}
	}
	var ts []int64
	var dec batch.Decoder
	for _, b := range m.batches {
		for rec, err := range b.All(&dec) {
			require.NoError(t, err)
			ts = append(ts, rec.Timestamp-1, rec.Timestamp, rec.Timestamp+1)
		}
	}
	ts = append(ts, -1, 0, 1<<62)
	starts := []int64{0, s.BaseOffset(), s.NextOffset() - 1}
	for _, b := range m.batches {
		starts = append(starts, b.BaseOffset()+1)
	}
	if raceEnabled {
		ts, starts = thin(ts, 60), thin(starts, 5)
	} else {
		ts, starts = thin(ts, 200), thin(starts, 10)
	}
	for _, target := range ts {
		for _, start := range starts {
			off, rts, found, err := s.FindOffsetByTimestamp(target, start)
			require.NoError(t, err, "FindOffsetByTimestamp(%d, %d)", target, start)
			woff, wts, wfound := m.findByTime(t, target, start)
			require.Equal(t, wfound, found, "FindOffsetByTimestamp(%d, %d) = (%d, %d, %v); scan says (%d, %d, %v)", target, start, off, rts, found, woff, wts, wfound)
			if found {
				require.Equal(t, woff, off, "FindOffsetByTimestamp(%d, %d) = (%d, %d, %v); scan says (%d, %d, %v)", target, start, off, rts, found, woff, wts, wfound)
				require.Equal(t, wts, rts, "FindOffsetByTimestamp(%d, %d) = (%d, %d, %v); scan says (%d, %d, %v)", target, start, off, rts, found, woff, wts, wfound)
			}
		}
	}
}

// fsKinds are the filesystems tests run on.
type fsKind struct {
	name string
	fs   func(t testing.TB) (vfs.FS, string)
	cfg  Config
}

var fsKinds = []fsKind{
	{"os-mmap", func(t testing.TB) (vfs.FS, string) { return vfs.Default, t.TempDir() }, Config{}},
	{"os-readat", func(t testing.TB) (vfs.FS, string) { return vfs.Default, t.TempDir() }, Config{DisableMmap: true}},
	{"mem", func(t testing.TB) (vfs.FS, string) { return vfs.NewMem(), "/seg" }, Config{}},
}

func mustMkdir(t tb, fsys vfs.FS, dir string) {
	t.Helper()
	require.NoError(t, fsys.MkdirAll(dir, 0o755))
}

func mustAppend(t tb, s *Segment, b batch.Batch) int64 {
	t.Helper()
	pos, err := s.Append(b)
	require.NoError(t, err, "Append([%d, %d])", b.BaseOffset(), b.LastOffset())
	return pos
}

func mustClose(t tb, s *Segment) {
	t.Helper()
	err := s.Close()
	if err != nil {
		require.ErrorIs(t, err, ErrClosed, err)
	}
}

func segPath(dir string, base int64, suffix string) string {
	return filepath.Join(dir, FileName(base, suffix))
}

func vfs_NewMemForTest(t tb) vfs.FS {
	m := vfs.NewMem()
	require.NoError(t, m.MkdirAll("/x", 0o755))
	return m
}

// tb is what the helpers need of *testing.T, *testing.B and *rapid.T.
type tb interface {
	require.TestingT
	Helper()
	Logf(format string, args ...any)
}

// thin keeps at most n evenly spread elements of xs (and its last one).
func thin(xs []int64, n int) []int64 {
	if len(xs) <= n {
		return xs
	}
	var out []int64
	step := (len(xs) + n - 1) / n
	for i := 0; i < len(xs); i += step {
		out = append(out, xs[i])
	}
	return append(out, xs[len(xs)-1])
}

// forBudgetFS runs fn on the operating system's filesystem (real
// descriptors and mappings) and on MemFS (heap regions: under the
// invariants tag a use of a closed segment's bytes reads 0xde).
func forBudgetFS(t *testing.T, fn func(t *testing.T, fsys vfs.FS, dir string)) {
	t.Run("os", func(t *testing.T) { fn(t, vfs.Default, t.TempDir()) })
	t.Run("mem", func(t *testing.T) {
		m := vfs.NewMem()
		require.NoError(t, m.MkdirAll("/x", 0o755))
		fn(t, m, "/x")
	})
}

func setLength(b []byte, at int64, n uint32) []byte {
	d := append([]byte(nil), b...)
	d[at+8], d[at+9], d[at+10], d[at+11] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return d
}

// wrapBaseOffsetAt returns b with the baseOffset of the batch at at set
// to math.MaxInt64: the CRC still matches (the field lies before its
// range), and a lastOffsetDelta of 1 or more makes the last offset wrap.
func wrapBaseOffsetAt(b []byte, at int64) []byte {
	d := append([]byte(nil), b...)
	binary.BigEndian.PutUint64(d[at:], math.MaxInt64)
	return d
}

func overwrite(b []byte, at int64, p []byte) []byte {
	d := append([]byte(nil), b...)
	copy(d[at:], p)
	return d
}

func legacyMixed(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "legacy", "mixed.log"))
	require.NoError(t, err)
	return data
}

// legacyMessage encodes one uncompressed magic 1 legacy message at offset
// with a valid CRC-32 (test helper).
func legacyMessage(offset int64, value string) []byte {
	m := []byte{0, 0, 0, 0, byte(legacy.MagicV1), 0}
	m = binary.BigEndian.AppendUint64(m, 1_600_000_000_000)
	m = binary.BigEndian.AppendUint32(m, 0xffffffff) // null key
	m = binary.BigEndian.AppendUint32(m, uint32(len(value)))
	m = append(m, value...)
	binary.BigEndian.PutUint32(m, crc32.ChecksumIEEE(m[4:]))
	out := binary.BigEndian.AppendUint64(nil, uint64(offset))
	out = binary.BigEndian.AppendUint32(out, uint32(len(m)))
	return append(out, m...)
}

// batchCarryingLegacy builds a v2 batch at base whose single record's value
// is a legacy message with a valid CRC at offset inner (what a mirror
// storing raw message sets appends).
func batchCarryingLegacy(t *testing.T, base, inner int64) batch.Batch {
	t.Helper()
	bld := batch.NewBuilder(batch.BuilderOptions{BaseOffset: base})
	require.NoError(t, bld.Add(batch.Record{Timestamp: 1_800_000_000_000, Key: []byte("k"),
		Value: slices.Concat(legacyMessage(inner, "payload of a raw message set"), []byte("trailing bytes of the value"))}))
	b, err := bld.Build()
	require.NoError(t, err)
	return b
}

// indexEntries returns both indexes' entries as [offset-or-ts, offset-or-pos] pairs.
func indexEntries(s *Segment) (off, tim [][2]int64) {
	for i := range s.offIdx.Entries() {
		e := s.offIdx.Entry(i)
		off = append(off, [2]int64{e.Offset, e.Position})
	}
	for i := range s.timeIdx.Entries() {
		e := s.timeIdx.Entry(i)
		tim = append(tim, [2]int64{e.Timestamp, e.Offset})
	}
	return off, tim
}

func equalEntries(a, b [][2]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
