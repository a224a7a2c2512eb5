package producer

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/vfs"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/decode's outputs from the decoder's")

// describe is what the golden file says of data: the entries and the
// state Restore makes of them, or the error.
func describe(data []byte) string {
	var w strings.Builder
	es, err := DecodeSnapshot(data)
	if err != nil {
		fmt.Fprintf(&w, "error: %v\n", err)
		return w.String()
	}
	fmt.Fprintf(&w, "%d entries\n", len(es))
	for _, e := range es {
		fmt.Fprintf(&w, "  producer=%d epoch=%d lastSeq=%d lastOffset=%d offsetDelta=%d ts=%d coord=%d txnFirst=%d\n",
			e.ProducerID, e.ProducerEpoch, e.LastSequence, e.LastOffset, e.OffsetDelta, e.Timestamp, e.CoordinatorEpoch, e.CurrentTxnFirstOffset)
	}
	s := NewState(Config{})
	s.Restore(es)
	w.WriteString("restored\n")
	for _, p := range s.Producers() {
		fmt.Fprintf(&w, "  producer=%d epoch=%d coord=%d txnFirst=%d last=%d batches=[", p.ID, p.Epoch, p.CoordinatorEpoch, p.TxnFirstOffset, p.LastTimestamp)
		for i, b := range p.Batches {
			if i > 0 {
				w.WriteString(", ")
			}
			fmt.Fprintf(&w, "seq %d..%d offsets %d..%d", b.FirstSequence, b.LastSequence, b.FirstOffset, b.LastOffset)
		}
		w.WriteString("]\n")
	}
	w.WriteString("  open=[")
	for i, t := range s.OpenTxns() {
		if i > 0 {
			w.WriteString(", ")
		}
		fmt.Fprintf(&w, "producer %d from %d", t.ProducerID, t.FirstOffset)
	}
	w.WriteString("]\n")
	return w.String()
}

// TestDecodeGolden runs the cases of testdata/decode (Kafka's snapshot
// files from testdata and hand-made bytes): the decoder's answer must be
// the file's, and every input it accepts must encode back to the same
// bytes. With -rewrite the outputs are regenerated (review the diff).
func TestDecodeGolden(t *testing.T) {
	const golden = "testdata/decode"
	f, err := os.Open(golden)
	require.NoError(t, err)
	defer f.Close()
	var out strings.Builder
	sc := bufio.NewScanner(f)
	var (
		name     string
		input    []byte
		inInput  bool
		inOutput bool
		want     strings.Builder
	)
	check := func() {
		got := describe(input)
		out.WriteString(got)
		if !*rewrite {
			assert.Equal(t, want.String(), got, "case %q", name)
		}
		if es, err := DecodeSnapshot(input); err == nil {
			assert.Equal(t, input, AppendSnapshot(nil, es), "case %q: decode then encode", name)
		} else {
			assert.ErrorIs(t, err, ErrCorruptSnapshot, "case %q", name)
			assert.True(t, base.IsCorruption(err), "case %q", name)
		}
		want.Reset()
		inOutput = false
	}
	for sc.Scan() {
		line := sc.Text()
		if inOutput {
			if line != "" {
				want.WriteString(line + "\n")
				continue
			}
			check()
			out.WriteString("\n")
			continue
		}
		out.WriteString(line + "\n")
		switch {
		case strings.HasPrefix(line, "file "):
			name = strings.TrimPrefix(line, "file ")
			input, err = os.ReadFile(filepath.Join("testdata", name))
			require.NoError(t, err)
			inInput = false
		case strings.HasPrefix(line, "hex "):
			name, input, inInput = strings.TrimPrefix(line, "hex "), []byte{}, true
		case line == "----":
			inInput, inOutput = false, true
		case inInput:
			code, _, _ := strings.Cut(line, "#")
			b, err := hex.DecodeString(strings.Join(strings.Fields(code), ""))
			require.NoError(t, err, "case %q: %q", name, line)
			input = append(input, b...)
		}
	}
	require.NoError(t, sc.Err())
	if inOutput {
		check()
	}
	if *rewrite {
		require.NoError(t, os.WriteFile(golden, []byte(out.String()), 0o644))
	}
}

// TestKafkaFixturesRoundTrip: every snapshot file of testdata decodes and
// encodes back to Kafka's bytes.
func TestKafkaFixturesRoundTrip(t *testing.T) {
	paths, err := filepath.Glob("testdata/*/*/*.snapshot")
	require.NoError(t, err)
	require.Len(t, paths, 3)
	for _, path := range paths {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		es, err := DecodeSnapshot(b)
		require.NoError(t, err, path)
		require.Equal(t, b, AppendSnapshot(nil, es), path)
	}
}

// TestSnapshotRoundTrip: a state's snapshot restores to the state a reopened
// Kafka broker has: every producer with its epoch, coordinator epoch,
// open transaction and last timestamp, and its newest batch only (the
// format keeps one), its first sequence and offset recomputed from the
// delta, across the MaxInt32 wrap.
func TestSnapshotRoundTrip(t *testing.T) {
	const maxSeq = math.MaxInt32
	tests := []struct {
		name    string
		batches []pb
		markers [][2]int64 // producer id, epoch: a COMMIT after the batches
	}{
		{"empty", nil, nil},
		{"one producer, one batch", []pb{{seq: 0, n: 3}}, nil},
		{"one batch kept of five", []pb{{seq: 0}, {seq: 1, n: 4}, {seq: 5}, {seq: 6, n: 2}, {seq: 8, n: 7}}, nil},
		{"a batch across the wrap", []pb{{seq: maxSeq - 1, n: 4}}, nil},
		{"a batch ending at MaxInt32", []pb{{seq: maxSeq - 2, n: 3}}, nil},
		{"an open transaction", []pb{{pid: 3, seq: 0, txn: true}, {pid: 3, seq: 1, txn: true}}, nil},
		{"several producers, one in a transaction", []pb{{pid: 9, seq: 5}, {pid: 2, epoch: 4, seq: 0, txn: true}, {pid: 5, epoch: 1, seq: 7, n: 2}}, nil},
		{"a committed transaction", []pb{{pid: 3, epoch: 2, seq: 0, txn: true}}, [][2]int64{{3, 2}}},
		{"a marker alone", nil, [][2]int64{{4, 6}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLog(Config{Expiration: 24 * time.Hour})
			for _, b := range tc.batches {
				l.append(b.bytes(t))
			}
			for _, m := range tc.markers {
				l.append(l.marker(t, batch.ControlCommit, m[0], int16(m[1]), 1))
			}
			data := l.s.AppendSnapshot(nil)
			entries, err := DecodeSnapshot(data)
			require.NoError(t, err)
			require.Equal(t, l.s.Entries(), entries)
			require.Len(t, data, HeaderSize+EntrySize*len(entries))

			r := NewState(Config{Expiration: 24 * time.Hour, Now: func() time.Time { return testNow }})
			r.Restore(entries)
			want := l.s.Producers()
			for i := range want {
				if n := len(want[i].Batches); n > 1 {
					want[i].Batches = want[i].Batches[n-1:]
				}
			}
			assert.Equal(t, want, r.Producers())
			assert.Equal(t, l.s.OpenTxns(), r.OpenTxns(), "open transactions (StartTimestamp: the producer's last timestamp)")
			assert.Equal(t, data, r.AppendSnapshot(nil), "a restored state's snapshot is the same file")
		})
	}
}

// TestRestore: Restore replaces the state, skips producers expired by the
// clock (not those in a transaction), and of two entries for one producer
// keeps the later.
func TestRestore(t *testing.T) {
	l := newLog(Config{Expiration: time.Hour})
	l.append(pb{pid: 1, seq: 0}.bytes(t))
	old := testNow.Add(-2 * time.Hour).UnixMilli()
	l.s.Restore([]Entry{
		{ProducerID: 2, LastSequence: 4, LastOffset: 40, OffsetDelta: 4, Timestamp: old, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
		{ProducerID: 3, LastSequence: 0, LastOffset: 41, Timestamp: old, CoordinatorEpoch: -1, CurrentTxnFirstOffset: 41},
		{ProducerID: 4, LastSequence: 0, LastOffset: 42, Timestamp: testNow.UnixMilli(), CoordinatorEpoch: -1, CurrentTxnFirstOffset: 42},
		{ProducerID: 4, LastSequence: 3, LastOffset: 45, OffsetDelta: 2, Timestamp: testNow.UnixMilli(), CoordinatorEpoch: 1, CurrentTxnFirstOffset: -1},
	})
	var ids []int64
	for _, p := range l.s.Producers() {
		ids = append(ids, p.ID)
	}
	assert.Equal(t, []int64{3, 4}, ids, "1 replaced, 2 expired, 3 kept by its transaction")
	assert.Equal(t, []OpenTxn{{ProducerID: 3, FirstOffset: 41, StartTimestamp: old}}, l.s.OpenTxns(), "the later entry of 4 closed its transaction")
	p4, _ := l.s.Producer(4)
	assert.Equal(t, []Batch{{FirstSequence: 1, LastSequence: 3, FirstOffset: 43, LastOffset: 45, MaxTimestamp: testNow.UnixMilli()}}, p4.Batches)
	assert.Equal(t, int32(1), p4.CoordinatorEpoch)
}

// TestSnapshotFileNames: Kafka's 20-digit names, and nothing else parses.
func TestSnapshotFileNames(t *testing.T) {
	assert.Equal(t, "00000000000000000038.snapshot", SnapshotFileName(38))
	assert.Equal(t, "09223372036854775807.snapshot", SnapshotFileName(math.MaxInt64))
	for name, want := range map[string]int64{"00000000000000000038.snapshot": 38, "09223372036854775807.snapshot": math.MaxInt64, "00000000000000000000.snapshot": 0} {
		off, ok := ParseSnapshotFileName(name)
		assert.True(t, ok, name)
		assert.Equal(t, want, off, name)
	}
	for _, name := range []string{"38.snapshot", "00000000000000000038.log", "00000000000000000038.snapshot.deleted",
		"-0000000000000000038.snapshot", "0000000000000000003x.snapshot", "99999999999999999999.snapshot", "000000000000000000038.snapshot"} {
		_, ok := ParseSnapshotFileName(name)
		assert.False(t, ok, name)
	}
}

// TestSnapshotOffsets: the snapshot names of a listing, as offsets in
// ascending order whatever the listing's order; other names are ignored.
func TestSnapshotOffsets(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  []int64
	}{
		{nil, nil},
		{[]string{"00000000000000000040.log", "leader-epoch-checkpoint"}, nil},
		{[]string{"00000000000000000040.snapshot", "00000000000000000003.snapshot", "00000000000000000040.log",
			"00000000000000000017.snapshot.deleted", "00000000000000000017.snapshot"}, []int64{3, 17, 40}},
	} {
		assert.Equal(t, tc.want, SnapshotOffsets(tc.names), "%q", tc.names)
	}
}

// TestSnapshotFiles: the file functions on an in-memory filesystem.
func TestSnapshotFiles(t *testing.T) {
	fsys := vfs.NewMem()
	const dir = "/p/t-0"
	require.NoError(t, fsys.MkdirAll(dir, 0o755))
	offs, err := ListSnapshots(fsys, dir)
	require.NoError(t, err)
	assert.Empty(t, offs)
	for _, off := range []int64{40, 3, 17} {
		require.NoError(t, WriteSnapshotFile(fsys, dir, off, AppendSnapshot(nil, []Entry{{ProducerID: off}}), off == 17))
	}
	f, err := fsys.Create(filepath.Join(dir, "00000000000000000040.log"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	offs, err = ListSnapshots(fsys, dir)
	require.NoError(t, err)
	assert.Equal(t, []int64{3, 17, 40}, offs)

	data, err := ReadSnapshotFile(fsys, dir, 17)
	require.NoError(t, err)
	es, err := DecodeSnapshot(data)
	require.NoError(t, err)
	assert.Equal(t, []Entry{{ProducerID: 17}}, es)
	require.NoError(t, WriteSnapshotFile(fsys, dir, 17, AppendSnapshot(nil, nil), false), "a second write replaces the file")
	data, err = ReadSnapshotFile(fsys, dir, 17)
	require.NoError(t, err)
	assert.Len(t, data, HeaderSize)

	require.NoError(t, RemoveSnapshotFile(fsys, dir, 3))
	require.NoError(t, RemoveSnapshotFile(fsys, dir, 3), "a file already gone")
	_, err = ReadSnapshotFile(fsys, dir, 3)
	require.ErrorIs(t, err, fs.ErrNotExist)
	offs, err = ListSnapshots(fsys, dir)
	require.NoError(t, err)
	assert.Equal(t, []int64{17, 40}, offs)
	_, err = ListSnapshots(fsys, "/missing")
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.True(t, bytes.HasSuffix([]byte(SnapshotPath(dir, 5)), []byte("/p/t-0/00000000000000000005.snapshot")))
}
