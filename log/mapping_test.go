package log_test

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// logMappings sums, from /proc/self/maps, the address space mapped from
// .log files under dir, and counts those mappings.
func logMappings(t *testing.T, dir string) (bytes int64, count int) {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || !strings.HasPrefix(fields[5], dir+"/") || !strings.HasSuffix(fields[5], ".log") {
			continue
		}
		lo, hi, _ := strings.Cut(fields[0], "-")
		a, err := strconv.ParseUint(lo, 16, 64)
		require.NoError(t, err)
		b, err := strconv.ParseUint(hi, 16, 64)
		require.NoError(t, err)
		bytes += int64(b - a)
		count++
	}
	require.NoError(t, sc.Err())
	return bytes, count
}

// TestSealedSegmentsMapTheirFiles measures the address space a partition
// with 100 segments at the default segment.bytes (1 GiB) maps for its
// .log files: the active segment maps its 1 GiB window, every sealed one
// only its file's pages (before, each sealed segment kept a 1 GiB mapping:
// 100 GiB of address space). Measured after the appends (rolled segments)
// and after a reopen (segments opened sealed).
func TestSealedSegmentsMapTheirFiles(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/maps")
	}
	const segments = 100
	p, dir := openT(t, plog.Config{})
	for i := range segments {
		_, err := p.AppendBatch(logtest.MakeBatch(4, 500, 1_700_000_000_000+int64(i), byte(i)))
		require.NoError(t, err)
		if i < segments-1 {
			require.NoError(t, p.Roll())
		}
	}
	page := int64(os.Getpagesize())
	check := func(when string, retired int) {
		infos := p.SegmentInfos()
		require.Len(t, infos, segments)
		want := int64(plog.DefaultSegmentBytes)
		sealed := infos[:len(infos)-1]
		if retired == 1 {
			// Open maps the last segment sealed, Unseal maps its window
			// anew and keeps the file-sized mapping for readers until
			// the segment is released.
			sealed = infos
		}
		for _, in := range sealed {
			want += (in.Size + page - 1) / page * page
		}
		got, n := logMappings(t, dir)
		t.Logf("%s: %d .log mappings, %d bytes of address space (%.2f GiB)", when, n, got, float64(got)/(1<<30))
		require.Equal(t, segments+retired, n, when)
		require.Equal(t, want, got, when)
	}
	// The last roll's adoption renames the active segment's files after
	// the lock, in the background; a sync settles it, so that the
	// mapping carries the .log's name.
	require.NoError(t, p.Sync())
	check("after 99 rolls", 0)
	require.NoError(t, p.Close())
	p2, err := plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	p = p2
	defer p2.Close()
	check("after reopen", 1)
}
