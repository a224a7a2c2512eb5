package segment

import (
	"bytes"
	"io/fs"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
)

func TestFileNames(t *testing.T) {
	got := FileName(42, LogSuffix)
	require.Equal(t, "00000000000000000042.log", got, "FileName = %q", got)
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
		assert.Equal(t, tc.ok, ok, "ParseFileName(%q) = %d, %q, %v; want %d, %q, %v", tc.name, base, suffix, ok, tc.base, tc.suffix, tc.ok)
		assert.Equal(t, tc.base, base, "ParseFileName(%q) = %d, %q, %v; want %d, %q, %v", tc.name, base, suffix, ok, tc.base, tc.suffix, tc.ok)
		assert.Equal(t, tc.suffix, suffix, "ParseFileName(%q) = %d, %q, %v; want %d, %q, %v", tc.name, base, suffix, ok, tc.base, tc.suffix, tc.ok)
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
			require.NoError(t, err)
			defer mustClose(t, s)
			require.Equal(t, int64(100), s.NextOffset(), "empty segment: next %d size %d", s.NextOffset(), s.Size())
			require.Equal(t, int64(0), s.Size(), "empty segment: next %d size %d", s.NextOffset(), s.Size())
			ts, off := s.MaxTimestamp()
			require.Equal(t, int64(-1), ts, "empty MaxTimestamp = %d, %d", ts, off)
			require.Equal(t, int64(-1), off, "empty MaxTimestamp = %d, %d", ts, off)
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
			require.Len(t, m.batches, len(batches), "%d batches, want %d", len(m.batches), len(batches))
			require.NotEqual(t, 0, s.offIdx.Entries(), "no index entries: %d, %d", s.offIdx.Entries(), s.timeIdx.Entries())
			require.NotEqual(t, 0, s.timeIdx.Entries(), "no index entries: %d, %d", s.offIdx.Entries(), s.timeIdx.Entries())
			checkLookups(t, s, m)
			_, err = s.Append(batches[0])
			require.ErrorIs(t, err, ErrOffsetNotIncreasing, "stale append: %v", err)
			sizeBefore := s.Size()
			bad := simpleBatch(t, next, 2, 1, 10)
			for _, in := range []batch.Batch{bad[:50], bad[:len(bad)-1], append(bad[:len(bad):len(bad)], 0)} {
				_, err := s.Append(in)
				require.True(t, base.IsCorruption(err), "append of %d malformed bytes: %v", len(in), err)
			}
			_, err = s.Append(simpleBatch(t, 99, 1, 1, 1))
			require.ErrorIs(t, err, ErrOffsetNotIncreasing, "append below the base: %v", err)
			require.Equal(t, sizeBefore, s.Size(), "a rejected append changed the segment")

			// Read: whole batches, maxBytes, maxPosition, minOneBatch.
			b0, b1 := m.batches[0], m.batches[1]
			sl, err := s.Read(b0.BaseOffset(), len(b0)+len(b1), s.Size(), false)
			require.NoError(t, err, "Read two batches = %+v, %v", sl, err)
			require.Equal(t, int64(0), sl.Start, "Read two batches = %+v, %v", sl, err)
			require.Equal(t, int64(len(b0)+len(b1)), sl.End, "Read two batches = %+v, %v", sl, err)
			require.Equal(t, b0.BaseOffset(), sl.FirstOffset, "Read two batches = %+v, %v", sl, err)
			require.Equal(t, b1.NextOffset(), sl.NextOffset, "Read two batches = %+v, %v", sl, err)
			sl, _ = s.Read(b0.BaseOffset(), len(b0)+len(b1)-1, s.Size(), false)
			require.Equal(t, int64(len(b0)), sl.End, "Read with a short budget = %+v", sl)
			sl, _ = s.Read(b0.BaseOffset(), 1, s.Size(), false)
			require.True(t, sl.Empty(), "Read below one batch = %+v", sl)
			sl, _ = s.Read(b0.BaseOffset(), 1, s.Size(), true)
			require.Equal(t, int64(len(b0)), sl.Len(), "Read minOneBatch = %+v", sl)
			sl, _ = s.Read(b0.BaseOffset(), 1<<20, int64(len(b0))+5, true)
			require.Equal(t, int64(len(b0)), sl.End, "Read bounded by maxPosition = %+v", sl)
			sl, _ = s.Read(b1.BaseOffset(), 1<<20, int64(len(b0))+5, true)
			require.True(t, sl.Empty(), "Read past maxPosition = %+v", sl)
			sl, _ = s.Read(s.NextOffset(), 1<<20, s.Size(), true)
			require.True(t, sl.Empty(), "Read at the end = %+v", sl)
			sl, _ = s.Read(0, 1<<30, s.Size(), false)
			require.Equal(t, int64(0), sl.Start, "Read all = %+v", sl)
			require.Equal(t, s.Size(), sl.End, "Read all = %+v", sl)
			got, err := s.Bytes(sl.Start, sl.End, nil)
			require.NoError(t, err)
			var want []byte
			for _, b := range batches {
				want = append(want, b...)
			}
			require.Equal(t, string(want), string(got), "Bytes differ from what was appended")
			_, err = s.Bytes(0, s.Size()+1, nil)
			require.ErrorIs(t, err, ErrOutOfRange, "Bytes past the end: %v", err)
			var buf bytes.Buffer
			n, err := s.WriteTo(&buf, 0, s.Size())
			require.NoError(t, err, "WriteTo = %d, %v", n, err)
			require.Equal(t, s.Size(), n, "WriteTo = %d, %v", n, err)
			require.Equal(t, string(want), string(buf.Bytes()), "WriteTo = %d, %v", n, err)

			// Seal, reopen, same answers.
			require.NoError(t, s.Seal())
			_, err = s.Append(simpleBatch(t, next, 1, 0, 1))
			require.ErrorIs(t, err, ErrSealed, "append after seal: %v", err)
			liveOff, liveTime := indexEntries(s)
			mustClose(t, s)
			err = s.Close()
			require.ErrorIs(t, err, ErrClosed, "second Close: %v", err)
			s2, err := Open(fsys, dir, 100, cfg)
			require.NoError(t, err)
			defer mustClose(t, s2)
			m2 := checkSegment(t, s2)
			checkLookups(t, s2, m2)
			require.True(t, s2.Sealed(), "Open returned an active segment")
			// Rebuilt indexes equal the live ones.
			for _, suffix := range []string{IndexSuffix, TimeIndexSuffix} {
				require.NoError(t, fsys.Remove(segPath(dir, 100, suffix)))
			}
			s3, err := Open(fsys, dir, 100, cfg)
			require.NoError(t, err)
			defer mustClose(t, s3)
			gotOff, gotTime := indexEntries(s3)
			require.True(t, equalEntries(gotOff, liveOff), "rebuilt indexes differ:\n%v\n%v\nlive:\n%v\n%v", gotOff, gotTime, liveOff, liveTime)
			require.True(t, equalEntries(gotTime, liveTime), "rebuilt indexes differ:\n%v\n%v\nlive:\n%v\n%v", gotOff, gotTime, liveOff, liveTime)
			require.NoError(t, s3.Unseal())
			mustAppend(t, s3, simpleBatch(t, next, 2, 5000, 10))
			checkLookups(t, s3, checkSegment(t, s3))
		})
	}
}

func TestOpenMissing(t *testing.T) {
	_, err := Open(vfs_NewMemForTest(t), "/x", 0, Config{})
	require.ErrorIs(t, err, fs.ErrNotExist, "Open of a missing segment: %v", err)
}

func TestShouldRoll(t *testing.T) {
	fsys := vfs_NewMemForTest(t)
	cfg := Config{MaxIndexBytes: 3 * 12, IndexIntervalBytes: -1}
	s, err := Create(fsys, "/x", 10, cfg)
	require.NoError(t, err)
	defer mustClose(t, s)
	now := time.Unix(1000, 0)
	b := simpleBatch(t, 10, 2, 5000, 100)
	r := s.ShouldRoll(b, 100, time.Second, now)
	require.Equal(t, RollNone, r, "empty segment rolls: %v", r)
	mustAppend(t, s, b)
	got := s.FirstBatchMaxTimestamp()
	require.Equal(t, int64(5001), got, "FirstBatchMaxTimestamp = %d", got)
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
		got := s.ShouldRoll(tc.in, tc.segBytes, tc.rollAfter, now)
		assert.Equal(t, tc.want, got, "%s: ShouldRoll = %v, want %v", tc.name, got, tc.want)
	}
	// Index full: 3 offset slots, 2 usable time slots.
	next := b.NextOffset()
	for i := 0; s.ShouldRoll(simpleBatch(t, next, 1, 6000+int64(i), 1), 1<<20, time.Hour, now) == RollNone; i++ {
		nb := simpleBatch(t, next, 1, 6000+int64(i), 1)
		mustAppend(t, s, nb)
		next = nb.NextOffset()
		require.LessOrEqual(t, i, 10, "never full")
	}
	r = s.ShouldRoll(simpleBatch(t, next, 1, 7000, 1), 1<<20, time.Hour, now)
	if r != RollOffsetIndexFull {
		require.Equal(t, RollTimeIndexFull, r, "full index: %v", r)
	}
	_, err = s.Append(simpleBatch(t, next, 1, 7000, 1))
	require.ErrorIs(t, err, ErrSegmentFull, "append to a full index: %v", err)
	// Wall clock fallback when the first batch has no timestamp.
	s2, err := Create(fsys, "/x", 1000, Config{})
	require.NoError(t, err)
	defer mustClose(t, s2)
	nb := simpleBatch(t, 1000, 1, -1, 1)
	mustAppend(t, s2, nb)
	require.Equal(t, RollTime, s2.ShouldRoll(nb, 1<<20, time.Minute, s2.Created().Add(2*time.Minute)), "wall clock roll")
	require.Equal(t, RollNone, s2.ShouldRoll(nb, 1<<20, time.Minute, s2.Created().Add(time.Second)), "wall clock no roll")
	for r := RollNone; r <= numRollReasons; r++ {
		require.NotEqual(t, "", r.String(), "empty name")
	}
}

// TestGrowPastMaxSegmentBytes: Grow lets an active segment's .log pass
// Config.MaxSegmentBytes, up to MaxSegmentBytesLimit (what a partition
// that can no longer roll asks of its last segment): an Append refused
// with ErrSegmentFull succeeds after it, mapped or not, and after a clean
// open under a budget that left the segment closed until its first write
// (Grow wakes it). Every batch reads back; FreeIndexEntries falls by at
// most one an append, and past MaxSegmentBytesLimit Grow refuses.
func TestGrowPastMaxSegmentBytes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    Config
		atRest bool
	}{
		{"mapped", Config{}, false},
		{"not mapped", Config{DisableMmap: true}, false},
		{"woken by Grow", Config{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := tc.cfg
			cfg.MaxSegmentBytes, cfg.IndexIntervalBytes, cfg.MaxIndexBytes = 1024, 1, 1<<10
			s, err := Create(nil, dir, 0, cfg)
			require.NoError(t, err)
			next := int64(0)
			add := func() error {
				b := simpleBatch(t, next, 2, 1_000+next, 100)
				if _, err := s.Append(b); err != nil {
					return err
				}
				next += 2
				return nil
			}
			for add() == nil {
			}
			require.ErrorIs(t, add(), ErrSegmentFull)
			if tc.atRest {
				mustClose(t, s)
				cfg.Budget = NewBudget(4)
				s, err = OpenClean(nil, dir, 0, cfg)
				require.NoError(t, err)
				require.NoError(t, s.UnsealOnWrite())
				require.True(t, s.Sealed(), "the write is deferred")
			}
			defer func() { mustClose(t, s) }()

			b := simpleBatch(t, next, 2, 1_000+next, 100)
			require.NoError(t, s.Grow(s.Size()+int64(len(b))))
			require.False(t, s.Sealed())
			for range 10 {
				free := s.FreeIndexEntries()
				require.NoError(t, add())
				require.GreaterOrEqual(t, s.FreeIndexEntries(), free-1)
			}
			require.Greater(t, s.Size(), int64(1024))
			require.NoError(t, s.Grow(s.Size()+1), "already wide enough")
			require.ErrorIs(t, s.Grow(MaxSegmentBytesLimit+1), ErrSegmentFull)
			m := checkSegment(t, s)
			require.Equal(t, next, m.batches[len(m.batches)-1].NextOffset())
			require.Equal(t, next, s.NextOffset())
		})
	}
}
