package repair

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/vfs"
)

func v2Batch(t *testing.T, at int64, n int) []byte {
	t.Helper()
	bld := batch.NewBuilder(batch.BuilderOptions{BaseOffset: at, PartitionLeaderEpoch: batch.NoPartitionLeaderEpoch})
	for i := 0; i < n; i++ {
		require.NoError(t, bld.Add(batch.Record{Value: []byte("value"), Timestamp: 1}))
	}
	b, err := bld.AppendTo(nil)
	require.NoError(t, err)
	return b
}

// legacyV0 is a magic-0 message with a null key and an empty value (its
// CRC is not checked by a walk).
func legacyV0(at int64) []byte {
	b := make([]byte, 26)
	binary.BigEndian.PutUint64(b, uint64(at))
	binary.BigEndian.PutUint32(b[8:], 14)
	binary.BigEndian.PutUint32(b[18:], 0xffffffff)
	return b
}

func write(t *testing.T, fs vfs.FS, path string, parts ...[]byte) {
	t.Helper()
	f, err := fs.Create(path)
	require.NoError(t, err)
	for _, p := range parts {
		_, err := f.Write(p)
		require.NoError(t, err)
	}
	require.NoError(t, f.Close())
}

// TestProbeLog checks the read-only walk Open and RecoverDir rely on: the
// end of the batches, the next offset, offset gaps, a torn or truncated
// tail, legacy messages, the index hint, and CRC checks when validating.
func TestProbeLog(t *testing.T) {
	fs := vfs.NewMem()
	require.NoError(t, fs.MkdirAll("/d", 0o755))
	a, b, c := v2Batch(t, 10, 3), v2Batch(t, 13, 2), v2Batch(t, 20, 1)

	write(t, fs, "/d/x.log", a, b)
	pr, err := ProbeLog(fs, "/d/x.log", "", 10, false)
	require.NoError(t, err)
	require.Equal(t, Probe{Path: "/d/x.log", Size: int64(len(a) + len(b)), Framed: int64(len(a) + len(b)), Next: 15, Batches: 2}, pr)

	write(t, fs, "/d/gap.log", a, c)
	pr, err = ProbeLog(fs, "/d/gap.log", "", 10, false)
	require.NoError(t, err)
	require.True(t, pr.Gaps)
	require.Equal(t, int64(21), pr.Next)
	pr, err = ProbeLog(fs, "/d/gap.log", "", 5, false)
	require.NoError(t, err)
	require.True(t, pr.Gaps, "a first batch above the base offset is a gap")

	write(t, fs, "/d/torn.log", a, b[:len(b)-5])
	pr, err = ProbeLog(fs, "/d/torn.log", "", 10, false)
	require.NoError(t, err)
	require.Equal(t, int64(len(a)), pr.Framed)
	require.Equal(t, int64(13), pr.Next)
	require.ErrorIs(t, pr.Cause, base.ErrCorrupt)

	write(t, fs, "/d/legacy.log", legacyV0(0), legacyV0(1), legacyV0(2))
	pr, err = ProbeLog(fs, "/d/legacy.log", "", 0, false)
	require.NoError(t, err)
	require.Equal(t, int64(78), pr.Framed)
	require.Equal(t, int64(3), pr.Next)
	require.NoError(t, pr.Cause)

	// The index's last entry (relative offset 4, position of b) starts
	// the walk there; a zero-filled (preallocated) tail is skipped.
	idx := make([]byte, 8*4)
	binary.BigEndian.PutUint32(idx[0:], 4)
	binary.BigEndian.PutUint32(idx[4:], uint32(len(a)))
	write(t, fs, "/d/x.index", idx)
	pr, err = ProbeLog(fs, "/d/x.log", "/d/x.index", 10, false)
	require.NoError(t, err)
	require.Equal(t, int64(len(a)), pr.Start)
	require.Equal(t, int64(15), pr.Next)
	// An entry pointing past the file is ignored.
	binary.BigEndian.PutUint32(idx[4:], 1<<20)
	write(t, fs, "/d/x.index", idx)
	pr, err = ProbeLog(fs, "/d/x.log", "/d/x.index", 10, false)
	require.NoError(t, err)
	require.Zero(t, pr.Start)
	require.Equal(t, int64(15), pr.Next)

	// validate checks every CRC.
	bad := append([]byte(nil), b...)
	bad[len(bad)-1] ^= 1
	write(t, fs, "/d/crc.log", a, bad)
	pr, err = ProbeLog(fs, "/d/crc.log", "", 10, false)
	require.NoError(t, err)
	require.NoError(t, pr.Cause, "framing alone passes")
	pr, err = ProbeLog(fs, "/d/crc.log", "", 10, true)
	require.NoError(t, err)
	require.ErrorIs(t, pr.Cause, base.ErrCorrupt)
	require.Equal(t, int64(len(a)), pr.Framed)
}
