package index

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/partlog/partlog/internal/vfs"
)

// unhex decodes hex with spaces, newlines and #-comments.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	var clean strings.Builder
	for _, line := range strings.Split(s, "\n") {
		line, _, _ = strings.Cut(line, "#")
		clean.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(clean.String())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A small index written here equals bytes computed by hand from the format.
func TestGoldenBytes(t *testing.T) {
	offsetWant := unhex(t, `
		00000000 00000000  # offset 100 (rel 0) at position 0
		00000005 00001000  # offset 105 (rel 5) at position 4096
		7fffffff 7fffffff  # offset 100+MaxInt32 at position MaxInt32
	`)
	timeWant := unhex(t, `
		0000000000000000 00000000  # timestamp 0 at offset 100
		0000018bcfe56800 00000005  # timestamp 1700000000000 at offset 105
		7fffffffffffffff 7fffffff  # timestamp MaxInt64 at offset 100+MaxInt32
	`)
	forEachMode(t, func(t *testing.T, fsys vfs.FS, dir string) {
		opath := filepath.Join(dir, "00000000000000000100.index")
		tpath := filepath.Join(dir, "00000000000000000100.timeindex")
		idx := openOffset(t, fsys, opath, 100, DefaultMaxIndexSize)
		tidx := openTime(t, fsys, tpath, 100, DefaultMaxIndexSize)
		if idx.MaxEntries() != 1_310_720 || tidx.MaxEntries() != 873_813 {
			t.Fatalf("default sizes hold %d and %d entries", idx.MaxEntries(), tidx.MaxEntries())
		}
		for _, e := range []OffsetEntry{{100, 0}, {105, 4096}, {100 + 1<<31 - 1, 1<<31 - 1}} {
			if err := idx.Append(e.Offset, e.Position); err != nil {
				t.Fatal(err)
			}
		}
		for _, e := range []TimeEntry{{0, 100}, {1_700_000_000_000, 105}, {1<<63 - 1, 100 + 1<<31 - 1}} {
			if err := tidx.MaybeAppend(e.Timestamp, e.Offset, false); err != nil {
				t.Fatal(err)
			}
		}
		// Before close the files are preallocated, entries first.
		if got := readFile(t, fsys, opath); len(got) != DefaultMaxIndexSize || !bytes.Equal(got[:len(offsetWant)], offsetWant) ||
			bytes.Count(got[len(offsetWant):], []byte{0}) != len(got)-len(offsetWant) {
			t.Errorf("preallocated offset index: %d bytes, head % x", len(got), got[:min(len(got), 32)])
		}
		if err := idx.Close(); err != nil {
			t.Fatal(err)
		}
		if err := tidx.Close(); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, fsys, opath); !bytes.Equal(got, offsetWant) {
			t.Errorf("offset index bytes\n% x\nwant\n% x", got, offsetWant)
		}
		if got := readFile(t, fsys, tpath); !bytes.Equal(got, timeWant) {
			t.Errorf("time index bytes\n% x\nwant\n% x", got, timeWant)
		}
	})
}

// Kafka's own index files open, pass SanityCheck, look up to the values
// SOURCES.md states (testdata/PROVENANCE.md), and are not modified by
// opening and closing them.
func TestKafkaFixtures(t *testing.T) {
	tests := []struct {
		dir  string
		base int64
		// the one time entry
		ts, off int64
	}{
		{"kafka-2.7.1/__consumer_offsets-17", 0, 1670071252901, 0},
		{"kafka-source-code/__consumer_offsets-17", 0, 1640184226850, 57},
		{"kafka-source-code/__consumer_offsets-17", 58, 1640830085673, 58},
	}
	forEachMode(t, func(t *testing.T, fsys vfs.FS, dir string) {
		for i, tc := range tests {
			name := filepath.Join(tc.dir, fmt20(tc.base))
			t.Run(name, func(t *testing.T) {
				copyIn := func(suffix string) (string, []byte) {
					src, err := os.ReadFile(filepath.Join("testdata", tc.dir, fmt20(tc.base)+suffix))
					if err != nil {
						t.Fatal(err)
					}
					dst := filepath.Join(dir, fmt20(int64(i))+"-"+fmt20(tc.base)+suffix)
					writeFile(t, fsys, dst, src)
					return dst, src
				}
				tpath, tsrc := copyIn(".timeindex")
				opath, osrc := copyIn(".index")

				tidx := openTime(t, fsys, tpath, tc.base, DefaultMaxIndexSize)
				if err := tidx.SanityCheck(); err != nil {
					t.Fatal(err)
				}
				if tidx.Entries() != 1 || tidx.Entry(0) != (TimeEntry{tc.ts, tc.off}) {
					t.Fatalf("time index: %d entries, first %v", tidx.Entries(), tidx.Entry(0))
				}
				for _, q := range []struct {
					target int64
					want   TimeEntry
				}{
					{tc.ts - 1, TimeEntry{NoTimestamp, tc.base}},
					{tc.ts, TimeEntry{tc.ts, tc.off}},
					{tc.ts + 1, TimeEntry{tc.ts, tc.off}},
					{NoTimestamp, TimeEntry{NoTimestamp, tc.base}},
				} {
					if got := tidx.Lookup(q.target); got != q.want {
						t.Errorf("time Lookup(%d) = %v, want %v", q.target, got, q.want)
					}
				}
				if err := tidx.Check(tc.off + 2); err != nil {
					t.Error(err)
				}

				oidx := openOffset(t, fsys, opath, tc.base, DefaultMaxIndexSize)
				if err := oidx.SanityCheck(); err != nil {
					t.Fatal(err)
				}
				if oidx.Entries() != 0 || oidx.Lookup(tc.off) != (OffsetEntry{tc.base, 0}) {
					t.Fatalf("0-byte offset index: %d entries, lookup %v", oidx.Entries(), oidx.Lookup(tc.off))
				}

				// Flush syncs a mapping that reaches far past the end of
				// the file.
				if err := tidx.Flush(); err != nil {
					t.Fatal(err)
				}
				if err := oidx.Flush(); err != nil {
					t.Fatal(err)
				}
				if err := tidx.Close(); err != nil {
					t.Fatal(err)
				}
				if err := oidx.Close(); err != nil {
					t.Fatal(err)
				}
				if got := readFile(t, fsys, tpath); !bytes.Equal(got, tsrc) {
					t.Errorf("open+close changed the time index: % x", got)
				}
				if got := readFile(t, fsys, opath); !bytes.Equal(got, osrc) {
					t.Errorf("open+close changed the offset index: % x", got)
				}
			})
		}
	})
}

func fmt20(n int64) string { return fmt.Sprintf("%020d", n) }
