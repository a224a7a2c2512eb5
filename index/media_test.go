package index

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/mmap"
	"github.com/partlog/partlog/internal/vfs"
)

// TestFaultIsAnError cuts a mapped index file to 0 bytes behind the
// index's back (touching its pages then raises SIGBUS, as a media error
// does) and checks that every method returning an error returns one
// wrapping ErrFault that names the file, instead of killing the process.
func TestFaultIsAnError(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SIGBUS on a page past the end of a mapped file is Linux behaviour")
	}
	tests := []struct {
		name string
		op   func(o *OffsetIndex, ti *TimeIndex) error
	}{
		{"offset SanityCheck", func(o *OffsetIndex, _ *TimeIndex) error { return o.SanityCheck() }},
		{"offset Check", func(o *OffsetIndex, _ *TimeIndex) error {
			return o.Check(1<<30, func(int64) (int64, bool) { return 0, true })
		}},
		{"offset TruncateTo", func(o *OffsetIndex, _ *TimeIndex) error { return o.TruncateTo(150) }},
		{"offset Append", func(o *OffsetIndex, _ *TimeIndex) error { return o.Append(10_000, 1<<20) }},
		{"time SanityCheck", func(_ *OffsetIndex, ti *TimeIndex) error { return ti.SanityCheck() }},
		{"time Check", func(_ *OffsetIndex, ti *TimeIndex) error { return ti.Check(1 << 40) }},
		{"time TruncateTo", func(_ *OffsetIndex, ti *TimeIndex) error { return ti.TruncateTo(150) }},
		{"time MaybeAppend", func(_ *OffsetIndex, ti *TimeIndex) error { return ti.MaybeAppend(1<<40, 10_000, false) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			oPath, tPath := filepath.Join(dir, "0.index"), filepath.Join(dir, "0.timeindex")
			o, err := OpenOffsetIndex(vfs.Default, oPath, 100, 1<<16)
			require.NoError(t, err)
			defer o.Close()
			ti, err := OpenTimeIndex(vfs.Default, tPath, 100, 1<<16)
			require.NoError(t, err)
			defer ti.Close()
			for i := range int64(1000) {
				require.NoError(t, o.Append(100+i, 10*i))
				require.NoError(t, ti.MaybeAppend(1000+i, 100+i, false))
			}
			require.NoError(t, os.Truncate(oPath, 0))
			require.NoError(t, os.Truncate(tPath, 0))
			err = tc.op(o, ti)
			require.ErrorIs(t, err, ErrFault)
			var fe *mmap.FaultError
			require.ErrorAs(t, err, &fe)
			assert.Contains(t, []string{oPath, tPath}, fe.File)
		})
	}
}
