package segment

import (
	"bytes"
	"errors"
	"io/fs"
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
)

func TestFileNames(t *testing.T) {
	if got := FileName(42, LogSuffix); got != "00000000000000000042.log" {
		t.Fatalf("FileName = %q", got)
	}
	for _, tc := range []struct {
		name   string
		base   int64
		suffix string
		ok     bool
	}{
		{"00000000000000000042.log", 42, ".log", true},
		{"00000000000000000000.index", 0, ".index", true},
		{"00000000000000000018.timeindex", 18, ".timeindex", true},
		{"00000000000000000007.log.deleted", 7, ".log.deleted", true},
		{"00000000000000000007.index.cleaned", 7, ".index.cleaned", true},
		{"00000000000000000007.timeindex.swap", 7, ".timeindex.swap", true},
		{"00000000000000000038.snapshot", 38, ".snapshot", true},
		{"00000000000000000038.txnindex", 38, ".txnindex", true},
		{"leader-epoch-checkpoint", 0, "", false},
		{"0000000000000000004.log", 0, "", false},
		{"0000000000000000004x.log", 0, "", false},
		{"00000000000000000004.lag", 0, "", false},
		{"00000000000000000004.log.bak", 0, "", false},
		{"00000000000000000004.log.deleted.deleted", 0, "", false},
		{"99999999999999999999.log", 0, "", false},
	} {
		base, suffix, ok := ParseFileName(tc.name)
		if ok != tc.ok || base != tc.base || suffix != tc.suffix {
			t.Errorf("ParseFileName(%q) = %d, %q, %v; want %d, %q, %v", tc.name, base, suffix, ok, tc.base, tc.suffix, tc.ok)
		}
	}
}

func TestAppendReadLookup(t *testing.T) {
	for _, k := range fsKinds {
		t.Run(k.name, func(t *testing.T) {
			fsys, dir := k.fs(t)
			mustMkdir(t, fsys, dir)
			cfg := k.cfg
			cfg.IndexIntervalBytes = 200
			s, err := Create(fsys, dir, 100, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer mustClose(t, s)
			if s.NextOffset() != 100 || s.Size() != 0 {
				t.Fatalf("empty segment: next %d size %d", s.NextOffset(), s.Size())
			}
			if ts, off := s.MaxTimestamp(); ts != -1 || off != -1 {
				t.Fatalf("empty MaxTimestamp = %d, %d", ts, off)
			}
			var batches []batch.Batch
			next := int64(100)
			for i := range 40 {
				n := 1 + i%5
				ts := int64(1000 + (i*37)%100) // timestamps go up and down
				b := simpleBatch(t, next+int64(i%3), n, ts, 10+i*7)
				batches = append(batches, b)
				mustAppend(t, s, b)
				next = b.NextOffset()
			}
			m := checkSegment(t, s)
			if len(m.batches) != len(batches) {
				t.Fatalf("%d batches, want %d", len(m.batches), len(batches))
			}
			if s.offIdx.Entries() == 0 || s.timeIdx.Entries() == 0 {
				t.Fatalf("no index entries: %d, %d", s.offIdx.Entries(), s.timeIdx.Entries())
			}
			checkLookups(t, s, m)
			if _, err := s.Append(batches[0]); !errors.Is(err, ErrOffsetNotIncreasing) {
				t.Fatalf("stale append: %v", err)
			}
			sizeBefore := s.Size()
			bad := simpleBatch(t, next, 2, 1, 10)
			for _, in := range []batch.Batch{bad[:50], bad[:len(bad)-1], append(bad[:len(bad):len(bad)], 0)} {
				if _, err := s.Append(in); !base.IsCorruption(err) {
					t.Fatalf("append of %d malformed bytes: %v", len(in), err)
				}
			}
			if _, err := s.Append(simpleBatch(t, 99, 1, 1, 1)); !errors.Is(err, ErrOffsetNotIncreasing) {
				t.Fatalf("append below the base: %v", err)
			}
			if s.Size() != sizeBefore {
				t.Fatal("a rejected append changed the segment")
			}

			// Read: whole batches, maxBytes, maxPosition, minOneBatch.
			b0, b1 := m.batches[0], m.batches[1]
			sl, err := s.Read(b0.BaseOffset(), len(b0)+len(b1), s.Size(), false)
			if err != nil || sl.Start != 0 || sl.End != int64(len(b0)+len(b1)) || sl.FirstOffset != b0.BaseOffset() || sl.NextOffset != b1.NextOffset() {
				t.Fatalf("Read two batches = %+v, %v", sl, err)
			}
			sl, _ = s.Read(b0.BaseOffset(), len(b0)+len(b1)-1, s.Size(), false)
			if sl.End != int64(len(b0)) {
				t.Fatalf("Read with a short budget = %+v", sl)
			}
			sl, _ = s.Read(b0.BaseOffset(), 1, s.Size(), false)
			if !sl.Empty() {
				t.Fatalf("Read below one batch = %+v", sl)
			}
			sl, _ = s.Read(b0.BaseOffset(), 1, s.Size(), true)
			if sl.Len() != int64(len(b0)) {
				t.Fatalf("Read minOneBatch = %+v", sl)
			}
			sl, _ = s.Read(b0.BaseOffset(), 1<<20, int64(len(b0))+5, true)
			if sl.End != int64(len(b0)) {
				t.Fatalf("Read bounded by maxPosition = %+v", sl)
			}
			sl, _ = s.Read(b1.BaseOffset(), 1<<20, int64(len(b0))+5, true)
			if !sl.Empty() {
				t.Fatalf("Read past maxPosition = %+v", sl)
			}
			sl, _ = s.Read(s.NextOffset(), 1<<20, s.Size(), true)
			if !sl.Empty() {
				t.Fatalf("Read at the end = %+v", sl)
			}
			sl, _ = s.Read(0, 1<<30, s.Size(), false)
			if sl.Start != 0 || sl.End != s.Size() {
				t.Fatalf("Read all = %+v", sl)
			}
			got, err := s.Bytes(sl.Start, sl.End, nil)
			if err != nil {
				t.Fatal(err)
			}
			var want []byte
			for _, b := range batches {
				want = append(want, b...)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("Bytes differ from what was appended")
			}
			if _, err := s.Bytes(0, s.Size()+1, nil); !errors.Is(err, ErrOutOfRange) {
				t.Fatalf("Bytes past the end: %v", err)
			}
			var buf bytes.Buffer
			if n, err := s.WriteTo(&buf, 0, s.Size()); err != nil || n != s.Size() || !bytes.Equal(buf.Bytes(), want) {
				t.Fatalf("WriteTo = %d, %v", n, err)
			}

			// Seal, reopen, same answers.
			if err := s.Seal(); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Append(simpleBatch(t, next, 1, 0, 1)); !errors.Is(err, ErrSealed) {
				t.Fatalf("append after seal: %v", err)
			}
			liveOff, liveTime := indexEntries(s)
			mustClose(t, s)
			if err := s.Close(); !errors.Is(err, ErrClosed) {
				t.Fatalf("second Close: %v", err)
			}
			s2, err := Open(fsys, dir, 100, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer mustClose(t, s2)
			m2 := checkSegment(t, s2)
			checkLookups(t, s2, m2)
			if !s2.Sealed() {
				t.Fatal("Open returned an active segment")
			}
			// Rebuilt indexes equal the live ones.
			for _, suffix := range []string{IndexSuffix, TimeIndexSuffix} {
				if err := fsys.Remove(segPath(dir, 100, suffix)); err != nil {
					t.Fatal(err)
				}
			}
			s3, err := Open(fsys, dir, 100, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer mustClose(t, s3)
			gotOff, gotTime := indexEntries(s3)
			if !equalEntries(gotOff, liveOff) || !equalEntries(gotTime, liveTime) {
				t.Fatalf("rebuilt indexes differ:\n%v\n%v\nlive:\n%v\n%v", gotOff, gotTime, liveOff, liveTime)
			}
			if err := s3.Unseal(); err != nil {
				t.Fatal(err)
			}
			mustAppend(t, s3, simpleBatch(t, next, 2, 5000, 10))
			checkLookups(t, s3, checkSegment(t, s3))
		})
	}
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

func TestOpenMissing(t *testing.T) {
	_, err := Open(vfs_NewMemForTest(t), "/x", 0, Config{})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open of a missing segment: %v", err)
	}
}

func TestShouldRoll(t *testing.T) {
	fsys := vfs_NewMemForTest(t)
	cfg := Config{MaxIndexBytes: 3 * 12, IndexIntervalBytes: -1}
	s, err := Create(fsys, "/x", 10, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer mustClose(t, s)
	now := time.Unix(1000, 0)
	b := simpleBatch(t, 10, 2, 5000, 100)
	if r := s.ShouldRoll(b, 100, time.Second, now); r != RollNone {
		t.Fatalf("empty segment rolls: %v", r)
	}
	mustAppend(t, s, b)
	if got := s.FirstBatchMaxTimestamp(); got != 5001 {
		t.Fatalf("FirstBatchMaxTimestamp = %d", got)
	}
	for _, tc := range []struct {
		name      string
		in        batch.Batch
		segBytes  int64
		rollAfter time.Duration
		want      RollReason
	}{
		{"fits", simpleBatch(t, 12, 1, 5001, 1), 1 << 20, time.Hour, RollNone},
		{"size", simpleBatch(t, 12, 1, 5001, 1), int64(len(b)) + 10, time.Hour, RollSize},
		{"time exactly rollAfter", simpleBatch(t, 12, 1, 6001, 1), 1 << 20, time.Second, RollNone},
		{"time past rollAfter", simpleBatch(t, 12, 1, 6002, 1), 1 << 20, time.Second, RollTime},
		{"time disabled", simpleBatch(t, 12, 1, 9e9, 1), 1 << 20, 0, RollNone},
		{"offset overflow", simpleBatch(t, 10+1<<31, 1, 5001, 1), 1 << 20, time.Hour, RollOffsetOverflow},
	} {
		if got := s.ShouldRoll(tc.in, tc.segBytes, tc.rollAfter, now); got != tc.want {
			t.Errorf("%s: ShouldRoll = %v, want %v", tc.name, got, tc.want)
		}
	}
	// Index full: 3 offset slots, 2 usable time slots.
	next := b.NextOffset()
	for i := 0; s.ShouldRoll(simpleBatch(t, next, 1, 6000+int64(i), 1), 1<<20, time.Hour, now) == RollNone; i++ {
		nb := simpleBatch(t, next, 1, 6000+int64(i), 1)
		mustAppend(t, s, nb)
		next = nb.NextOffset()
		if i > 10 {
			t.Fatal("never full")
		}
	}
	r := s.ShouldRoll(simpleBatch(t, next, 1, 7000, 1), 1<<20, time.Hour, now)
	if r != RollOffsetIndexFull && r != RollTimeIndexFull {
		t.Fatalf("full index: %v", r)
	}
	if _, err := s.Append(simpleBatch(t, next, 1, 7000, 1)); !errors.Is(err, ErrSegmentFull) {
		t.Fatalf("append to a full index: %v", err)
	}
	// Wall clock fallback when the first batch has no timestamp.
	s2, err := Create(fsys, "/x", 1000, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer mustClose(t, s2)
	nb := simpleBatch(t, 1000, 1, -1, 1)
	mustAppend(t, s2, nb)
	if got := s2.ShouldRoll(nb, 1<<20, time.Minute, s2.Created().Add(2*time.Minute)); got != RollTime {
		t.Fatalf("wall clock roll: %v", got)
	}
	if got := s2.ShouldRoll(nb, 1<<20, time.Minute, s2.Created().Add(time.Second)); got != RollNone {
		t.Fatalf("wall clock no roll: %v", got)
	}
	for r := RollNone; r <= numRollReasons; r++ {
		if r.String() == "" {
			t.Fatal("empty name")
		}
	}
}
