package main

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/segment"
)

// Sizes of the on-disk structures dumplog decodes itself (frozen: Kafka's
// formats).
const (
	offsetEntry   = index.OffsetEntrySize // int32 relative offset, int32 position
	timeEntry     = index.TimeEntrySize   // int64 timestamp, int32 relative offset
	maxIndexBytes = 1 << 30               // refuse to read a larger index file
)

// span is what the index checks need to know about one batch of a segment.
type span struct {
	pos, size    int64
	base, last   int64
	maxTimestamp int64
	// The transaction the batch belongs to (for the .txnindex checks):
	// txn for a transactional data batch, marker for a transaction marker
	// (abort tells which), of producer pid.
	pid                int64
	txn, marker, abort bool
}

// txnOf fills in sp's transaction fields from the RecordBatch b.
func (d *dumper) txnOf(sp span, b batch.Batch) span {
	attrs := b.Attributes()
	if !attrs.IsTransactional() {
		return sp
	}
	sp.pid = b.ProducerID()
	if !attrs.IsControl() {
		sp.txn = true
		return sp
	}
	if b.RecordsCount() == 0 {
		return sp
	}
	for r, err := range b.All(&d.dec) {
		if err != nil {
			return sp
		}
		if cr, err := batch.ParseControlRecord(r); err == nil && cr.Type.IsTxnMarker() {
			sp.marker, sp.abort = true, cr.Type == batch.ControlAbort
		}
		return sp
	}
	return sp
}

// dumper prints what it reads to out and counts problems. Not safe for
// concurrent use.
type dumper struct {
	o    options
	out  *bufio.Writer
	errw io.Writer
	dec  batch.Decoder

	// open maps a producer id to the first offset of its open transaction,
	// replayed over the segments dumped so far (the .txnindex checks).
	open map[int64]int64

	problems, infos int
	segments        int
	batches         int64

	// progress
	start, lastReport     time.Time
	totalBytes, doneBytes int64
	totalSegs             int
}

func newDumper(o options, stdout, stderr io.Writer) *dumper {
	now := time.Now()
	return &dumper{o: o, out: bufio.NewWriterSize(stdout, 64<<10), errw: stderr, start: now, lastReport: now}
}

// printf prints unless --verify --quiet asked for problems only.
func (d *dumper) printf(format string, args ...any) {
	if d.o.quiet && d.o.verify {
		return
	}
	fmt.Fprintf(d.out, format, args...)
}

// problem reports a finding that makes --verify fail.
func (d *dumper) problem(path string, pos int64, format string, args ...any) {
	d.problems++
	if pos >= 0 {
		fmt.Fprintf(d.out, "PROBLEM: %s position %d: %s\n", path, pos, fmt.Sprintf(format, args...))
	} else {
		fmt.Fprintf(d.out, "PROBLEM: %s: %s\n", path, fmt.Sprintf(format, args...))
	}
}

// info reports something worth knowing that is not a problem (compaction gaps,
// preallocated index space, missing indexes that a broker rebuilds).
func (d *dumper) info(path string, format string, args ...any) {
	d.infos++
	if d.o.verify {
		d.printf("INFO: %s: %s\n", path, fmt.Sprintf(format, args...))
	}
}

// finish flushes the output and returns the exit status.
func (d *dumper) finish() int {
	if d.o.verify {
		fmt.Fprintf(d.out, "verify: %d segments, %d batches, %d problems, %d infos\n", d.segments, d.batches, d.problems, d.infos)
	}
	if err := d.out.Flush(); err != nil {
		fmt.Fprintf(d.errw, "dumplog: %v\n", err)
		return 2
	}
	if d.progressShown() {
		fmt.Fprintf(d.errw, "dumplog: done: %d segments, %s in %v\n", d.segments, humanBytes(d.doneBytes), time.Since(d.start).Round(time.Millisecond))
	}
	if d.problems > 0 {
		return 1
	}
	return 0
}

func (d *dumper) progressShown() bool {
	return d.o.progress || time.Since(d.start) > time.Second
}

// maybeProgress reports progress on stderr at most once a second, once the
// run took more than a second (or always with --progress).
func (d *dumper) maybeProgress(force bool) {
	now := time.Now()
	if !d.o.progress && now.Sub(d.start) < time.Second {
		return
	}
	if !force && now.Sub(d.lastReport) < time.Second {
		return
	}
	d.lastReport = now
	fmt.Fprintf(d.errw, "dumplog: %d/%d segments, %s of %s\n", d.segments, d.totalSegs, humanBytes(d.doneBytes), humanBytes(d.totalBytes))
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// dumpPath dumps a segment file, a partition directory or a log directory.
func (d *dumper) dumpPath(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return d.dumpFile(p)
	}
	parts, err := partitionDirs(p)
	if err != nil {
		return err
	}
	for _, dir := range parts {
		d.addTotals(dir)
	}
	if len(parts) == 0 {
		d.printf("%s: no segments\n", p)
	}
	for _, dir := range parts {
		if err := d.dumpPartition(dir); err != nil {
			return err
		}
	}
	return nil
}

// partitionDirs returns dir itself when it holds .log files, else its
// sub-directories that do, in name order.
func partitionDirs(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	if hasLogs(ents) {
		return []string{dir}, nil
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		se, err := os.ReadDir(sub)
		if err != nil {
			return nil, err
		}
		if hasLogs(se) {
			out = append(out, sub)
		}
	}
	return out, nil
}

// hasLogs reports whether a directory listing holds a segment .log file.
func hasLogs(ents []os.DirEntry) bool {
	for _, e := range ents {
		if _, suf, ok := segment.ParseFileName(e.Name()); ok && suf == segment.LogSuffix && !e.IsDir() {
			return true
		}
	}
	return false
}

// addTotals adds a partition directory's segments to the progress totals.
func (d *dumper) addTotals(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if _, suf, ok := segment.ParseFileName(e.Name()); ok && suf == segment.LogSuffix {
			if fi, err := e.Info(); err == nil {
				d.totalBytes += fi.Size()
				d.totalSegs++
			}
		}
	}
}

// dumpFile dumps one file given by name.
func (d *dumper) dumpFile(p string) error {
	base, suf, ok := segment.ParseFileName(filepath.Base(p))
	if !ok {
		return fmt.Errorf("%s: not a segment file (NNNNNNNNNNNNNNNNNNNN.log, .index, .timeindex or .txnindex)", p)
	}
	dir := filepath.Dir(p)
	switch suf {
	case segment.LogSuffix:
		if fi, err := os.Stat(p); err == nil {
			d.totalBytes, d.totalSegs = fi.Size(), 1
		}
		next := int64(-1)
		_, err := d.dumpSegment(dir, base, p, &next, false)
		return err
	case segment.IndexSuffix, segment.TimeIndexSuffix, segment.TxnIndexSuffix:
		spans, size, err := d.scanLog(filepath.Join(dir, segment.FileName(base, segment.LogSuffix)), base)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		haveLog := err == nil
		switch suf {
		case segment.IndexSuffix:
			return d.offsetIndex(p, base, spans, size, haveLog)
		case segment.TimeIndexSuffix:
			return d.timeIndex(p, base, spans, haveLog)
		}
		d.open = nil // a segment alone: transactions are replayed from its start
		return d.txnIndex(p, base, spans, haveLog)
	}
	return fmt.Errorf("%s: dumplog reads .log, .index, .timeindex and .txnindex files, not %s", p, suf)
}

// dumpPartition dumps every segment of a partition directory in offset
// order and checks continuity across them.
func (d *dumper) dumpPartition(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var bases []int64
	indexes := make(map[int64][]string)
	for _, e := range ents {
		base, suf, ok := segment.ParseFileName(e.Name())
		switch {
		case !ok || e.IsDir():
		case suf == segment.LogSuffix:
			bases = append(bases, base)
		case suf == segment.IndexSuffix || suf == segment.TimeIndexSuffix || suf == segment.TxnIndexSuffix:
			indexes[base] = append(indexes[base], e.Name())
		case strings.HasSuffix(suf, segment.DeletedSuffix) || strings.HasSuffix(suf, segment.CleanedSuffix) || strings.HasSuffix(suf, segment.SwapSuffix):
			d.info(filepath.Join(dir, e.Name()), "temporary file of a deletion or compaction, skipped (a broker finishes or undoes it on start)")
		}
	}
	slices.Sort(bases)
	d.printf("Partition directory: %s (%d segments)\n", dir, len(bases))
	d.open = nil // transactions are replayed across the partition's segments
	next := int64(-1)
	for i, base := range bases {
		p := filepath.Join(dir, segment.FileName(base, segment.LogSuffix))
		if _, err := d.dumpSegment(dir, base, p, &next, i < len(bases)-1); err != nil {
			return err
		}
		delete(indexes, base)
	}
	for base, names := range indexes {
		for _, n := range names {
			d.info(filepath.Join(dir, n), "index without a .log file (segment %d); a broker deletes it", base)
		}
	}
	return nil
}

// dumpSegment prints (and checks) the batches of one .log file, then its
// indexes when asked. next is the partition's expected next offset (-1 when
// unknown) and is advanced past the segment's batches; sealed says a later
// segment follows (damage there is never a torn tail recovery may cut).
//
// The file is walked by segment.Check, the walk recovery uses, in its
// read-only KeepGoing mode: every entry that frames is printed and checked
// (a RecordBatch fully, records included; a legacy message with its inner
// messages), one that fails its checks is reported and the walk goes on
// after it; the walk ends where the bytes stop framing, and that damage is
// reported as recovery classifies it (torn tail, corruption, or legacy data
// recovery keeps).
func (d *dumper) dumpSegment(dir string, base int64, path string, next *int64, sealed bool) ([]span, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	d.printf("Dumping %s\n", path)
	d.printf("Starting offset: %d  size: %d\n", base, size)
	if size == 0 {
		d.info(path, "empty segment")
	}
	var spans []span
	first := true
	res, err := segment.Check(nil, path, base, segment.CheckOptions{Sealed: sealed, KeepGoing: true},
		func(h segment.BatchInfo, b batch.Batch, _ error) error {
			if isLegacyMagic(h.Magic) {
				spans = append(spans, d.dumpLegacy(path, h.Pos, base, legacyMessage(b), first, next))
			} else {
				spans = append(spans, d.dumpBatch(path, h.Pos, base, b, first, next))
			}
			first = false
			d.batches++
			d.doneBytes += h.Size
			if d.batches%1024 == 0 {
				d.maybeProgress(false)
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	if res.Cause != nil {
		d.problem(path, res.ValidBytes, "%s: %v", damageKind(res), res.Cause)
	}
	d.doneBytes += size - res.ValidBytes
	d.segments++
	d.maybeProgress(d.o.progress)
	if d.o.index || d.o.verify {
		if err := d.offsetIndex(filepath.Join(dir, segment.FileName(base, segment.IndexSuffix)), base, spans, size, true); err != nil {
			return nil, err
		}
		if err := d.timeIndex(filepath.Join(dir, segment.FileName(base, segment.TimeIndexSuffix)), base, spans, true); err != nil {
			return nil, err
		}
		if err := d.txnIndex(filepath.Join(dir, segment.FileName(base, segment.TxnIndexSuffix)), base, spans, true); err != nil {
			return nil, err
		}
	}
	return spans, nil
}

// damageKind says what recovery makes of the damage res ends at.
func damageKind(res segment.RecoverResult) string {
	switch {
	case res.Kept:
		return "legacy data recovery cannot prove torn (recovery refuses to cut it)"
	case errors.Is(res.Cause, segment.ErrTornTail):
		return "torn tail (recovery would truncate it)"
	}
	return "corruption (recovery would cut here and drop every later segment)"
}

// dumpBatch prints and checks the RecordBatch b at pos (framing, CRC-32C,
// records: batch.Decoder.Validate; offsets: checkContinuity) and with
// --records its records. It returns its span.
func (d *dumper) dumpBatch(path string, pos, base int64, b batch.Batch, first bool, next *int64) span {
	verr := d.dec.Validate(b)
	d.printBatch(b, pos, verr)
	if verr != nil {
		d.problem(path, pos, "batch at offset %d: %v", b.BaseOffset(), verr)
	}
	d.checkContinuity(path, pos, base, b.BaseOffset(), b.LastOffset(), first, next)
	if d.o.records && !(d.o.verify && d.o.quiet) {
		d.printRecords(path, pos, b, verr)
	}
	sp := span{pos: pos, size: int64(len(b)), base: b.BaseOffset(), last: b.LastOffset(), maxTimestamp: b.MaxTimestamp()}
	if verr == nil {
		sp = d.txnOf(sp, b)
	}
	return sp
}

// checkContinuity checks a batch's offsets [bo, last] against the
// segment's base and the previous batch.
func (d *dumper) checkContinuity(path string, pos, base, bo, last int64, first bool, next *int64) {
	if bo < base {
		d.problem(path, pos, "batch base offset %d is below the segment's base offset %d", bo, base)
	} else if last-base > math.MaxInt32 {
		d.problem(path, pos, "batch last offset %d is more than MaxInt32 past the segment base %d", last, base)
	}
	if first && bo > base {
		d.info(path, "first batch starts at offset %d, above the segment's base offset %d (compaction or retention removed records)", bo, base)
	}
	if *next >= 0 {
		switch {
		case bo < *next:
			d.problem(path, pos, "batch at offset %d overlaps or goes backwards: the previous batch ended at %d", bo, *next-1)
		case bo > *next && !first:
			d.info(path, "offset gap %d..%d before position %d (compaction leaves gaps)", *next, bo-1, pos)
		case bo > *next && first:
			d.info(path, "offset gap %d..%d between segments", *next, bo-1)
		}
	}
	if last >= *next {
		*next = last + 1
	}
}

// legacySpan describes the legacy message e at pos: the offsets it covers
// (a compressed wrapper's from its first inner message, or from its own
// offset when the inner messages do not decode) and its timestamp (-1
// under magic 0).
func (d *dumper) legacySpan(pos int64, e legacyMessage) span {
	first := e.Offset()
	if f, err := d.dec.LegacyBaseOffset(e); err == nil && f <= first {
		first = f
	}
	return span{pos: pos, size: int64(len(e)), base: first, last: e.Offset(), maxTimestamp: e.Timestamp()}
}

// dumpLegacy prints and checks a legacy message (magic 0 or 1, written by
// Kafka before 0.11): its fields, its CRC-32 (IEEE) and inner messages
// (batch.Decoder.ValidateLegacy), its offsets against the segment and the previous
// entry, and with --records its records. It returns its span.
func (d *dumper) dumpLegacy(path string, pos, base int64, e legacyMessage, first bool, next *int64) span {
	verr := d.dec.ValidateLegacy(e)
	sp := d.legacySpan(pos, e)
	if !(d.o.verify && d.o.quiet) {
		tsType := "CreateTime"
		if e.LogAppendTime() {
			tsType = "LogAppendTime"
		}
		d.printf("baseOffset: %d lastOffset: %d position: %d size: %d magic: %d codec: %s crc: %d crcValid: %t valid: %t %s timestamp: %d (legacy message)\n",
			sp.base, sp.last, pos, len(e), e.Magic(), batch.Compression(e.Compression()), e.CRC(), e.ComputeCRC() == e.CRC(), verr == nil, tsType, e.Timestamp())
	}
	if verr != nil {
		d.problem(path, pos, "legacy message (magic %d) at offset %d: %v", e.Magic(), e.Offset(), verr)
	}
	d.checkContinuity(path, pos, base, sp.base, sp.last, first, next)
	if d.o.records && !(d.o.verify && d.o.quiet) && verr == nil {
		recs, err := d.dec.AppendLegacyRecords(nil, e, false)
		if err != nil {
			d.printf("| (records unreadable: %v)\n", err)
		}
		for _, rec := range recs {
			d.printf("| offset: %d timestamp: %d keySize: %d valueSize: %d key: %s value: %s\n",
				rec.Offset, rec.Timestamp, sizeOf(rec.Key), sizeOf(rec.Value), d.show(rec.Key), d.show(rec.Value))
		}
	}
	return sp
}

// printBatch prints a batch's header fields and whether it is valid.
func (d *dumper) printBatch(bt batch.Batch, pos int64, verr error) {
	if d.o.verify && d.o.quiet {
		return
	}
	h := bt.Header()
	tsType := "CreateTime"
	if h.Attributes.LogAppendTime() {
		tsType = "LogAppendTime"
	}
	horizon := "-"
	baseTS := h.BaseTimestamp
	if h.Attributes.HasDeleteHorizon() {
		horizon = strconv.FormatInt(h.BaseTimestamp, 10)
	}
	crcOK := bt.ComputeCRC() == h.CRC
	d.printf("baseOffset: %d lastOffset: %d count: %d position: %d size: %d magic: %d codec: %s crc: %d crcValid: %t valid: %t "+
		"%s baseTimestamp: %d maxTimestamp: %d producerId: %d producerEpoch: %d baseSequence: %d lastSequence: %d "+
		"partitionLeaderEpoch: %d isTransactional: %t isControl: %t deleteHorizonMs: %s\n",
		h.BaseOffset, bt.LastOffset(), h.RecordsCount, pos, bt.Size(), h.Magic, h.Attributes.Compression(), h.CRC, crcOK, verr == nil,
		tsType, baseTS, h.MaxTimestamp, h.ProducerID, h.ProducerEpoch, h.BaseSequence, bt.LastSequence(),
		h.PartitionLeaderEpoch, h.Attributes.IsTransactional(), h.Attributes.IsControl(), horizon)
}

// printRecords prints every record of a batch (--records).
func (d *dumper) printRecords(path string, pos int64, bt batch.Batch, verr error) {
	if verr != nil && !errors.Is(verr, batch.ErrCorrupt) {
		return
	}
	control := bt.Attributes().IsControl()
	tsType := "CreateTime"
	if bt.Attributes().LogAppendTime() {
		tsType = "LogAppendTime"
	}
	it := bt.Records(&d.dec)
	for {
		rec, ok, err := it.Next()
		if err != nil {
			if verr == nil {
				d.problem(path, pos, "records of batch at offset %d: %v", bt.BaseOffset(), err)
			} else {
				d.printf("| (records unreadable: %v)\n", err)
			}
			return
		}
		if !ok {
			return
		}
		if control {
			cr, err := batch.ParseControlRecord(rec)
			if err != nil {
				d.printf("| offset: %d %s: %d control: (bad: %v)\n", rec.Offset, tsType, rec.Timestamp, err)
				continue
			}
			if !cr.Type.IsTxnMarker() { // a KRaft control record: its value is its own
				d.printf("| offset: %d %s: %d control: %s value: %s\n", rec.Offset, tsType, rec.Timestamp, cr.Type, d.show(rec.Value))
				continue
			}
			d.printf("| offset: %d %s: %d control: %s coordinatorEpoch: %d\n", rec.Offset, tsType, rec.Timestamp, cr.Type, cr.CoordinatorEpoch)
			continue
		}
		var hs strings.Builder
		for i, h := range rec.Headers {
			if i > 0 {
				hs.WriteString(", ")
			}
			hs.WriteString(d.show(h.Key))
			hs.WriteString("=")
			hs.WriteString(d.show(h.Value))
		}
		key, value := d.show(rec.Key), d.show(rec.Value)
		if d.o.offsets {
			if k, ok := decodeOffsetsKey(rec.Key); ok {
				key = k
				if v, ok := decodeOffsetsValue(rec.Key, rec.Value); ok {
					value = v
				}
			}
		}
		d.printf("| offset: %d %s: %d keySize: %d valueSize: %d key: %s value: %s headers: [%s]\n",
			rec.Offset, tsType, rec.Timestamp, sizeOf(rec.Key), sizeOf(rec.Value), key, value, hs.String())
	}
}

func sizeOf(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}

// show formats bytes: null, printable UTF-8 as a quoted string, anything else
// as 0x-hex; longer than --max-value is cut with a note.
func (d *dumper) show(b []byte) string {
	if b == nil {
		return "null"
	}
	cut := ""
	if d.o.maxValue > 0 && len(b) > d.o.maxValue {
		cut = fmt.Sprintf("...(%d bytes)", len(b))
		b = b[:d.o.maxValue]
	}
	if printable(b) {
		return strconv.Quote(string(b)) + cut
	}
	return "0x" + hex.EncodeToString(b) + cut
}

// printable reports whether b is UTF-8 text without control characters.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) && r != ' ' {
			return false
		}
	}
	return true
}

// scanLog describes the entries of a .log file (for checking an index given
// alone) without printing them: segment.Check's read-only walk, every
// entry that frames, valid or not.
func (d *dumper) scanLog(path string, base int64) ([]span, int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, 0, err
	}
	var spans []span
	_, err = segment.Check(nil, path, base, segment.CheckOptions{KeepGoing: true},
		func(h segment.BatchInfo, b batch.Batch, bad error) error {
			if h.BaseOffset >= 0 {
				sp := span{pos: h.Pos, size: h.Size, base: h.BaseOffset, last: h.LastOffset, maxTimestamp: h.MaxTimestamp}
				if bad == nil && !isLegacyMagic(h.Magic) {
					sp = d.txnOf(sp, b)
				}
				spans = append(spans, sp)
			}
			return nil
		})
	return spans, fi.Size(), err
}

// readIndex reads an index file read-only. A missing file gives nil, false.
func readIndex(path string) ([]byte, bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	if fi.Size() > maxIndexBytes {
		return nil, false, fmt.Errorf("%s: %d bytes is larger than any index", path, fi.Size())
	}
	b := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, false, err
	}
	return b, true, nil
}

// usedEntries returns how many entries of an index are in use: Kafka
// preallocates index files, so the entries end at the first slot that is all
// zeros when every byte after it is zero too. An all-zero first slot is an
// offset entry for the base offset at position 0, which Kafka never writes,
// or a time entry for timestamp 0 at the base offset, which Kafka and
// partlog write when the segment's largest timestamp is 0 (records stamped
// 0): it counts as an entry when it is the file's only slot, the length a
// closed segment's index is trimmed to, and as a preallocated slot
// otherwise. stale is set when a zero slot other than the first is
// followed by non-zero bytes (not a preallocated tail).
func usedEntries(b []byte, entrySize int) (n int, unused int, stale bool) {
	total := len(b) / entrySize
	for i := 0; i < total; i++ {
		slot := b[i*entrySize : (i+1)*entrySize]
		if !allZero(slot) {
			continue
		}
		if i == 0 && total == 1 {
			return total, 0, false
		}
		if allZero(b[i*entrySize:]) {
			return i, total - i, false
		}
		if i > 0 {
			return total, 0, true
		}
	}
	return total, 0, false
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// batchAt returns the span holding offset (base <= offset <= last).
func batchAt(spans []span, offset int64) (span, bool) {
	i, _ := slices.BinarySearchFunc(spans, offset, func(s span, off int64) int {
		switch {
		case s.last < off:
			return -1
		case s.base > off:
			return 1
		}
		return 0
	})
	if i < len(spans) && spans[i].base <= offset && offset <= spans[i].last {
		return spans[i], true
	}
	return span{}, false
}

// openIndex reads an index file of entrySize-byte entries, prints its
// heading and reports what is wrong with its length and slots. It returns
// the bytes and the number of used entries; ok is false when the file is
// missing (an info line when the segment has batches: a broker rebuilds
// it).
func (d *dumper) openIndex(path, kind string, entrySize int, haveBatches bool) (b []byte, n int, ok bool, err error) {
	b, ok, err = readIndex(path)
	if err != nil {
		return nil, 0, false, err
	}
	if !ok {
		if d.o.index {
			d.printf("Dumping %s: missing\n", path)
		}
		if haveBatches {
			d.info(path, "missing %s (a broker rebuilds it)", kind)
		}
		return nil, 0, false, nil
	}
	if d.o.index {
		d.printf("Dumping %s\n", path)
	}
	if len(b)%entrySize != 0 {
		d.problem(path, int64(len(b)-len(b)%entrySize), "index length %d is not a multiple of %d", len(b), entrySize)
	}
	n, unused, stale := usedEntries(b, entrySize)
	if stale {
		d.problem(path, -1, "an empty slot is followed by entries")
	}
	if unused > 0 {
		d.info(path, "%d preallocated slots after %d entries", unused, n)
	}
	return b, n, true, nil
}

// offsetIndex prints and checks a .index file against the segment's
// batches: entries increase, each points at a batch start and names an
// offset inside that batch or a later one. Kafka before 4.0 adds at most
// one entry per append, the append's largest offset at the position of its
// first batch, and a follower (or the cleaner) appends many batches at
// once; a lookup only needs every offset at or past the entry's to lie at
// or past its position.
func (d *dumper) offsetIndex(path string, base int64, spans []span, logSize int64, haveLog bool) error {
	b, n, ok, err := d.openIndex(path, "offset index", offsetEntry, len(spans) > 0)
	if err != nil || !ok {
		return err
	}
	starts := make(map[int64]span, len(spans))
	for _, s := range spans {
		starts[s.pos] = s
	}
	prevOff, prevPos := int64(-1), int64(-1)
	for i := range n {
		e := b[i*offsetEntry:]
		rel := int64(int32(binary.BigEndian.Uint32(e)))
		phys := int64(int32(binary.BigEndian.Uint32(e[4:])))
		off := base + rel
		if d.o.index {
			d.printf("offset: %d position: %d\n", off, phys)
		}
		if !d.o.verify {
			continue
		}
		at := int64(i * offsetEntry)
		switch {
		case rel < 0 || phys < 0:
			d.problem(path, at, "entry %d: negative relative offset %d or position %d", i, rel, phys)
			continue
		case off <= prevOff || phys <= prevPos:
			d.problem(path, at, "entry %d (offset %d, position %d) does not increase past (offset %d, position %d)", i, off, phys, prevOff, prevPos)
		}
		prevOff, prevPos = off, phys
		if !haveLog {
			continue
		}
		s, ok := starts[phys]
		switch {
		case phys >= logSize:
			d.problem(path, at, "entry %d: position %d is past the end of the log (%d bytes)", i, phys, logSize)
		case !ok:
			d.problem(path, at, "entry %d: position %d is not the start of a batch", i, phys)
		case off < s.base:
			d.problem(path, at, "entry %d: offset %d is before the batch at position %d (offsets %d..%d)", i, off, phys, s.base, s.last)
		default:
			if h, ok := batchAt(spans, off); !ok || h.pos < phys {
				d.problem(path, at, "entry %d: offset %d is in no batch at or after position %d (offsets %d..%d there)", i, off, phys, s.base, s.last)
			}
		}
	}
	return nil
}

// timeIndex prints and checks a .timeindex file: entries increase, each names
// an offset inside a batch of the segment whose max timestamp is the entry's
// timestamp.
func (d *dumper) timeIndex(path string, base int64, spans []span, haveLog bool) error {
	b, n, ok, err := d.openIndex(path, "time index", timeEntry, len(spans) > 0)
	if err != nil || !ok {
		return err
	}
	prevTS, prevOff := int64(math.MinInt64), int64(-1)
	for i := range n {
		e := b[i*timeEntry:]
		ts := int64(binary.BigEndian.Uint64(e))
		rel := int64(int32(binary.BigEndian.Uint32(e[8:])))
		off := base + rel
		if d.o.index {
			d.printf("timestamp: %d offset: %d\n", ts, off)
		}
		if !d.o.verify {
			continue
		}
		at := int64(i * timeEntry)
		if rel < 0 {
			d.problem(path, at, "entry %d: negative relative offset %d", i, rel)
			continue
		}
		if ts <= prevTS || off < prevOff {
			d.problem(path, at, "entry %d (timestamp %d, offset %d) does not increase past (timestamp %d, offset %d)", i, ts, off, prevTS, prevOff)
		}
		prevTS, prevOff = ts, off
		if !haveLog {
			continue
		}
		s, ok := batchAt(spans, off)
		switch {
		case !ok:
			d.problem(path, at, "entry %d: offset %d is in no batch of the segment", i, off)
		case s.maxTimestamp != ts:
			d.problem(path, at, "entry %d: timestamp %d, but the batch holding offset %d (offsets %d..%d, position %d) has max timestamp %d", i, ts, off, s.base, s.last, s.pos, s.maxTimestamp)
		}
	}
	return nil
}

// txnIndex prints (--index) and checks (--verify) a .txnindex file against
// the segment's batches (spans; haveLog false when the .log is missing):
// whole version-0 entries (segment.DecodeTxnIndex), marker offsets
// increasing and inside the segment, firstOffset <= lastOffset,
// lastStableOffset <= lastOffset+1, each entry at an ABORT marker of its
// producer (unless no batch holds that offset: compaction), and an entry
// for every transaction the batches show aborted (its transactional
// batches, then its producer's ABORT marker), with a first offset at or
// below the transaction's first batch. A missing file is what Kafka leaves
// for a segment without aborted transactions.
func (d *dumper) txnIndex(path string, base int64, spans []span, haveLog bool) error {
	aborted := d.replayTxns(spans)
	data, ok, err := readIndex(path)
	if err != nil {
		return err
	}
	if !ok {
		if d.o.verify && len(aborted) > 0 {
			a := aborted[0]
			d.problem(path, -1, "missing, but the segment's batches show %d aborted transactions (the first: producer %d, ABORT marker at offset %d)",
				len(aborted), a.ProducerID, a.LastOffset)
		}
		return nil
	}
	if d.o.index {
		d.printf("Dumping %s\n", path)
	}
	entries, derr := segment.DecodeTxnIndex(path, data)
	if derr != nil {
		var ce *batch.CorruptionError
		pos := int64(-1)
		if errors.As(derr, &ce) {
			pos = ce.Pos
		}
		d.problem(path, pos, "%v", derr)
	}
	next := base
	if len(spans) > 0 {
		next = spans[len(spans)-1].last + 1
	}
	prev := int64(-1)
	for i, e := range entries {
		if d.o.index {
			d.printf("version: 0 producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d\n",
				e.ProducerID, e.FirstOffset, e.LastOffset, e.LastStableOffset)
		}
		if !d.o.verify {
			continue
		}
		at := int64(i * segment.TxnIndexEntrySize)
		switch {
		case e.LastOffset <= prev:
			d.problem(path, at, "entry %d: marker offset %d does not increase past %d", i, e.LastOffset, prev)
		case e.LastOffset < base || (haveLog && e.LastOffset >= next):
			d.problem(path, at, "entry %d: marker offset %d is outside the segment's offsets [%d, %d)", i, e.LastOffset, base, next)
		case e.FirstOffset < 0 || e.FirstOffset > e.LastOffset:
			d.problem(path, at, "entry %d: first offset %d, marker offset %d", i, e.FirstOffset, e.LastOffset)
		case e.LastStableOffset < 0 || e.LastStableOffset > e.LastOffset+1:
			d.problem(path, at, "entry %d: last stable offset %d after marker offset %d", i, e.LastStableOffset, e.LastOffset)
		case haveLog:
			if s, ok := batchAt(spans, e.LastOffset); ok && (s.base != e.LastOffset || !s.marker || !s.abort || s.pid != e.ProducerID) {
				d.problem(path, at, "entry %d: the batch holding offset %d (offsets %d..%d, position %d) is not an ABORT marker of producer %d",
					i, e.LastOffset, s.base, s.last, s.pos, e.ProducerID)
			}
		}
		prev = max(prev, e.LastOffset)
	}
	if !d.o.verify || derr != nil {
		return nil
	}
	for _, a := range aborted {
		i := slices.IndexFunc(entries, func(e segment.AbortedTxn) bool { return e.LastOffset == a.LastOffset })
		switch {
		case i < 0:
			d.problem(path, -1, "no entry for the transaction of producer %d aborted at offset %d (first batch at %d)", a.ProducerID, a.LastOffset, a.FirstOffset)
		case entries[i].FirstOffset > a.FirstOffset:
			d.problem(path, int64(i*segment.TxnIndexEntrySize), "entry %d: first offset %d, the transaction's first batch is at %d", i, entries[i].FirstOffset, a.FirstOffset)
		}
	}
	return nil
}

// replayTxns replays the transactions of spans (a segment's batches, in
// order) on d.open and returns the transactions the segment's ABORT
// markers end that began in a batch the replay saw.
func (d *dumper) replayTxns(spans []span) []segment.AbortedTxn {
	if d.open == nil {
		d.open = make(map[int64]int64)
	}
	var aborted []segment.AbortedTxn
	for _, s := range spans {
		switch {
		case s.txn:
			if _, ok := d.open[s.pid]; !ok {
				d.open[s.pid] = s.base
			}
		case s.marker:
			if first, ok := d.open[s.pid]; ok && s.abort {
				aborted = append(aborted, segment.AbortedTxn{ProducerID: s.pid, FirstOffset: first, LastOffset: s.base})
			}
			delete(d.open, s.pid)
		}
	}
	return aborted
}
