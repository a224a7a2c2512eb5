package segment

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/vfs"
)

// truncateFile cuts the file at path to size bytes.
func truncateFile(t *testing.T, fsys vfs.FS, path string, size int64) {
	t.Helper()
	f, err := fsys.OpenReadWrite(path)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(size))
	require.NoError(t, f.Close())
}

// An offset index without entries is valid for a segment whose batches all
// start within the first IndexIntervalBytes (closing such a segment trims
// its .index to zero bytes): Open keeps it and rebuilds nothing. An empty
// .index under a segment with batches further in is missing entries and is
// rebuilt, as before.
func TestOpenKeepsEmptyIndexOfSmallSegment(t *testing.T) {
	for _, tc := range []struct {
		name        string
		batches     int
		wantRebuild bool
	}{
		{"within the interval", 3, false},
		{"past the interval", 40, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := vfs_NewMemForTest(t)
			var logs bytes.Buffer
			cfg := Config{IndexIntervalBytes: 1024, MaxSegmentBytes: 1 << 20,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
			s, err := Create(fsys, "/x", 0, cfg)
			require.NoError(t, err)
			for i := range tc.batches {
				mustAppend(t, s, simpleBatch(t, int64(i), 1, 1000-int64(i), 200))
			}
			mustClose(t, s)
			// A damaged index: the entries of a large segment lost.
			truncateFile(t, fsys, segPath("/x", 0, IndexSuffix), 0)

			for _, clean := range []bool{false, true} {
				logs.Reset()
				open := Open
				if clean {
					open = OpenClean
				}
				s, err = open(fsys, "/x", 0, cfg)
				require.NoError(t, err)
				off, _ := s.IndexEntries()
				if tc.wantRebuild {
					assert.Contains(t, logs.String(), "rebuilt index")
					assert.Positive(t, off)
				} else {
					assert.NotContains(t, logs.String(), "rebuilt index")
					assert.Zero(t, off)
				}
				ts, at := s.MaxTimestamp()
				assert.Equal(t, int64(1000), ts)
				assert.Equal(t, int64(0), at)
				checkLookups(t, s, checkSegment(t, s))
				mustClose(t, s)
				truncateFile(t, fsys, segPath("/x", 0, IndexSuffix), 0)
			}
		})
	}
}

// logReadFS counts the bytes read from .log files.
type logReadFS struct {
	vfs.FS
	n atomic.Int64
}

func (c *logReadFS) OpenReadWrite(name string) (vfs.File, error) {
	f, err := c.FS.OpenReadWrite(name)
	if err != nil || !strings.HasSuffix(name, LogSuffix) {
		return f, err
	}
	return &logReadFile{File: f, n: &c.n}, nil
}

func (c *logReadFS) Open(name string) (vfs.File, error) {
	f, err := c.FS.Open(name)
	if err != nil || !strings.HasSuffix(name, LogSuffix) {
		return f, err
	}
	return &logReadFile{File: f, n: &c.n}, nil
}

type logReadFile struct {
	vfs.File
	n *atomic.Int64
}

func (f *logReadFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.n.Add(int64(n))
	return n, err
}

// Opening a closed segment reads batch headers, never batch data: the
// header scan from the last offset index entry reads a header a batch,
// clean or not, however large the segment; only a lost index makes Open
// read every header (twice: the rebuild, then the largest timestamp's
// scan), and still no records.
func TestOpenReadsHeadersOnly(t *testing.T) {
	mem := vfs_NewMemForTest(t)
	cfg := Config{IndexIntervalBytes: 4096, MaxSegmentBytes: 1 << 30}
	s, err := Create(mem, "/x", 0, cfg)
	require.NoError(t, err)
	const batches = 512
	for i := range batches {
		mustAppend(t, s, simpleBatch(t, s.NextOffset(), 8, int64(1000+i), 460)) // about 4 KiB
	}
	mustClose(t, s)
	for _, tc := range []struct {
		name   string
		open   func(vfs.FS, string, int64, Config) (*Segment, error)
		lost   bool  // the offset index is lost
		atMost int64 // bytes of the .log read
	}{
		{"clean", OpenClean, false, 16 * batch.HeaderSize},
		{"unclean", Open, false, 16 * batch.HeaderSize},
		{"index lost", Open, true, (2*batches + 16) * batch.HeaderSize}, // the rebuild and the timestamp scan
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.lost {
				truncateFile(t, mem, segPath("/x", 0, IndexSuffix), 0)
			}
			fsys := &logReadFS{FS: mem}
			s, err := tc.open(fsys, "/x", 0, cfg)
			require.NoError(t, err)
			t.Logf("%d bytes of the .log read", fsys.n.Load())
			assert.LessOrEqual(t, fsys.n.Load(), tc.atMost)
			assert.Equal(t, int64(batches*8), s.NextOffset())
			mustClose(t, s)
		})
	}
}

// A missing or damaged .timeindex next to a good .index is rebuilt from
// the log, by Open and by OpenClean alike: the segment keeps its largest
// timestamp and its time lookups. (A missing one used to be left empty:
// the empty file made in its place passes the check, and OpenClean
// reported no largest timestamp.) A clean open that rebuilt an index has
// something to sync.
func TestOpenRebuildsTimeIndex(t *testing.T) {
	for _, fk := range fsKinds {
		for _, n := range []int{3, 40} { // an .index without entries, and with
			for _, tc := range []struct {
				damage string
				clean  bool
			}{{"missing", false}, {"missing", true}, {"damaged", false}, {"damaged", true}} {
				clean := tc.clean
				t.Run(fmt.Sprintf("%s/%d batches/%s/clean=%v", fk.name, n, tc.damage, clean), func(t *testing.T) {
					fsys, dir := fk.fs(t)
					mustMkdir(t, fsys, dir)
					var logs bytes.Buffer
					cfg := fk.cfg
					cfg.IndexIntervalBytes, cfg.MaxSegmentBytes = 1024, 1<<20
					cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
					s, err := Create(fsys, dir, 0, cfg)
					require.NoError(t, err)
					for i := range n {
						// The largest timestamp in the middle: the last
						// batch is not the answer.
						ts := 1000 + int64(i)
						if i == n/2 {
							ts = 5000
						}
						mustAppend(t, s, simpleBatch(t, int64(i), 1, ts, 200))
					}
					mustClose(t, s)
					if tc.damage == "missing" {
						require.NoError(t, fsys.Remove(segPath(dir, 0, TimeIndexSuffix)))
					} else {
						truncateFile(t, fsys, segPath(dir, 0, TimeIndexSuffix), 5) // not whole entries
					}

					open := Open
					if clean {
						open = OpenClean
					}
					logs.Reset()
					s, err = open(fsys, dir, 0, cfg)
					require.NoError(t, err)
					defer mustClose(t, s)
					assert.Contains(t, logs.String(), "rebuilt index")
					ts, at := s.MaxTimestamp()
					assert.Equal(t, int64(5000), ts)
					assert.Equal(t, int64(n/2), at)
					_, timeEntries := s.IndexEntries()
					assert.Positive(t, timeEntries)
					assert.False(t, s.SyncedSinceOpen(), "an open that rebuilt an index has it to sync")
					checkLookups(t, s, checkSegment(t, s))
				})
			}
		}
	}
}

// A sealed segment whose .timeindex lost entries in a crash (its last
// entries, or all of them, as a file whose length was not yet synced
// leaves it) while its .log kept the batches: the open after the crash
// finds the largest timestamp by a scan and appends it as the final entry,
// so that the clean open after the next shutdown, which trusts that entry,
// still finds it. The index used to stay as the crash left it: the clean
// open then reported no largest timestamp (or an earlier one), and the
// partition's OffsetForTimestamp skipped the segment. A last entry that
// passes its checks but lies after the largest timestamp's batch cannot
// take the final entry (offsets must grow): the index is rebuilt.
func TestOpenRestoresFinalTimeEntry(t *testing.T) {
	const n = 40 // batch i at offset i, timestamp 1000+i, but 5000 at n/2
	for _, fk := range fsKinds {
		for _, tc := range []struct {
			name  string
			keep  int64            // bytes of the .timeindex kept
			entry *index.TimeEntry // then written as its only entry
		}{
			{name: "no entries kept"},
			{name: "1 entry kept", keep: index.TimeEntrySize},
			{name: "an entry after the largest", entry: &index.TimeEntry{Timestamp: 1000 + n/2 + 1, Offset: n/2 + 1}},
		} {
			t.Run(fk.name+"/"+tc.name, func(t *testing.T) {
				fsys, dir := fk.fs(t)
				mustMkdir(t, fsys, dir)
				cfg := fk.cfg
				cfg.IndexIntervalBytes, cfg.MaxSegmentBytes = 1024, 1<<20
				s, err := Create(fsys, dir, 0, cfg)
				require.NoError(t, err)
				for i := range n {
					ts := 1000 + int64(i)
					if i == n/2 {
						ts = 5000 // the largest, in the middle
					}
					mustAppend(t, s, simpleBatch(t, int64(i), 1, ts, 200))
				}
				require.NoError(t, s.Seal())
				mustClose(t, s)
				path := segPath(dir, 0, TimeIndexSuffix)
				truncateFile(t, fsys, path, tc.keep)
				if tc.entry != nil {
					e := make([]byte, index.TimeEntrySize)
					binary.BigEndian.PutUint64(e, uint64(tc.entry.Timestamp))
					binary.BigEndian.PutUint32(e[8:], uint32(tc.entry.Offset))
					f, err := fsys.OpenReadWrite(path)
					require.NoError(t, err)
					_, err = f.WriteAt(e, 0)
					require.NoError(t, err)
					require.NoError(t, f.Close())
				}

				s, err = Open(fsys, dir, 0, cfg) // after the crash
				require.NoError(t, err)
				ts, at := s.MaxTimestamp()
				assert.Equal(t, int64(5000), ts)
				assert.Equal(t, int64(n/2), at)
				assert.False(t, s.SyncedSinceOpen())
				mustClose(t, s) // a clean shutdown

				s, err = OpenClean(fsys, dir, 0, cfg)
				require.NoError(t, err)
				defer mustClose(t, s)
				ts, at = s.MaxTimestamp()
				assert.Equal(t, int64(5000), ts, "the clean open's largest timestamp")
				assert.Equal(t, int64(n/2), at)
				off, rts, found, err := s.FindOffsetByTimestamp(4000, 0)
				require.NoError(t, err)
				assert.True(t, found)
				assert.Equal(t, int64(n/2), off)
				assert.Equal(t, int64(5000), rts)
				checkLookups(t, s, checkSegment(t, s))
			})
		}
	}
}

// TestSyncedSinceOpen: a clean open that rebuilt nothing finds the files
// synced, and the first change ends it (the unseal before an append, a
// truncation, a transaction index entry); an open without the clean
// shutdown's promise, and a new segment, never report it.
func TestSyncedSinceOpen(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, s *Segment)
	}{
		{"unseal and append", func(t *testing.T, s *Segment) {
			require.NoError(t, s.Unseal())
			mustAppend(t, s, simpleBatch(t, s.NextOffset(), 1, 2000, 50))
		}},
		{"truncate", func(t *testing.T, s *Segment) {
			_, err := s.TruncateTo(1)
			require.NoError(t, err)
		}},
		{"aborted transaction entry", func(t *testing.T, s *Segment) {
			require.NoError(t, s.AppendAbortedTxn(AbortedTxn{ProducerID: 7, FirstOffset: 0, LastOffset: 2, LastStableOffset: 2}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys, dir := vfs.NewMem(), "/p"
			mustMkdir(t, fsys, dir)
			s, err := Create(fsys, dir, 0, Config{})
			require.NoError(t, err)
			assert.False(t, s.SyncedSinceOpen(), "a new segment")
			for i := range 3 {
				mustAppend(t, s, simpleBatch(t, int64(i), 1, 1000+int64(i), 50))
			}
			require.NoError(t, s.Flush())
			mustClose(t, s)

			s, err = Open(fsys, dir, 0, Config{})
			require.NoError(t, err)
			assert.False(t, s.SyncedSinceOpen(), "an open without the clean shutdown's promise")
			mustClose(t, s)

			s, err = OpenClean(fsys, dir, 0, Config{})
			require.NoError(t, err)
			defer mustClose(t, s)
			assert.True(t, s.SyncedSinceOpen(), "a clean open")
			require.NoError(t, s.Flush())
			assert.True(t, s.SyncedSinceOpen(), "a Flush with nothing to sync")
			tc.change(t, s)
			assert.False(t, s.SyncedSinceOpen(), "after the change")
		})
	}
}

// TestCleanOpenCatchesShortTimeIndex: after a clean shutdown, a sealed
// segment's .timeindex emptied or cut back by its last entry passes the
// O(1) checks, and a clean open takes its last entry for the segment's
// largest timestamp. The last batch's larger timestamp now shows the
// damage: the index is rebuilt and MaxTimestamp answers as before (DESIGN
// law 5). It used to answer (-1, -1) for the emptied index, and a time
// lookup of the partition skipped the segment.
func TestCleanOpenCatchesShortTimeIndex(t *testing.T) {
	for _, keep := range []int64{0, 12} {
		t.Run(fmt.Sprintf("%d bytes kept", keep), func(t *testing.T) {
			fsys := vfs_NewMemForTest(t)
			mustMkdir(t, fsys, "/p")
			cfg := Config{IndexIntervalBytes: 1024, MaxSegmentBytes: 1 << 20}
			s, err := Create(fsys, "/p", 0, cfg)
			require.NoError(t, err)
			for i := range 40 {
				mustAppend(t, s, simpleBatch(t, int64(i), 1, 1000+int64(i), 200))
			}
			require.NoError(t, s.Seal())
			mustClose(t, s)
			truncateFile(t, fsys, segPath("/p", 0, TimeIndexSuffix), keep)

			s, err = OpenClean(fsys, "/p", 0, cfg)
			require.NoError(t, err)
			defer mustClose(t, s)
			ts, off := s.MaxTimestamp()
			require.Equal(t, [2]int64{1039, 39}, [2]int64{ts, off})
			got, gotTs, found, err := s.FindOffsetByTimestamp(1005, 0)
			require.NoError(t, err)
			require.True(t, found)
			require.Equal(t, [2]int64{5, 1005}, [2]int64{got, gotTs})
		})
	}
}
