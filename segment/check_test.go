package segment

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/batchaccess"
	"github.com/partlog/partlog/internal/vfs"
)

// damageCases are .log contents with every kind of damage the walk tells
// apart: clean, torn tails (short header, partial batch, zeros, a bad last
// batch, garbage), corruption followed by valid batches, legacy data (kept
// or cut), and a damaged batch carrying a legacy lookalike in its records.
func damageCases(t *testing.T) []struct {
	name string
	data []byte
} {
	good := []batch.Batch{simpleBatch(t, 0, 3, 100, 50), simpleBatch(t, 10, 3, 100, 50), simpleBatch(t, 20, 3, 100, 50)}
	whole := slices.Concat(good[0], good[1], good[2])
	b2 := int64(len(good[0]) + len(good[1]))
	flip := func(d []byte, at int64) []byte {
		d = slices.Clone(d)
		d[at] ^= 0xff
		return d
	}
	mixed := legacyMixed(t)
	carrier := batchCarryingLegacy(t, 30, 40)
	return []struct {
		name string
		data []byte
	}{
		{"clean", whole},
		{"empty", nil},
		{"short header", slices.Concat(whole, []byte{1, 2, 3})},
		{"partial batch", whole[:len(whole)-5]},
		{"zero tail", slices.Concat(whole, make([]byte, 100))},
		{"bad crc in the last batch", flip(whole, int64(len(whole))-1)},
		{"bad crc in the middle", flip(whole, b2-1)},
		{"bad crc, then garbage", slices.Concat(flip(whole, int64(len(whole))-1), []byte("not a batch, not zeros, just text"))},
		{"garbage after", slices.Concat(whole, []byte("not a batch, not zeros, just text"))},
		{"bad length in the middle", setLength(whole, int64(len(good[0])), 1<<30)},
		{"garbage in the middle", overwrite(whole, int64(len(good[0])), make([]byte, 20))},
		{"baseOffset wraps in the middle", wrapBaseOffsetAt(whole, int64(len(good[0])))},
		{"legacy", mixed},
		{"legacy damaged in the middle", flip(mixed, 140)},
		{"legacy, then a torn batch", slices.Concat(mixed, simpleBatch(t, 20, 2, 100, 40)[:30])},
		{"torn batch carrying a legacy message", slices.Concat(whole, carrier[:len(carrier)-20])},
		{"batch failing its CRC, then a legacy message", slices.Concat(whole, flip(carrier, batchaccess.CRCStart+2), legacyMessage(50, "real"))},
	}
}

// TestCheckAgreesWithRecover: Check, read-only, finds what Recover (or
// RecoverSealed) finds on the same bytes, mapped or not: the same valid
// end, next offset, bytes to cut, kept flag and cause, and it walks the
// same valid entries; and it changes nothing.
func TestCheckAgreesWithRecover(t *testing.T) {
	for _, tc := range damageCases(t) {
		for _, sealed := range []bool{false, true} {
			for _, cfg := range []Config{{}, {DisableMmap: true}} {
				t.Run(fmt.Sprintf("%s/sealed=%v/mmap=%v", tc.name, sealed, !cfg.DisableMmap), func(t *testing.T) {
					dir := t.TempDir()
					path := filepath.Join(dir, FileName(0, LogSuffix))
					require.NoError(t, os.WriteFile(path, tc.data, 0o644))
					var walked []BatchInfo
					got, err := Check(nil, path, 0, CheckOptions{MaxBatchSize: batch.MaxBatchSize, Sealed: sealed},
						func(h BatchInfo, b batch.Batch, bad error) error {
							require.NoError(t, bad)
							require.Equal(t, h.Size, int64(len(b)))
							walked = append(walked, h)
							return nil
						})
					require.NoError(t, err)
					require.Equal(t, string(tc.data), string(readAll(t, vfs.Default, path)), "Check changed the file")
					require.Equal(t, got.ValidBytes, func() int64 {
						if len(walked) == 0 {
							return 0
						}
						return walked[len(walked)-1].End()
					}())

					s, err := Open(vfs.Default, dir, 0, cfg)
					require.NoError(t, err)
					defer func() { require.NoError(t, s.Close()) }()
					rec := s.Recover
					if sealed {
						rec = s.RecoverSealed
					}
					want, err := rec(batch.MaxBatchSize)
					require.NoError(t, err)
					require.Equal(t, want.ValidBytes, got.ValidBytes)
					require.Equal(t, want.NextOffset, got.NextOffset)
					require.Equal(t, want.TruncatedBytes, got.TruncatedBytes)
					require.Equal(t, want.Kept, got.Kept)
					if want.Cause == nil {
						require.NoError(t, got.Cause)
						return
					}
					require.EqualError(t, got.Cause, want.Cause.Error())
					require.Equal(t, base.IsTornTail(want.Cause), base.IsTornTail(got.Cause))
					require.ErrorIs(t, got.Cause, base.ErrCorrupt)
				})
			}
		}
	}
}

// TestCheckModes: HeadersOnly frames and orders entries without reading
// their bodies (a CRC failure passes), From starts at a batch boundary,
// and KeepGoing reports an entry that frames but fails its checks and goes
// on after it, ending (and classifying the damage) where framing stops.
func TestCheckModes(t *testing.T) {
	good := []batch.Batch{simpleBatch(t, 0, 3, 100, 50), simpleBatch(t, 10, 3, 100, 50), simpleBatch(t, 20, 3, 100, 50)}
	data := slices.Concat(good[0], good[1], good[2])
	p1 := int64(len(good[0]))
	data[p1+int64(len(good[1]))-1] ^= 0xff // the second batch fails its CRC
	path := filepath.Join(t.TempDir(), FileName(0, LogSuffix))
	require.NoError(t, os.WriteFile(path, data, 0o644))
	bases := func(opts CheckOptions) (out []int64, bad []int64, res RecoverResult) {
		res, err := Check(nil, path, 0, opts, func(h BatchInfo, b batch.Batch, e error) error {
			if e != nil {
				require.ErrorIs(t, e, base.ErrCorrupt)
				bad = append(bad, h.BaseOffset)
				return nil
			}
			out = append(out, h.BaseOffset)
			return nil
		})
		require.NoError(t, err)
		return out, bad, res
	}

	got, bad, res := bases(CheckOptions{})
	require.Equal(t, []int64{0}, got)
	require.Empty(t, bad)
	require.Equal(t, p1, res.ValidBytes)
	require.False(t, base.IsTornTail(res.Cause), "a valid batch follows: corruption")

	got, _, res = bases(CheckOptions{HeadersOnly: true})
	require.Equal(t, []int64{0, 10, 20}, got)
	require.NoError(t, res.Cause)
	require.Equal(t, int64(23), res.NextOffset)

	got, _, res = bases(CheckOptions{HeadersOnly: true, From: p1})
	require.Equal(t, []int64{10, 20}, got)
	require.Equal(t, int64(len(data)), res.ValidBytes)

	// KeepGoing, and a torn tail after the walk goes on.
	torn := slices.Concat(data, []byte(good[2][:40]))
	binary.BigEndian.PutUint64(torn[len(data):], 30)
	require.NoError(t, os.WriteFile(path, torn, 0o644))
	got, bad, res = bases(CheckOptions{KeepGoing: true})
	require.Equal(t, []int64{0, 20}, got)
	require.Equal(t, []int64{10}, bad)
	require.Equal(t, int64(len(data)), res.ValidBytes)
	require.True(t, base.IsTornTail(res.Cause), "%v", res.Cause)
	require.Equal(t, string(torn), string(readAll(t, vfs.Default, path)))

	_, err := Check(nil, path, 0, CheckOptions{From: int64(len(torn)) + 1}, nil)
	require.Error(t, err)
}
