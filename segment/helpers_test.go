package segment

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/batch"
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
		if err := bld.AddAt(batch.Record{Offset: off, Timestamp: s.timestamps[i], Key: []byte(fmt.Sprint(off)), Value: val}); err != nil {
			t.Fatal(err)
		}
	}
	b, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
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
		if err != nil {
			t.Fatalf("log does not parse at %d: %v", pos, err)
		}
		if err := b.Validate(); err != nil {
			t.Fatalf("batch at %d invalid: %v", pos, err)
		}
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
			if err != nil {
				t.Fatal(err)
			}
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
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// segmentModel parses the published bytes of s.
func segmentModel(t tb, s *Segment) *model {
	t.Helper()
	b, err := s.Bytes(0, s.Size(), nil)
	if err != nil {
		t.Fatal(err)
	}
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
		if b.BaseOffset() < next {
			t.Fatalf("batch %d at offset %d below %d", i, b.BaseOffset(), next)
		}
		next = b.NextOffset()
		if b.MaxTimestamp() > maxTs {
			maxTs, maxOff = b.MaxTimestamp(), b.LastOffset()
		}
	}
	if got := s.NextOffset(); got != next {
		t.Fatalf("NextOffset %d, scan says %d", got, next)
	}
	// The offset is the last offset of the first batch with the max
	// timestamp, or (from a Kafka 2.x time index) an offset inside it.
	if ts, off := s.MaxTimestamp(); ts != maxTs || (maxTs >= 0 && m.translate(off) != m.translate(maxOff)) {
		t.Fatalf("MaxTimestamp (%d, %d), scan says (%d, %d)", ts, off, maxTs, maxOff)
	}
	err := s.offIdx.Check(s.Size(), func(pos int64) (int64, bool) {
		last, ok := starts[pos]
		return last, ok
	})
	if err != nil {
		t.Fatalf("offset index: %v", err)
	}
	if err := s.timeIdx.Check(next); err != nil {
		t.Fatalf("time index: %v", err)
	}
	for i := range s.timeIdx.Entries() {
		e := s.timeIdx.Entry(i)
		j := m.translate(e.Offset)
		if j < 0 || m.batches[j].BaseOffset() > e.Offset || m.batches[j].MaxTimestamp() != e.Timestamp {
			t.Fatalf("time entry %d (%d, %d) does not match a batch", i, e.Timestamp, e.Offset)
		}
	}
	return m
}

// checkLookups compares every offset and timestamp lookup of s with the
// linear scan m.
func checkLookups(t tb, s *Segment, m *model) {
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
		if off < 0 {
			continue
		}
		pos, info, found, err := s.Translate(off, 0)
		if err != nil {
			t.Fatalf("Translate(%d): %v", off, err)
		}
		j := m.translate(off)
		if found != (j >= 0) || (found && (pos != m.pos[j] || info.LastOffset != m.batches[j].LastOffset())) {
			t.Fatalf("Translate(%d) = %d, %v; scan says batch %d", off, pos, found, j)
		}
	}
	var ts []int64
	var dec batch.Decoder
	for _, b := range m.batches {
		for rec, err := range b.All(&dec) {
			if err != nil {
				t.Fatal(err)
			}
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
			if err != nil {
				t.Fatalf("FindOffsetByTimestamp(%d, %d): %v", target, start, err)
			}
			woff, wts, wfound := m.findByTime(t, target, start)
			if found != wfound || (found && (off != woff || rts != wts)) {
				t.Fatalf("FindOffsetByTimestamp(%d, %d) = (%d, %d, %v); scan says (%d, %d, %v)",
					target, start, off, rts, found, woff, wts, wfound)
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
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustAppend(t tb, s *Segment, b batch.Batch) int64 {
	t.Helper()
	pos, err := s.Append(b)
	if err != nil {
		t.Fatalf("Append([%d, %d]): %v", b.BaseOffset(), b.LastOffset(), err)
	}
	return pos
}

func mustClose(t tb, s *Segment) {
	t.Helper()
	if err := s.Close(); err != nil && !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
}

func segPath(dir string, base int64, suffix string) string {
	return filepath.Join(dir, FileName(base, suffix))
}

func vfs_NewMemForTest(t tb) vfs.FS {
	m := vfs.NewMem()
	if err := m.MkdirAll("/x", 0o755); err != nil {
		t.Fatal(err)
	}
	return m
}

// tb is what the helpers need of *testing.T, *testing.B and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
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
