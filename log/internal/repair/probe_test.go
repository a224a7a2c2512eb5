package repair

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/legacy"
	"github.com/partlog/partlog/internal/vfs"
)

// legacyV0 is a magic-0 message with a null key and an empty value (its
// CRC is not checked by a walk).
func legacyV0(at int64) []byte {
	b := make([]byte, 26)
	binary.BigEndian.PutUint64(b, uint64(at))
	binary.BigEndian.PutUint32(b[8:], 14)
	binary.BigEndian.PutUint32(b[18:], 0xffffffff)
	return b
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

// legacyV1 is a magic-1 message at offset at with a valid CRC-32.
func legacyV1(at int64, value string) []byte {
	m := []byte{0, 0, 0, 0, byte(legacy.MagicV1), 0}
	m = binary.BigEndian.AppendUint64(m, 1_600_000_000_000)
	m = binary.BigEndian.AppendUint32(m, 0xffffffff)
	m = binary.BigEndian.AppendUint32(m, uint32(len(value)))
	m = append(m, value...)
	binary.BigEndian.PutUint32(m, crc32.ChecksumIEEE(m[4:]))
	out := binary.BigEndian.AppendUint64(nil, uint64(at))
	out = binary.BigEndian.AppendUint32(out, uint32(len(m)))
	return append(out, m...)
}

// TestProbeLogValidatesLegacyCRC: with validate (the check a .swap passes
// before it may replace live segments) a legacy message's CRC-32 is
// checked like a v2 batch's CRC-32C: a damaged legacy message stops the
// walk at its position.
func TestProbeLogValidatesLegacyCRC(t *testing.T) {
	fs := vfs.NewMem()
	require.NoError(t, fs.MkdirAll("/d", 0o755))
	m0, m1, m2 := legacyV1(0, "a"), legacyV1(1, "bb"), legacyV1(2, "ccc")
	tail := v2Batch(t, 3, 2)
	tests := []struct {
		name   string
		damage int // byte of m1 flipped, -1 for none
		framed int64
	}{
		{"intact", -1, int64(len(m0) + len(m1) + len(m2) + len(tail))},
		{"value byte", len(m1) - 1, int64(len(m0))},
		{"timestamp byte", 12 + 4 + 2 + 3, int64(len(m0))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := append([]byte(nil), m1...)
			if tt.damage >= 0 {
				d[tt.damage] ^= 1
			}
			write(t, fs, "/d/l.log", m0, d, m2, tail)
			pr, err := ProbeLog(fs, "/d/l.log", "", 0, false)
			require.NoError(t, err)
			require.NoError(t, pr.Cause, "framing alone passes")
			pr, err = ProbeLog(fs, "/d/l.log", "", 0, true)
			require.NoError(t, err)
			require.Equal(t, tt.framed, pr.Framed)
			if tt.damage < 0 {
				require.NoError(t, pr.Cause)
				require.Equal(t, int64(5), pr.Next)
				return
			}
			require.ErrorIs(t, pr.Cause, base.ErrCorrupt)
			var ce *base.CorruptionError
			require.ErrorAs(t, pr.Cause, &ce)
			require.Equal(t, "/d/l.log", ce.File)
			require.Equal(t, int64(1), pr.Next)
		})
	}
}
