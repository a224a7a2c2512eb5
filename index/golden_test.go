package index

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	require.NoError(t, err)
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
		require.Equal(t, 1_310_720, idx.MaxEntries(), "default sizes hold %d and %d entries", idx.MaxEntries(), tidx.MaxEntries())
		require.Equal(t, 873_813, tidx.MaxEntries(), "default sizes hold %d and %d entries", idx.MaxEntries(), tidx.MaxEntries())
		for _, e := range []OffsetEntry{{100, 0}, {105, 4096}, {100 + 1<<31 - 1, 1<<31 - 1}} {
			require.NoError(t, idx.Append(e.Offset, e.Position))
		}
		for _, e := range []TimeEntry{{0, 100}, {1_700_000_000_000, 105}, {1<<63 - 1, 100 + 1<<31 - 1}} {
			require.NoError(t, tidx.MaybeAppend(e.Timestamp, e.Offset, false))
		}
		// Before close the files are preallocated, entries first.
		got := readFile(t, fsys, opath)
		assert.Len(t, got, DefaultMaxIndexSize, "preallocated offset index: %d bytes, head % x", len(got), got[:min(len(got), 32)])
		assert.Equal(t, string(offsetWant), string(got[:len(offsetWant)]), "preallocated offset index: %d bytes, head % x", len(got), got[:min(len(got), 32)])
		assert.Equal(t, len(got)-len(offsetWant), bytes.Count(got[len(offsetWant):], []byte{0}), "preallocated offset index: %d bytes, head % x", len(got), got[:min(len(got), 32)])
		require.NoError(t, idx.Close())
		require.NoError(t, tidx.Close())
		got = readFile(t, fsys, opath)
		assert.Equal(t, string(offsetWant), string(got), "offset index bytes\n% x\nwant\n% x", got, offsetWant)
		got = readFile(t, fsys, tpath)
		assert.Equal(t, string(timeWant), string(got), "time index bytes\n% x\nwant\n% x", got, timeWant)
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
					require.NoError(t, err)
					dst := filepath.Join(dir, fmt20(int64(i))+"-"+fmt20(tc.base)+suffix)
					writeFile(t, fsys, dst, src)
					return dst, src
				}
				tpath, tsrc := copyIn(".timeindex")
				opath, osrc := copyIn(".index")

				tidx := openTime(t, fsys, tpath, tc.base, DefaultMaxIndexSize)
				require.NoError(t, tidx.SanityCheck())
				require.Equal(t, 1, tidx.Entries(), "time index: %d entries, first %v", tidx.Entries(), tidx.Entry(0))
				require.Equal(t, TimeEntry{tc.ts, tc.off}, tidx.Entry(0), "time index: %d entries, first %v", tidx.Entries(), tidx.Entry(0))
				for _, q := range []struct {
					target int64
					want   TimeEntry
				}{
					{tc.ts - 1, TimeEntry{NoTimestamp, tc.base}},
					{tc.ts, TimeEntry{tc.ts, tc.off}},
					{tc.ts + 1, TimeEntry{tc.ts, tc.off}},
					{NoTimestamp, TimeEntry{NoTimestamp, tc.base}},
				} {
					got := tidx.Lookup(q.target)
					assert.Equal(t, q.want, got, "time Lookup(%d) = %v, want %v", q.target, got, q.want)
				}
				assert.NoError(t, tidx.Check(tc.off+2))

				oidx := openOffset(t, fsys, opath, tc.base, DefaultMaxIndexSize)
				require.NoError(t, oidx.SanityCheck())
				require.Equal(t, 0, oidx.Entries(), "0-byte offset index: %d entries, lookup %v", oidx.Entries(), oidx.Lookup(tc.off))
				require.Equal(t, OffsetEntry{tc.base, 0}, oidx.Lookup(tc.off), "0-byte offset index: %d entries, lookup %v", oidx.Entries(), oidx.Lookup(tc.off))

				// Flush syncs a mapping that reaches far past the end of
				// the file.
				require.NoError(t, tidx.Flush())
				require.NoError(t, oidx.Flush())
				require.NoError(t, tidx.Close())
				require.NoError(t, oidx.Close())
				got := readFile(t, fsys, tpath)
				assert.Equal(t, string(tsrc), string(got), "open+close changed the time index: % x", got)
				got = readFile(t, fsys, opath)
				assert.Equal(t, string(osrc), string(got), "open+close changed the offset index: % x", got)
			})
		}
	})
}

func fmt20(n int64) string { return fmt.Sprintf("%020d", n) }
