package log_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/legacy"
	"github.com/partlog/partlog/internal/producer"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// Opening partitions.

// openT opens a partition in a fresh temporary directory and closes it at
// the end of the test.
func openT(t testing.TB, cfg plog.Config) (*plog.Partition, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "orders-0")
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p, dir
}

// openMem opens a partition on a fresh in-memory filesystem (usable inside
// a synctest bubble: no background goroutine, no wall clock), closes it at
// the end of the test and returns it with the error injector in front of
// the filesystem.
func openMem(t *testing.T, cfg plog.Config) (*plog.Partition, *vfs.Injector) {
	t.Helper()
	in := vfs.NewInjector(vfs.NewMem())
	cfg.FS = in
	p, err := plog.Open("/p-0", cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p, in
}

// memIndexBytes is segment.index.bytes for the tests on MemFS whose
// segments are small: room for every index entry they write. With Kafka's
// 10 MiB default every segment's .index and .timeindex are 10 MiB in
// memory, and every crash clone copies them and every Verify and reopen
// reads them: most of such a test's time, ten times more under -race.
const memIndexBytes = 4096

// Files and fixtures.

// dirContents returns every file of dir with its bytes.
func dirContents(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		out[e.Name()] = b
	}
	return out
}

// logFiles returns the .log files of dir and their bytes.
func logFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			require.NoError(t, err)
			out[e.Name()] = b
		}
	}
	return out
}

// copyFixtureFrom copies testdata/<set>/<name> into a fresh directory.
func copyFixtureFrom(t *testing.T, set, name string) string {
	t.Helper()
	src := filepath.Join("testdata", set, name)
	dst := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.MkdirAll(dst, 0o755))
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644))
	}
	return dst
}

// Partition directories holding legacy magic 1 messages Kafka 0.10 wrote
// (testdata/legacy, cut from real broker Fetch responses; see
// testdata/PROVENANCE.md): issue12-0 is issue 12's reproduction (two v1
// messages at offsets 0-1 in segment 0, a v2 batch at 2-3 in segment 2);
// mixed-0 is one segment of v1 messages, gzip v1 wrappers and v2 batches,
// offsets 0-19.
var legacyDirs = []struct {
	name string
	end  int64
}{
	{"issue12-0", 4},
	{"mixed-0", 20},
}

// lockChildEnv names the partition directory TestLockHelperProcess opens.
const lockChildEnv = "PARTLOG_LOCK_CHILD_DIR"

// runLockChild runs TestLockHelperProcess in a child process on the
// partition directory dir and returns what it printed: "locked", "opened"
// or "error ...".
func runLockChild(t *testing.T, dir string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+dir)
	out, err := cmd.Output()
	require.NoError(t, err)
	for _, line := range strings.Split(string(out), "\n") {
		if line == "locked" || line == "opened" || strings.HasPrefix(line, "error") {
			return line
		}
	}
	require.Failf(t, "the child printed no result", "output %q", out)
	return ""
}

// openFiles counts the descriptors and mappings of this process that
// refer to files under dir (Linux: /proc/self/fd, /proc/self/maps); ok is
// false elsewhere.
func openFiles(t testing.TB, dir string) (fds, maps int, ok bool) {
	t.Helper()
	fds, maps, err := vfs.OpenFiles(dir)
	if errors.Is(err, errors.ErrUnsupported) {
		return 0, 0, false
	}
	require.NoError(t, err)
	return fds, maps, true
}

// writeSegments writes a partition directory of n segments holding one
// 1-record batch each (segment i holds offset i) straight into files, in
// Kafka's format (docs/format.md): the .log, an empty .index (the first
// batch of a segment gets no entry) and a .timeindex holding the final
// entry (the batch's timestamp at relative offset 0). It marks the
// directory cleanly shut down, as a Partition's Close leaves it, and
// returns the batches. Writing through Partition.AppendBatch would fsync
// on each of the n rolls.
func writeSegments(t testing.TB, dir string, n int) [][]byte {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	bt := logtest.MakeBatch(1, 100, 1_700_000_000_000, 1)
	var entry [12]byte
	binary.BigEndian.PutUint64(entry[:8], uint64(batch.Batch(bt).MaxTimestamp()))
	out := make([][]byte, n)
	for i := range n {
		b := append([]byte(nil), bt...)
		batch.Batch(b).SetBaseOffset(int64(i))
		for suffix, data := range map[string][]byte{
			segment.LogSuffix: b, segment.IndexSuffix: nil, segment.TimeIndexSuffix: entry[:],
		} {
			require.NoError(t, os.WriteFile(filepath.Join(dir, segment.FileName(int64(i), suffix)), data, 0o644))
		}
		out[i] = b
	}
	require.NoError(t, checkpoint.MarkCleanShutdown(vfs.Default, dir))
	return out
}

func writeFileT(t *testing.T, fs vfs.FS, path string, data []byte) {
	t.Helper()
	f, err := fs.Create(path)
	require.NoError(t, err)
	_, err = f.Write(data)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
}

func readFileT(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	require.NoError(t, err)
	defer f.Close()
	st, err := f.Stat()
	require.NoError(t, err)
	b := make([]byte, st.Size())
	_, err = f.ReadAt(b, 0)
	require.NoError(t, err)
	return b
}

// batchPositions returns the start of every batch of a .log file.
func batchPositions(t *testing.T, path string) []int64 {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []int64
	for pos := int64(0); len(data) > 0; {
		b, rest, err := batch.Parse(data)
		require.NoError(t, err)
		out = append(out, pos)
		pos += int64(len(b))
		data = rest
	}
	return out
}

func flipByte(t *testing.T, path string, at int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := []byte{0}
	_, err = f.ReadAt(b, at)
	require.NoError(t, err)
	b[0] ^= 0x5a
	_, err = f.WriteAt(b, at)
	require.NoError(t, err)
}

func makeUnclean(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, os.Remove(filepath.Join(dir, checkpoint.CleanShutdownFile)))
	require.NoError(t, os.Remove(filepath.Join(dir, plog.RecoveryPointCheckpointFile)))
}

// corruptionFixture writes a partition of several segments and closes it,
// then makes the next Open an unclean one that recovers everything (no
// clean-shutdown marker, no recovery point).
func corruptionFixture(t *testing.T) (dir string, m *logtest.Model, segs []plog.SegmentInfo) {
	dir = filepath.Join(t.TempDir(), "corrupt-0")
	p, err := plog.Open(dir, plog.Config{SegmentBytes: 4096, IndexIntervalBytes: 200, DisableAutoHighWatermark: true})
	require.NoError(t, err)
	m = logtest.NewModel(0, true)
	for i := 0; i < 40; i++ {
		b := logtest.MakeBatch(1+i%3, 300, int64(1000+10*i), byte(i))
		base, err := p.AppendBatch(b)
		require.NoError(t, err)
		require.NoError(t, m.AppendBatch(b, base))
	}
	require.NoError(t, p.SetHighWatermark(30))
	require.NoError(t, m.SetHighWatermark(30))
	segs = p.SegmentInfos()
	require.True(t, len(segs) >= 4, "want several segments")
	require.NoError(t, p.Close())
	return dir, m, segs
}

// skipUnlessSIGBUS skips the test where a page past the end of a cut
// mapped file does not raise SIGBUS.
func skipUnlessSIGBUS(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("SIGBUS on a page past the end of a mapped file is Linux behaviour")
	}
}

// requireFault checks that err is the offline partition's error: it wraps
// ErrFault and ErrFailed and names the cut file.
func requireFault(t *testing.T, err error, path string) {
	t.Helper()
	require.ErrorIs(t, err, index.ErrFault)
	require.ErrorIs(t, err, plog.ErrFailed)
	var fe *segment.FaultError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, path, fe.File)
}

// Building batches.

// failer is what prodBatch needs of a *testing.T, *testing.B or *rapid.T.
type failer interface {
	Helper()
	Errorf(format string, args ...any)
	FailNow()
}

// tb is what the batch helpers need from a test: *testing.T or goT.
type tb interface {
	require.TestingT
	Helper()
}

// goT lets a helper goroutine use require: a failure is reported with
// Errorf and ends only that goroutine (FailNow from a goroutine other than
// the test's is not allowed).
type goT struct{ t *testing.T }

func (g goT) Helper() { g.t.Helper() }

func (g goT) Errorf(format string, args ...any) { g.t.Errorf(format, args...) }

func (g goT) FailNow() { runtime.Goexit() }

func (g goT) Fatalf(format string, args ...any) {
	g.t.Errorf(format, args...)
	runtime.Goexit()
}

// benchBatch is a 16 KiB producer batch.
func benchBatch() []byte { return logtest.MakeBatch(64, 220, 1_700_000_000_000, 3) }

// producerBatch encodes n records the way a Kafka producer sends them:
// base offset 0, leader epoch -1.
func producerBatch(n int) []byte {
	bld := batch.NewBuilder(batch.BuilderOptions{PartitionLeaderEpoch: batch.NoPartitionLeaderEpoch})
	for i := 0; i < n; i++ {
		_ = bld.Add(batch.Record{Value: fmt.Appendf(nil, "event %d", i), Timestamp: 1_700_000_000_000 + int64(i)})
	}
	b, _ := bld.Build()
	return b
}

// pb is a producer batch in a table: producer 7 unless pid is set.
type pb struct {
	pid   int64
	epoch int16
	seq   int32
	n     int
	txn   bool
}

func (b pb) bytes(t testing.TB) []byte {
	pid := b.pid
	if pid == 0 {
		pid = 7
	}
	n := b.n
	if n == 0 {
		n = 1
	}
	return prodBatch(t, pid, b.epoch, b.seq, n, b.ts(), b.txn)
}

// ts is the batch's timestamp: now, so that producers do not expire
// under the default producer.id.expiration.ms, unless the test set one.
func (b pb) ts() int64 {
	if pbTime != 0 {
		return pbTime
	}
	return time.Now().UnixMilli()
}

// pbTime, when not 0, is the timestamp of every pb batch (tests with a
// fake clock set it; they do not run in parallel).
var pbTime int64

// pbNow is the timestamp test batches carry.
func pbNow() int64 { return pb{}.ts() }

// prodBatch builds an uncompressed batch of n records from producer pid
// with epoch and first sequence seq.
func prodBatch(t failer, pid int64, epoch int16, seq int32, n int, ts int64, txn bool) []byte {
	t.Helper()
	bt, err := prodBuilder(t, pid, epoch, seq, n, ts, txn).Build()
	require.NoError(t, err)
	return append([]byte(nil), bt...)
}

// prodBuilder is the Builder prodBatch builds its batch with.
func prodBuilder(t failer, pid int64, epoch int16, seq int32, n int, ts int64, txn bool) *batch.Builder {
	t.Helper()
	bld := batch.NewBuilder(batch.BuilderOptions{Producer: &batch.Producer{ID: pid, Epoch: epoch, BaseSequence: seq}, Transactional: txn})
	for i := range n {
		require.NoError(t, bld.Add(batch.Record{Timestamp: ts + int64(i), Key: []byte{byte(i)}, Value: []byte("v")}))
	}
	return bld
}

// fmtSscan parses "<20 digits>.snapshot".
func fmtSscan(name string, off *int64) (int, error) {
	if len(name) != 20+len(producer.SnapshotSuffix) || name[20:] != producer.SnapshotSuffix {
		return 0, errors.New("not a snapshot")
	}
	var v int64
	for _, c := range name[:20] {
		if c < '0' || c > '9' {
			return 0, errors.New("not a snapshot")
		}
		v = v*10 + int64(c-'0')
	}
	*off = v
	return 1, nil
}

// txnBatch is a transactional batch of n records from producer pid.
func txnBatch(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	return prodBatch(t, pid, epoch, seq, n, pbNow(), true)
}

// marker is a transaction marker for producer pid.
func marker(typ batch.ControlType, pid int64, epoch int16, coord int32) batch.TxnMarker {
	return batch.TxnMarker{Type: typ, ProducerID: pid, ProducerEpoch: epoch, CoordinatorEpoch: coord}
}

// assigned is one batch of a follower's record set: base offset and record
// count (offsets base .. base+n-1), or, with delta set, a compacted batch
// of one record whose lastOffsetDelta is delta.
type assigned struct {
	base  int64
	n     int
	delta int32
}

// recordSet encodes bs as one AppendAssigned record set, each batch with
// leader epoch epoch.
func recordSet(t testing.TB, epoch int32, bs ...assigned) []byte {
	t.Helper()
	var set []byte
	for i, a := range bs {
		n := max(a.n, 1)
		b := batch.Batch(logtest.MakeBatch(n, 10, 1_700_000_000_000+a.base%1000, byte(i)))
		if a.delta > 0 {
			binary.BigEndian.PutUint32(b[23:], uint32(a.delta)) // lastOffsetDelta
			b.SetCRC()
		}
		b.SetBaseOffset(a.base)
		b.SetPartitionLeaderEpoch(epoch)
		require.NoError(t, b.ValidateHeader())
		set = append(set, b...)
	}
	return set
}

// makeBatchT builds a valid batch of n records at base.
func makeBatchT(t *testing.T, base int64, n int) []byte {
	t.Helper()
	bld := batch.NewBuilder(batch.BuilderOptions{BaseOffset: base, PartitionLeaderEpoch: batch.NoPartitionLeaderEpoch})
	for i := 0; i < n; i++ {
		require.NoError(t, bld.Add(batch.Record{Key: []byte{byte(base)}, Value: []byte("v"), Timestamp: 1000}))
	}
	b, err := bld.AppendTo(nil)
	require.NoError(t, err)
	return b
}

// legacyMessage encodes one uncompressed legacy message (test helper).
func legacyMessage(offset int64, magic int8, ts int64, key, value string) []byte {
	m := []byte{0, 0, 0, 0, byte(magic), 0}
	if magic == legacy.MagicV1 {
		m = binary.BigEndian.AppendUint64(m, uint64(ts))
	}
	for _, f := range []string{key, value} {
		m = binary.BigEndian.AppendUint32(m, uint32(len(f)))
		m = append(m, f...)
	}
	binary.BigEndian.PutUint32(m, crc32.ChecksumIEEE(m[4:]))
	out := binary.BigEndian.AppendUint64(nil, uint64(offset))
	out = binary.BigEndian.AppendUint32(out, uint32(len(m)))
	return append(out, m...)
}

// legacyLen returns the size of the second legacy message of data (test
// helper for the v0 case: both messages have the same size).
func legacyLen(data []byte) int { return int(binary.BigEndian.Uint32(data[8:])) + batch.LogOverhead }

// sentBatch is a producer batch the test appended.
type sentBatch struct {
	pid         int64
	epoch       int16
	first, last int32
	base, end   int64 // offsets [base, end)
	bytes       []byte
	txn         bool
}

// Appending.

// appendN appends n one-record batches.
func appendN(t *testing.T, p *plog.Partition, n int) {
	t.Helper()
	for i := range n {
		_, err := p.AppendBatch(logtest.MakeBatch(1, 10, 1000+int64(i), byte(i)))
		require.NoError(t, err)
	}
}

// appendBigBatches appends 8 batches of 32 records of 1 KiB (about 256 KiB
// in the active segment, which is mapped).
func appendBigBatches(t *testing.T, p *plog.Partition) {
	t.Helper()
	for i := range 8 {
		_, err := p.AppendBatch(logtest.MakeBatch(32, 1000, 1_700_000_000_000+int64(i), byte(i)))
		require.NoError(t, err)
	}
}

// appendSyncedPrefix appends n two-record batches to p and to the model
// m, and syncs after the second: the first two batches are promised
// durable, the rest are not.
func appendSyncedPrefix(t *testing.T, p *plog.Partition, m *logtest.Model, n int) {
	t.Helper()
	for i := range n {
		b := logtest.MakeBatch(2, 30, int64(1000+i), byte(i))
		off, err := p.AppendBatch(b)
		require.NoError(t, err)
		require.NoError(t, m.AppendBatch(b, off))
		if i == 1 {
			require.NoError(t, p.Sync())
			m.Sync()
		}
	}
}

// Reading back.

// batchesIn parses a record set into (base, last) pairs.
func batchesIn(t testing.TB, b []byte) [][2]int64 {
	t.Helper()
	var out [][2]int64
	for len(b) > 0 {
		bt, rest, err := batch.Parse(b)
		require.NoError(t, err)
		require.NoError(t, bt.Validate())
		out = append(out, [2]int64{bt.BaseOffset(), bt.LastOffset()})
		b = rest
	}
	return out
}

// checkRecords checks that r holds whole, valid, contiguous batches, the
// first holding offset, and returns the offset after them.
func checkRecords(t tb, r plog.Records, offset int64) int64 {
	t.Helper()
	b := r.Bytes()
	next := int64(-1)
	for len(b) > 0 {
		bt, rest, err := batch.Parse(b)
		require.NoError(t, err)
		require.NoError(t, bt.Validate())
		if next < 0 {
			require.True(t, bt.BaseOffset() <= offset && offset <= bt.LastOffset(), "first batch [%d, %d] does not hold %d", bt.BaseOffset(), bt.LastOffset(), offset)
		} else {
			require.Equal(t, next, bt.BaseOffset())
		}
		next = bt.NextOffset()
		b = rest
	}
	return next
}

// checkRecordsFrom is checkRecords for a log that may have offset gaps (a
// follower's copy of a compacted log): r holds whole, valid batches with
// increasing offsets, the first being the first batch whose last offset is
// at or past offset. It returns the offset after them.
func checkRecordsFrom(t tb, r plog.Records, offset int64) int64 {
	t.Helper()
	b := r.Bytes()
	next := int64(-1)
	for len(b) > 0 {
		bt, rest, err := batch.Parse(b)
		require.NoError(t, err)
		require.NoError(t, bt.Validate())
		if next < 0 {
			require.True(t, offset <= bt.LastOffset(), "first batch [%d, %d] ends before %d", bt.BaseOffset(), bt.LastOffset(), offset)
		} else {
			require.True(t, bt.BaseOffset() >= next, "batch at %d after a batch ending before %d", bt.BaseOffset(), next)
		}
		next = bt.NextOffset()
		b = rest
	}
	return next
}

// storedBatches reads every batch of p back, from the log start (t is a
// *testing.T or a *rapid.T).
func storedBatches(t failer, p *plog.Partition) []batch.Batch {
	t.Helper()
	var out []batch.Batch
	for next := p.LogStartOffset(); next < p.LogEndOffset(); {
		r, err := p.ReadFromFollower(next, 1<<20)
		require.NoError(t, err)
		for data := r.Bytes(); len(data) > 0; {
			b, rest, err := batch.Parse(data)
			require.NoError(t, err)
			out = append(out, batch.Batch(bytes.Clone(b)))
			next = b.NextOffset()
			data = rest
		}
		require.NoError(t, r.Close())
	}
	return out
}

// storedRecord is what a test compares of a record.
type storedRecord struct {
	Offset, Timestamp int64
	Key, Value        string
}

// storedRecords decodes every record of a record set (v2 batches and
// legacy messages) with the batch package's own decoders, skipping control
// batches as a consumer does.
func storedRecords(t *testing.T, set []byte) []storedRecord {
	t.Helper()
	var out []storedRecord
	walkRecords(t, set, true, func(r batch.Record) {
		out = append(out, storedRecord{r.Offset, r.Timestamp, string(r.Key), string(r.Value)})
	})
	return out
}

// walkRecords calls fn with every record of a record set (v2 batches and
// legacy messages), decoded with the batch package's own decoders, in
// order; with skipControl, the records of control batches are left out.
func walkRecords(t *testing.T, set []byte, skipControl bool, fn func(batch.Record)) {
	t.Helper()
	var d batch.Decoder
	for len(set) > 0 {
		n, magic, _, err := batch.FrameEntry(set)
		require.NoError(t, err)
		if legacy.IsMagic(magic) {
			recs, err := d.AppendLegacyRecords(nil, legacy.Entry(set[:n]), true)
			require.NoError(t, err)
			for _, r := range recs {
				fn(r)
			}
		} else if bt := batch.Batch(set[:n]); !skipControl || !bt.Attributes().IsControl() {
			for r, err := range bt.All(&d) {
				require.NoError(t, err)
				fn(r)
			}
		}
		set = set[n:]
	}
}

// readCommittedAll reads read_committed from offset to the last stable
// offset and returns every batch's base offset with the aborted
// transactions the reads reported (each once).
func readCommittedAll(t testing.TB, p *plog.Partition, from int64) (bases []int64, aborted []plog.AbortedTxn) {
	t.Helper()
	for off := from; ; {
		recs, ab, err := p.ReadCommitted(off, 1<<20)
		require.NoError(t, err)
		if len(recs.Bytes()) == 0 {
			require.NoError(t, recs.Close())
			return bases, aborted
		}
		for _, a := range ab { // each read reports what overlaps it
			if !slices.Contains(aborted, a) {
				aborted = append(aborted, a)
			}
		}
		for rest := recs.Bytes(); len(rest) > 0; {
			bt, r, err := batch.Parse(rest)
			require.NoError(t, err)
			bases = append(bases, bt.BaseOffset())
			rest = r
		}
		off = recs.NextOffset()
		require.NoError(t, recs.Close())
	}
}

// batchFrom returns the model's batch a read at offset starts with: the
// first whose last offset is at or above offset (Kafka's rule, so for an
// offset in a gap the first batch after it), found in Model.Batches.
func batchFrom(m *logtest.Model, offset int64) (logtest.Batch, bool) {
	bs := m.Batches()
	i, _ := slices.BinarySearchFunc(bs, offset, func(b logtest.Batch, off int64) int {
		if b.LastOffset < off {
			return -1
		}
		return 1
	})
	if i < len(bs) {
		return bs[i], true
	}
	return logtest.Batch{}, false
}

// Recovery policies, compaction and retention.

// checkedPolicy accepts every cut, like DefaultRecovery, but is another
// policy (so Open pre-scans) and checks each event.
type checkedPolicy struct{ t *testing.T }

func (c checkedPolicy) OnCorruption(ev plog.RecoveryEvent) error {
	var ce *base.CorruptionError
	// A cut removes bytes, later segments (a sealed segment above the
	// recovery point that ends early may be followed by empty ones), or
	// an empty segment after an offset gap (a torn tail of no bytes).
	ok := errors.As(ev.Err, &ce) && ev.File != "" && ev.Pos >= 0 &&
		(ev.CutBytes > 0 || ev.LaterSegments > 0 || ev.Checkpoint || (ev.TornTail && base.IsTornTail(ev.Err)))
	assert.True(c.t, ok, "bad recovery event %+v", ev)
	return nil
}

// recordingPolicy records every recovery event and answers with answer.
type recordingPolicy struct {
	events *[]plog.RecoveryEvent
	answer plog.RecoveryPolicy
}

func (r recordingPolicy) OnCorruption(ev plog.RecoveryEvent) error {
	*r.events = append(*r.events, ev)
	return r.answer.OnCorruption(ev)
}

// flushRollsOrNot runs the rolls' flush of p, whose segments are infos,
// when flushRolls is set and checks that it raised the recovery point to
// the active segment's base; otherwise it checks that the recovery point
// is still a new partition's 0. REQUIRES: p opened WithManualRollFlush.
func flushRollsOrNot(t *testing.T, p *plog.Partition, infos []plog.SegmentInfo, flushRolls bool) {
	t.Helper()
	if flushRolls {
		require.NoError(t, p.FlushRolled())
		require.Equal(t, infos[len(infos)-1].BaseOffset, p.RecoveryPoint())
	} else {
		require.Equal(t, int64(0), p.RecoveryPoint(), "a new partition's recovery point; no roll's flush moved it")
	}
}

// spareNames returns the names in dir that carry the spare suffix.
func spareNames(t *testing.T, fs vfs.FS, dir string) []string {
	t.Helper()
	names, err := fs.List(dir)
	require.NoError(t, err)
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, segment.SpareSuffix) {
			out = append(out, n)
		}
	}
	return out
}

// rewriteSegments does what compaction does when it keeps every record:
// it copies the sealed segments old into one .cleaned segment and swaps
// it in with compaction's commit protocol and its directory syncs. When
// the batches do not fit one segment it returns the error and leaves the
// .cleaned file behind, the partition unchanged.
func rewriteSegments(t tb, p *plog.Partition, old []*segment.Segment) error {
	t.Helper()
	seg, err := segment.CreateWithSuffix(p.FS(), p.Dir(), old[0].BaseOffset(), segment.CleanedSuffix, p.SegmentConfig())
	require.NoError(t, err)
	for _, o := range old {
		data, err := o.Bytes(0, o.Size(), nil)
		require.NoError(t, err)
		for len(data) > 0 {
			bt, rest, err := batch.Parse(data)
			require.NoError(t, err)
			if _, err := seg.Append(bt); err != nil {
				_ = seg.Close()
				return err
			}
			data = rest
		}
	}
	require.NoError(t, seg.Seal())
	require.NoError(t, seg.Flush())
	require.NoError(t, checkpoint.SyncDir(p.FS(), p.Dir()))
	require.NoError(t, p.ReplaceSegments(old, []*segment.Segment{seg}, func() error {
		if err := seg.ChangeSuffix(segment.CleanedSuffix, segment.SwapSuffix); err != nil {
			return err
		}
		if err := checkpoint.SyncDir(p.FS(), p.Dir()); err != nil {
			return err
		}
		for _, o := range old {
			if err := o.MarkDeleted(); err != nil {
				return err
			}
		}
		if err := checkpoint.SyncDir(p.FS(), p.Dir()); err != nil {
			return err
		}
		if err := seg.ChangeSuffix(segment.SwapSuffix, ""); err != nil {
			return err
		}
		return checkpoint.SyncDir(p.FS(), p.Dir())
	}))
	return nil
}

// horizonCleaner keeps every record until a delete horizon far from the
// records' own timestamps, so the rebuilt batches are larger than the
// originals: each record's timestamp delta becomes a long varint.
type horizonCleaner struct{ horizon int64 }

func (c horizonCleaner) Plan(_ context.Context, v *plog.View) (int64, error) {
	return v.HighWatermark(), nil
}

func (c horizonCleaner) Batch(batch.Batch) plog.BatchDecision {
	return plog.BatchDecision{Action: plog.BatchFilter, Horizon: c.horizon}
}

func (c horizonCleaner) Keep(batch.Batch, batch.Record) plog.RecordVerdict {
	return plog.RecordKeepUntilHorizon
}

// keepAllCleaner plans a round up to the high watermark (as a Cleaner may:
// the partition rewrites only the sealed segments below it) and keeps
// every batch as it is, byte for byte: a round with it rewrites every
// sealed segment below the high watermark (new .cleaned files, swaps,
// deletions) and changes no batch.
type keepAllCleaner struct{}

func (keepAllCleaner) Plan(_ context.Context, v *plog.View) (int64, error) {
	return v.HighWatermark(), nil
}

func (keepAllCleaner) Batch(batch.Batch) plog.BatchDecision {
	return plog.BatchDecision{Action: plog.BatchCopy}
}

func (keepAllCleaner) Keep(batch.Batch, batch.Record) plog.RecordVerdict { return plog.RecordKeep }

// soakOldestSegment is a retention policy that deletes the oldest segment
// while more than two are left.
type soakOldestSegment struct{}

func (soakOldestSegment) Expired(v *plog.View) int {
	if len(v.Segments()) > 2 {
		return 1
	}
	return 0
}

// Crash walks: crashes at every filesystem operation and random ones.

// crashSeed returns the seed of a randomized crash test: $PARTLOG_CRASH_SEED
// when set (to replay a failure), else the clock. It is logged, and logged
// again after a failure, so that it ends the test's failure output.
func crashSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("PARTLOG_CRASH_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seed = v
	}
	t.Logf("seed %d (replay with PARTLOG_CRASH_SEED=%d)", seed, seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("FAILED with seed %d: replay with PARTLOG_CRASH_SEED=%d go test -run '^%s$' ./log/", seed, seed, t.Name())
		}
	})
	return seed
}

// crashHistories runs random histories, numbered from 1, until they have
// checked minCrashes crashes or budget has passed (the histories that
// started before then run to their end), and logs how many of each it
// ran. history runs history id and returns how many crashes it checked.
func crashHistories(t *testing.T, budget time.Duration, minCrashes int, history func(id int) int) {
	t.Helper()
	deadline := time.Now().Add(budget)
	crashes, histories := 0, 0
	for crashes < minCrashes && time.Now().Before(deadline) {
		histories++
		crashes += history(histories)
	}
	t.Logf("%d crash points in %d histories", crashes, histories)
}

// raceCrashStride is how far apart the crash points of crashAtEveryOp
// are under -race.
const raceCrashStride = 8

// crashPoint names one crash of a walk: the operation of the run it comes
// before (counting from 0), how many operations the counted run did, and
// what of the unsynced writes the crash kept.
type crashPoint struct {
	Op, Ops int64
	Opts    vfs.CrashOptions
}

// String describes the crash for a failure message.
func (c crashPoint) String() string {
	return fmt.Sprintf("crash at operation %d of %d %+v", c.Op, c.Ops, c.Opts)
}

// partModel is a partition and the model of what was appended to it:
// what the walks over one partition's operations share.
type partModel struct {
	p *plog.Partition
	m *logtest.Model
}

// crashWalk is a history to crash at each of its filesystem operations in
// turn (see crashAtEveryOp). F is what setup builds and run, finish and
// check share (a partition and its model, the acknowledgements run
// recorded); struct{} when there is nothing to share.
type crashWalk[F any] struct {
	// setup, when set, builds what run starts from on fs. Its operations
	// are neither counted nor crashed at.
	setup func(t *testing.T, fs vfs.FS) F
	// run does the operations to crash at, on the filesystem setup built
	// on. crashed reports whether the crash state has been taken: what run
	// sees acknowledged (a sync returned, an append under per-append
	// durability returned) binds the model only while it reports false.
	run func(t *testing.T, fs vfs.FS, f F, crashed func() bool)
	// finish, when set, runs after run, with the crash hook removed (it
	// closes what run left open); its operations are not crashed at.
	finish func(t *testing.T, f F)
	// options returns the crashes to take at operation k of total: one
	// run of the history each.
	options func(k, total int64) []vfs.CrashOptions
	// mayEndEarly says a run may do fewer operations than the counted one
	// (goroutines in the background do some of them): a run that never
	// reaches operation k takes no crash and the point is skipped. When
	// false such a run fails the test.
	mayEndEarly bool
	// check gets the state the crash at left (run went on to its end on
	// the live filesystem, and finish ran, after the state was taken) and
	// checks the laws on it: it reopens the state and compares.
	check func(t *testing.T, f F, state *vfs.MemFS, at crashPoint)
}

// randomCrash is a crashWalk's options for one crash a point that keeps a
// random share of the unsynced writes and tears a random share of the cut
// ones, drawn from rng.
func randomCrash(rng *rand.Rand) func(k, total int64) []vfs.CrashOptions {
	return func(int64, int64) []vfs.CrashOptions {
		return []vfs.CrashOptions{drawCrash(rng)}
	}
}

// drawCrash draws the options of one crash: a share of the unsynced
// writes kept and of the cut ones torn, and, half the time, directory
// entries kept as a prefix of their changes (a journal's order, which
// the draw of each rename on its own never gives).
func drawCrash(rng *rand.Rand) vfs.CrashOptions {
	return vfs.CrashOptions{
		UnsyncedDataPercent: rng.IntN(101), TornPercent: rng.IntN(101),
		OrderedEntries: rng.IntN(2) == 0, Seed: rng.Uint64(),
	}
}

// crashAtEveryOp crashes w's history at every filesystem operation of
// w.run and returns how many crash states it checked and how many
// operations the run does. It first runs setup and run once on a counting filesystem to
// learn how many operations run does (total). Then, for each operation k
// in turn and each of w.options(k, total), it runs setup and run again on
// a fresh MemFS behind an injector whose hook, just before the k-th
// operation that reaches the filesystem after setup (from any goroutine,
// counting from 0), takes state = mem.CrashClone(opts): what a machine
// crash at that instant would leave, the k-th operation not done. It
// guarantees:
//
//   - every crash point is taken exactly once a run, the rest of run
//     going on unharmed on the live filesystem (the state is a copy);
//   - crashed reports true from the instant the state is taken, so what
//     run records as acknowledged while it reports false was acknowledged
//     before the crash;
//   - the hook is removed before finish and check run, and neither is
//     crashed at;
//   - every crash point is checked unless w.mayEndEarly and the run
//     ended first: a run that never reaches its point fails the test,
//     and a walk that checks no state at all fails it too;
//   - the count of points is logged with the test.
//
// Under -race it crashes at every raceCrashStride-th operation only (and
// at the last one): the walks are histories of one goroutine, or nearly,
// in which the race detector has little to see and which it slows about
// tenfold, and the plain run crashes at every operation.
func crashAtEveryOp[F any](t *testing.T, w crashWalk[F]) (points int, ops int64) {
	t.Helper()
	setup := func(t *testing.T, fs vfs.FS) F {
		var f F
		if w.setup != nil {
			f = w.setup(t, fs)
		}
		return f
	}
	counter := vfs.NewInjector(vfs.NewMem())
	f := setup(t, counter)
	before := counter.Ops()
	w.run(t, counter, f, func() bool { return false })
	total := counter.Ops() - before
	if w.finish != nil {
		w.finish(t, f)
	}
	require.Positive(t, total, "the run does no filesystem operation")

	stride := int64(1)
	if raceEnabled {
		stride = raceCrashStride
	}
	for k := range total {
		if k%stride != 0 && k != total-1 {
			continue
		}
		for _, opts := range w.options(k, total) {
			at := crashPoint{Op: k, Ops: total, Opts: opts}
			mem := vfs.NewMem()
			in := vfs.NewInjector(mem)
			f := setup(t, in)
			var mu sync.Mutex
			var state *vfs.MemFS
			n := int64(0)
			in.SetHook(func(vfs.Op) error {
				mu.Lock()
				defer mu.Unlock()
				if n == k {
					state = mem.CrashClone(opts)
				}
				n++
				return nil
			})
			crashed := func() bool {
				mu.Lock()
				defer mu.Unlock()
				return state != nil
			}
			w.run(t, in, f, crashed)
			in.SetHook(nil)
			if w.finish != nil {
				w.finish(t, f)
			}
			mu.Lock()
			taken := state
			mu.Unlock()
			if taken == nil {
				require.True(t, w.mayEndEarly, "%s: the run ended before it", at)
				continue
			}
			points++
			w.check(t, f, taken, at)
		}
	}
	require.Positive(t, points, "no crash state checked")
	if stride > 1 {
		t.Logf("%d crash points of %d operations (every %dth under -race)", points, total, stride)
	} else {
		t.Logf("%d crash points of %d operations", points, total)
	}
	return points, total
}

// Kill tests: a child process that is killed mid-write.

// killChildEnv names the partition directory the helper process appends
// to; the helper does nothing without it.
const killChildEnv = "PARTLOG_KILL_CHILD_DIR"

// Environment of the TestProducerKill helper process: the partition
// directory (the helper does nothing without it) and its random seed.
const (
	producerKillChildEnv = "PARTLOG_PRODUCER_KILL_CHILD_DIR"
	producerKillSeedEnv  = "PARTLOG_PRODUCER_KILL_SEED"
)

// killWalk reads the whole log the kill test reopened, checks that its
// batches are contiguous from the log start, hands each to visit in order
// and returns the offset after the last.
func killWalk(t *testing.T, p *plog.Partition, round int, visit func(b batch.Batch)) int64 {
	t.Helper()
	next := p.LogStartOffset()
	for next < p.LogEndOffset() {
		r, err := p.ReadFromFollower(next, 1<<20)
		require.NoError(t, err)
		data := r.Bytes()
		for len(data) > 0 {
			b, rest, err := batch.Parse(data)
			require.NoError(t, err)
			require.Equal(t, next, b.BaseOffset(), "round %d: a hole after offset %d", round, next-1)
			visit(b)
			next = b.NextOffset()
			data = rest
		}
		require.NoError(t, r.Close())
	}
	return next
}

// Soak tests.

// The soak (docs/crash-safety.md, "The soak"): TestSoakKill, TestSoakDiskFull,
// TestSoakBadInput and TestSoakRace are the adversarial programs of issue 28
// as tests. Each runs a fixed number of rounds in every go test run (seconds,
// seeded); with -soak=D each goes on with new rounds until D has passed:
//
//	go test -race -run Soak -timeout 0 ./log -soak=10m
var soakFor = flag.Duration("soak", 0, "run each TestSoak* this long (its fixed rounds first, then more until the time has passed)")

// soakFixedSeed is the seed of the soaks' fixed rounds.
const soakFixedSeed = 28

// soakTS0 is the first record timestamp of the soak's plain batches: a
// fixed time, so that a batch can be rebuilt byte for byte from where it
// lies (under the default message.timestamp.before.max.ms, unlimited, a
// past timestamp is accepted).
const soakTS0 = 1_700_000_000_000

// soakLoop runs round(0), round(1), ... : at least rounds of them, then more
// until -soak has passed since the call. It returns how many ran. The clock
// only decides when to stop; nothing is asserted about time.
func soakLoop(t *testing.T, rounds int, round func(i int)) int {
	t.Helper()
	until := time.Now().Add(*soakFor)
	i := 0
	for ; i < rounds || time.Now().Before(until); i++ {
		round(i)
		if t.Failed() {
			break
		}
	}
	return i
}

// soakSeed returns the seed of a soak: $PARTLOG_CRASH_SEED when set, else
// a fixed one for the fixed rounds of a plain go test run and the clock for a
// -soak run, logged as crashSeed logs it.
func soakSeed(t *testing.T) uint64 {
	t.Helper()
	if os.Getenv("PARTLOG_CRASH_SEED") != "" || *soakFor > 0 {
		return crashSeed(t)
	}
	t.Logf("seed %d (the fixed one; PARTLOG_CRASH_SEED=<n> or -soak=<duration> to vary it)", soakFixedSeed)
	return soakFixedSeed
}

// soakPlainBatch is the producer batch the soak appends to partition part
// when its log ends at base: its record count, keys, values and timestamps
// follow from (part, base) alone, so that a reader of the log can tell the
// batch at base from any other and check the log holds nothing but what
// was appended, in order.
func soakPlainBatch(t failer, part int, base int64) []byte {
	t.Helper()
	h := uint64(part)*0x9e3779b97f4a7c15 ^ uint64(base)*0xbf58476d1ce4e5b9
	h ^= h >> 29
	n := 1 + int(h%6)
	size := 16 + int(h>>8%300)
	bld := batch.NewBuilder(batch.BuilderOptions{})
	val := make([]byte, size)
	for i := range val {
		val[i] = byte(h>>16) + byte(i)
	}
	for i := range n {
		key := fmt.Appendf(nil, "p%d-o%d-r%d", part, base, i)
		require.NoError(t, bld.Add(batch.Record{Key: key, Value: val, Timestamp: soakTS0 + base + int64(i)}))
	}
	b, err := bld.Build()
	require.NoError(t, err)
	return append([]byte(nil), b...)
}

// soakSameBatch reports whether stored, a batch read from the log, is what
// a producer sent as sent: the same bytes from the magic byte on (the
// partition rewrites only baseOffset, batchLength and the leader epoch in
// front of it).
func soakSameBatch(stored, sent []byte) bool {
	return len(stored) == len(sent) && string(stored[16:]) == string(sent[16:])
}

// soakWalk reads p from its log start to its log end as a follower and
// hands every batch to visit in order, checking that they are contiguous:
// the first holds the log start offset (which DeleteRecordsBefore may
// have put inside it), each next one starts where the one before ends.
func soakWalk(t *testing.T, where string, p *plog.Partition, visit func(b batch.Batch)) {
	t.Helper()
	next, first := p.LogStartOffset(), true
	for next < p.LogEndOffset() {
		r, err := p.ReadFromFollower(next, 1<<20)
		require.NoError(t, err, "%s: read at %d", where, next)
		data := r.Bytes()
		require.NotEmpty(t, data, "%s: nothing at %d, below the log end %d", where, next, p.LogEndOffset())
		for len(data) > 0 {
			b, rest, err := batch.Parse(data)
			require.NoError(t, err, where)
			if first {
				require.True(t, b.BaseOffset() <= next && next < b.NextOffset(), "%s: the first batch [%d, %d) does not hold the log start %d", where, b.BaseOffset(), b.NextOffset(), next)
				first = false
			} else {
				require.Equal(t, next, b.BaseOffset(), "%s: a hole after offset %d", where, next-1)
			}
			visit(b)
			next = b.NextOffset()
			data = rest
		}
		require.NoError(t, r.Close())
	}
}

// checkTxnState compares p's transaction state, its read_committed reads
// and (files) the .txnindex files in dir with the oracle.
func checkTxnState(t testing.TB, where string, p *plog.Partition, fsys vfs.FS, dir string, files bool) {
	t.Helper()
	o := txnOracleOf(t, p)
	hw := p.HighWatermark()
	wantLSO := hw
	if len(o.open) > 0 {
		wantLSO = min(max(o.open[0].FirstOffset, p.LogStartOffset()), hw)
	}
	require.Equal(t, wantLSO, p.LastStableOffset(), "%s: last stable offset (open %v)", where, o.open)
	open, err := p.OpenTransactions()
	require.NoError(t, err, where)
	for i := range open {
		open[i].StartTimestamp = 0
	}
	if len(open) > 0 || len(o.open) > 0 {
		require.Equal(t, o.open, open, "%s: open transactions", where)
	}
	// read_committed from the start: nothing at or past the LSO, and the
	// aborted transactions reported are the oracle's that start below
	// where the reads stopped.
	var got []plog.AbortedTxn
	off := p.LogStartOffset()
	for {
		recs, ab, err := p.ReadCommitted(off, 1<<20)
		require.NoError(t, err, "%s: read_committed at %d", where, off)
		if len(recs.Bytes()) == 0 {
			_ = recs.Close()
			break
		}
		require.LessOrEqual(t, recs.NextOffset(), wantLSO, "%s: read_committed at %d returned past the LSO", where, off)
		for _, a := range ab {
			if !slices.Contains(got, a) {
				got = append(got, a)
			}
		}
		off = recs.NextOffset()
		_ = recs.Close()
	}
	var want []plog.AbortedTxn
	for _, a := range o.aborted {
		if a.FirstOffset < off {
			want = append(want, a)
		}
	}
	slices.SortFunc(got, func(a, b plog.AbortedTxn) int { return int(a.LastOffset - b.LastOffset) })
	if len(got) > 0 || len(want) > 0 {
		require.Equal(t, want, got, "%s: read_committed reported aborted", where)
	}
	if !files {
		return
	}
	var onDisk []plog.AbortedTxn
	names, err := fsys.List(dir)
	require.NoError(t, err, where)
	slices.Sort(names)
	for _, n := range names {
		if !strings.HasSuffix(n, segment.TxnIndexSuffix) {
			continue
		}
		// A crash can lose a new segment's .log and keep its companions:
		// no segment reads them (a segment created at that base again
		// removes them first).
		if !slices.Contains(names, strings.TrimSuffix(n, segment.TxnIndexSuffix)+segment.LogSuffix) {
			continue
		}
		f, err := fsys.Open(filepath.Join(dir, n))
		require.NoError(t, err, where)
		data, err := io.ReadAll(f)
		_ = f.Close()
		require.NoError(t, err, where)
		entries, err := segment.DecodeTxnIndex(n, data)
		require.NoError(t, err, where)
		onDisk = append(onDisk, entries...)
	}
	if len(onDisk) > 0 || len(o.aborted) > 0 {
		require.Equal(t, o.aborted, onDisk, "%s: .txnindex files", where)
	}
}

// Group commit cycles.

// groupCycle sets up one group commit cycle with queued appenders: a
// partition under FlushMessages 1 holding one synced batch, whose next
// fdatasync of the .log (the first appender's, A0) is held in the FS hook
// while queued more appenders append: they queue their batches (group
// writes) and wait for the next sync. The caller then installs its own
// hook or failure rule, calls release, and waits with wait.
type groupCycle struct {
	mem     *vfs.MemFS
	in      *vfs.Injector
	p       *plog.Partition
	dir     string
	batches [][]byte // by appender: A0 first
	release func()
	// results are the appenders' (base, err), filled by wait.
	bases []int64
	errs  []error
	wg    sync.WaitGroup
	// acked is the end of the acknowledged batches: raised by each
	// appender as its append returns.
	acked atomic.Int64
}

// ack raises acked to next.
func (c *groupCycle) ack(next int64) {
	for {
		old := c.acked.Load()
		if next <= old || c.acked.CompareAndSwap(old, next) {
			return
		}
	}
}

// wait waits for every appender.
func (c *groupCycle) wait() { c.wg.Wait() }

// checkPrefix checks the law of a crash on q, opened from what survived:
// its batches are appended batches, each at most once, in an order that
// keeps every successful append's offset, and they hold every batch up to
// acked (all acknowledged appends). q's log must also pass Verify.
func (c *groupCycle) checkPrefix(t *testing.T, q *plog.Partition, acked int64, what string) {
	t.Helper()
	require.NoError(t, q.Verify(), what)
	require.GreaterOrEqual(t, q.LogEndOffset(), acked, "%s: an acknowledged batch is lost", what)
	r, err := q.ReadFromFollower(0, 1<<20)
	require.NoError(t, err, what)
	defer func() { require.NoError(t, r.Close()) }()
	used := make([]bool, len(c.batches))
	next := int64(0)
	for rest := r.Bytes(); len(rest) > 0; {
		bt, tail, err := batch.Parse(rest)
		require.NoError(t, err, what)
		require.Equal(t, next, bt.BaseOffset(), "%s: a gap", what)
		found := -1
		for i, b := range c.batches {
			// Bytes from the magic on: the offset and epoch are the
			// partition's.
			if !used[i] && bytes.Equal(b[16:], bt[16:]) {
				found = i
				break
			}
		}
		require.GreaterOrEqual(t, found, 0, "%s: batch at %d was never appended", what, bt.BaseOffset())
		used[found] = true
		if found > 0 && c.errs[found] == nil {
			require.Equal(t, c.bases[found], bt.BaseOffset(), "%s: appender %d's batch moved", what, found)
		}
		next, rest = bt.NextOffset(), tail
	}
	require.Equal(t, q.LogEndOffset(), next, what)
}

func newGroupCycle(t *testing.T, queued int) *groupCycle {
	t.Helper()
	c := &groupCycle{mem: vfs.NewMem(), dir: "/data/groupwrite-0"}
	c.in = vfs.NewInjector(c.mem)
	// The batches carry timestamps of 1970 (no time roll between them):
	// an expiration longer than that keeps their producers known.
	p, err := plog.Open(c.dir, plog.Config{FS: c.in, FlushMessages: 1, ProducerIDExpiration: 100 * 365 * 24 * time.Hour})
	require.NoError(t, err)
	c.p = p
	first := logtest.MakeBatch(2, 40, 1, 0)
	_, err = p.AppendBatch(first)
	require.NoError(t, err)
	c.batches = append(c.batches, first)
	c.acked.Store(p.LogEndOffset())

	var held atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	c.in.SetHook(func(op vfs.Op) error {
		if op.Kind == vfs.OpSync && strings.HasSuffix(op.Path, segment.LogSuffix) && held.CompareAndSwap(false, true) {
			close(entered)
			<-release
		}
		return nil
	})
	c.release = func() { close(release) }
	n := 1 + queued
	c.bases, c.errs = make([]int64, n+1), make([]error, n+1)
	start := func(i int) {
		b := logtest.MakeBatch(1+i%3, 30, int64(10+i), byte(i))
		c.batches = append(c.batches, b)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.bases[i], c.errs[i] = p.AppendBatch(b)
			if c.errs[i] == nil {
				c.ack(c.bases[i] + int64(batchRecords(b)))
			}
		}()
	}
	start(1)
	<-entered // A0's batch is written, its fdatasync held
	before := p.Stats().BatchesAppended
	for i := 2; i <= n; i++ {
		start(i)
	}
	// Wait (without a clock) until every appender queued its batch.
	for p.Stats().BatchesAppended < before+int64(queued) {
		runtime.Gosched()
	}
	return c
}

// batchRecords returns a producer batch's record count.
func batchRecords(b []byte) int {
	return int(uint32(b[57])<<24 | uint32(b[58])<<16 | uint32(b[59])<<8 | uint32(b[60]))
}

// Small-record benchmarks.

const (
	smallRecordSize = 100 // bytes of value per record
	smallBatchLen   = 100 // records per append
)

// smallValue is the 100-byte value every small record carries.
func smallValue() []byte {
	v := make([]byte, smallRecordSize)
	for i := range v {
		v[i] = byte(i*7 + 3)
	}
	return v
}

// smallReadRecords is how many one-record batches the read benchmark's
// log holds (about 17 MiB: the page cache holds it).
const smallReadRecords = 100_000

var sink int

// txnOracle is what the transactions of a log must be, computed from the
// log's batches alone (Kafka's rules, written out again here): the open
// transactions, the aborted ones with the last stable offset after their
// marker.
type txnOracle struct {
	open    []plog.OpenTxn // by first offset; StartTimestamp not compared
	aborted []plog.AbortedTxn
}

// txnOracleOf replays every batch of p (read as a follower, up to the log
// end) through the rules.
func txnOracleOf(t testing.TB, p *plog.Partition) txnOracle {
	t.Helper()
	var o txnOracle
	for off := p.LogStartOffset(); off < p.LogEndOffset(); {
		recs, err := p.ReadFromFollower(off, 1<<20)
		require.NoError(t, err, "oracle read at %d", off)
		for rest := recs.Bytes(); len(rest) > 0; {
			bt, r, err := batch.Parse(rest)
			require.NoError(t, err, "oracle parse")
			rest = r
			o.observe(t, bt)
		}
		off = recs.NextOffset()
		_ = recs.Close()
	}
	return o
}

func (o *txnOracle) observe(t testing.TB, bt batch.Batch) {
	pid := bt.ProducerID()
	if pid < 0 || !bt.Attributes().IsTransactional() {
		return
	}
	i := slices.IndexFunc(o.open, func(x plog.OpenTxn) bool { return x.ProducerID == pid })
	if !bt.Attributes().IsControl() {
		if i < 0 {
			o.open = append(o.open, plog.OpenTxn{ProducerID: pid, FirstOffset: bt.BaseOffset()})
		}
		return
	}
	if i < 0 {
		return // a marker with no open transaction ends nothing
	}
	first := o.open[i].FirstOffset
	o.open = slices.Delete(o.open, i, i+1)
	var dec batch.Decoder
	for r, err := range bt.All(&dec) {
		require.NoError(t, err, "oracle: marker")
		cr, err := batch.ParseControlRecord(r)
		require.NoError(t, err, "oracle: marker")
		if cr.Type == batch.ControlAbort {
			lso := bt.BaseOffset() + 1
			if len(o.open) > 0 {
				lso = o.open[0].FirstOffset
			}
			o.aborted = append(o.aborted, plog.AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: bt.BaseOffset(), LastStableOffset: lso})
		}
		break
	}
}

// recordTimes returns (offset, timestamp) of every record of a record
// set, control records included.
func recordTimes(t *testing.T, set []byte) [][2]int64 {
	t.Helper()
	var out [][2]int64
	walkRecords(t, set, false, func(r batch.Record) { out = append(out, [2]int64{r.Offset, r.Timestamp}) })
	return out
}

// snap encodes entries as a producer snapshot file.
func snap(entries []producer.Entry) []byte {
	return producer.AppendSnapshot(nil, entries)
}

// tierDirConfig is a Dir of small segments tiered to st, keeping locally
// only what local retention of one byte keeps: the active segment and the
// segments not copied yet. Passes run only when the test runs them.
func tierDirConfig(fs vfs.FS, st plog.RemoteStorage) plog.DirConfig {
	return plog.DirConfig{
		Config: plog.Config{FS: fs, SegmentBytes: 1024, SegmentIndexBytes: 1024,
			Logger: slog.New(slog.DiscardHandler)},
		Remote: &plog.RemoteConfig{Storage: st, LocalRetentionBytes: 1, Interval: time.Hour, ChunkBytes: 700, CacheBytes: 4 << 10},
	}
}

// readAllBatches reads the partition from offset from to its high
// watermark with ReadFrom and returns the bytes read, batch by batch.
func readAllBatches(t *testing.T, p *plog.Partition, from int64) []byte {
	t.Helper()
	var out []byte
	for next := from; next < p.HighWatermark(); {
		r, err := p.ReadFrom(next, 300)
		require.NoError(t, err, "ReadFrom %d", next)
		require.NotEmpty(t, r.Bytes(), "ReadFrom %d", next)
		out = append(out, r.Bytes()...)
		next = r.NextOffset()
		require.NoError(t, r.Close())
	}
	return out
}

// openWrittenDir opens a Dir on fs (a MemFS, perhaps under an Injector)
// and appends one producer batch of five records to each of partitions
// t-0..t-(parts-1), unsynced (the default flush policy). It returns the
// Dir and the batches.
func openWrittenDir(t *testing.T, parts int, cfg plog.DirConfig) (*plog.Dir, [][]byte) {
	t.Helper()
	d, err := plog.OpenDir("/data", cfg)
	require.NoError(t, err)
	batches := make([][]byte, parts)
	for i := range parts {
		p, err := d.CreatePartition("t", int32(i))
		require.NoError(t, err)
		batches[i] = prodBatch(t, int64(100+i), 0, 0, 5, pbNow(), false)
		_, err = p.AppendBatch(batches[i])
		require.NoError(t, err)
	}
	return d, batches
}

// unsyncedDir is openWrittenDir on a MemFS, then the Dir stopped without
// syncing anything more: its MemFS holds the batches unsynced (a
// process that died and left them to the page cache) and no clean-shutdown
// marker. It returns the MemFS and the batches.
func unsyncedDir(t *testing.T, parts int, cfg plog.DirConfig) (*vfs.MemFS, [][]byte) {
	t.Helper()
	mem := vfs.NewMem()
	in := vfs.NewInjector(mem)
	cfg.Config.FS = in
	d, batches := openWrittenDir(t, parts, cfg)
	in.Add(vfs.Rule{Kinds: vfs.MutatingOps, Times: -1}) // the process dies: nothing more is written
	require.Error(t, d.Close())
	return mem, batches
}

// requireRecovered checks that every partition of d holds its batch whole:
// the log end, the producer state (a retry is answered with its original
// offsets) and the lookup by time.
func requireRecovered(t *testing.T, d *plog.Dir, batches [][]byte) {
	t.Helper()
	for i := range batches {
		p := d.Partition("t", int32(i))
		require.NotNil(t, p, "partition %d", i)
		require.Equal(t, int64(5), p.LogEndOffset(), "partition %d", i)
		info, err := p.AppendBatchInfo(batches[i])
		require.NoError(t, err)
		assert.Equal(t, plog.AppendInfo{Base: 0, LastOffset: 4, Duplicate: true}, info, "partition %d: the retry", i)
		assert.Equal(t, int64(5), p.LogEndOffset(), "partition %d", i)
		to, found, err := p.OffsetForTimestamp(batch.Batch(batches[i]).MaxTimestamp())
		require.NoError(t, err)
		require.True(t, found, "partition %d: the batch by its largest timestamp", i)
		assert.Equal(t, int64(4), to.Offset, "partition %d: offset of the largest timestamp", i)
	}
}

// requirePrefixes checks that every partition of d holds a prefix of its
// batch, whole or nothing (a batch is cut whole), and returns their log
// ends.
func requirePrefixes(t *testing.T, d *plog.Dir, batches [][]byte) []int64 {
	t.Helper()
	ends := make([]int64, len(batches))
	for i := range batches {
		p := d.Partition("t", int32(i))
		require.NotNil(t, p, "partition %d", i)
		ends[i] = p.LogEndOffset()
		require.Contains(t, []int64{0, 5}, ends[i], "partition %d: a prefix of its batch", i)
		if ends[i] == 5 {
			got := readAllBatches(t, p, 0)
			require.Len(t, got, len(batches[i]), "partition %d: the batch", i)
			// Bytes 12-15, the partition leader epoch, are the partition's.
			require.Equal(t, batches[i][:12], got[:12], "partition %d: the batch", i)
			require.Equal(t, batches[i][16:], got[16:], "partition %d: the batch", i)
		}
	}
	return ends
}

// crashAtFilesystemSync makes in fail a SyncFilesystems call (the first
// for an even seed, the second for an odd one; the Dir's probe, with no
// directories, passes) as a machine crash would stop it: the MemFS it
// returns is what mem held then, crashed with the seed (a share of the
// unsynced writes kept, some torn).
func crashAtFilesystemSync(in *vfs.Injector, mem *vfs.MemFS, seed uint64) **vfs.MemFS {
	var atSync *vfs.MemFS
	calls := uint64(0)
	in.SetHook(func(op vfs.Op) error {
		if op.Kind != vfs.OpSyncFilesystems || op.Path == "" || atSync != nil {
			return nil
		}
		if calls++; calls < 1+seed%2 {
			return nil
		}
		atSync = mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: int(seed * 9), TornPercent: 30, Seed: seed})
		return fmt.Errorf("%w: the machine stops", vfs.ErrInjected)
	})
	return &atSync
}

// holdFirstLogSync makes the first fdatasync of a .log through in wait
// until release is closed, and closes the returned channel when it starts
// waiting; other .log syncs meanwhile wait for it to end (sync.Once). It
// replaces in's hook.
func holdFirstLogSync(in *vfs.Injector, release <-chan struct{}) (reached <-chan struct{}) {
	inSync := make(chan struct{})
	var once sync.Once
	in.SetHook(func(op vfs.Op) error {
		if op.Kind == vfs.OpSync && strings.HasSuffix(op.Path, segment.LogSuffix) {
			once.Do(func() {
				close(inSync)
				<-release
			})
		}
		return nil
	})
	return inSync
}
