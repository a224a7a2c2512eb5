package segment

import (
	"encoding/binary"
	"errors"
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

// legacyMixed is testdata/legacy/mixed.log: magic 1 messages, gzip magic
// 1 wrappers and v2 batches, offsets 0-19. Entry positions and the offsets
// each covers.
var legacyMixedEntries = []struct{ pos, first, last int64 }{
	{0, 0, 0}, {72, 1, 1}, {143, 2, 2}, {250, 3, 3}, {356, 4, 4}, {462, 5, 5}, {568, 6, 6}, {686, 7, 7},
	{804, 8, 9}, {957, 10, 11}, {1094, 12, 13}, {1244, 14, 15}, {1375, 16, 16}, {1445, 17, 17}, {1517, 18, 19},
}

// openLegacy writes data as segment 0 of a new directory and opens it.
func openLegacy(t *testing.T, data []byte, cfg Config) (*Segment, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, FileName(0, LogSuffix))
	require.NoError(t, os.WriteFile(path, data, 0o644))
	s, err := Open(vfs.Default, dir, 0, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

// TestLegacyTranslateAndRecover: Open and Recover (both kinds) keep every
// byte of a segment holding legacy messages; every offset translates to the
// entry holding it, with or without an index, mapped or not.
func TestLegacyTranslateAndRecover(t *testing.T) {
	data := legacyMixed(t)
	for _, cfg := range []Config{{}, {DisableMmap: true}, {IndexIntervalBytes: 1}} {
		for _, sealed := range []bool{false, true} {
			s, path := openLegacy(t, data, cfg)
			require.Equal(t, int64(len(data)), s.Size())
			require.Equal(t, int64(20), s.NextOffset())
			rec := s.Recover
			if sealed {
				rec = s.RecoverSealed
			}
			res, err := rec(batch.MaxBatchSize)
			require.NoError(t, err)
			require.NoError(t, res.Cause)
			require.Equal(t, RecoverResult{ValidBytes: int64(len(data)), NextOffset: 20}, res)
			require.Equal(t, data, readAll(t, vfs.Default, path))
			for _, e := range legacyMixedEntries {
				for o := e.first; o <= e.last; o++ {
					pos, info, found, err := s.Translate(o, 0)
					require.NoError(t, err)
					require.True(t, found)
					require.Equal(t, e.pos, pos, "offset %d", o)
					require.Equal(t, e.first, info.BaseOffset, "offset %d", o)
					require.Equal(t, e.last, info.LastOffset, "offset %d", o)
				}
			}
			if cfg.IndexIntervalBytes == 1 {
				require.Positive(t, s.offIdx.Entries(), "every entry indexed")
			}
			ts, off := s.MaxTimestamp()
			require.Equal(t, int64(1633374040837), ts)
			require.Equal(t, int64(19), off)
		}
	}
}

// TestLegacyRecoverNeverCutsWhatItCannotProveTorn: a legacy message that
// fails its CRC is kept (RecoverResult.Kept, nothing cut) in a sealed
// segment or when data follows it, and so is anything before a valid
// legacy message; at the very end of the active segment invalid bytes are
// a torn tail, cut whatever their magic.
func TestLegacyRecoverNeverCutsWhatItCannotProveTorn(t *testing.T) {
	good := legacyMixed(t)
	torn := simpleBatch(t, 20, 3, 1_800_000_000_000, 100)
	tests := []struct {
		name     string
		data     func() []byte
		sealed   bool
		kept     bool
		validPos int64
		torn     bool
	}{
		{"bad CRC, data after it", func() []byte { d := slices.Clone(good); d[140] ^= 1; return d }, false, true, 72, false},
		{"bad CRC in the last gzip wrapper of a sealed segment", func() []byte { d := slices.Clone(good); d[1600] ^= 1; return d }, true, true, 1517, false},
		{"bad CRC in the last gzip wrapper of the active segment", func() []byte { d := slices.Clone(good); d[1600] ^= 1; return d }, false, false, 1517, true},
		{"v2 damage followed by legacy messages", func() []byte { d := slices.Clone(good); d[400] ^= 1; return d }, false, true, 356, false},
		{"torn v2 tail after legacy data", func() []byte { return slices.Concat(good, torn[:len(torn)/2]) }, false, false, int64(len(good)), true},
		{"zeroed tail after legacy data", func() []byte { return slices.Concat(good, make([]byte, 300)) }, true, false, int64(len(good)), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := tt.data()
			s, path := openLegacy(t, data, Config{})
			rec := s.Recover
			if tt.sealed {
				rec = s.RecoverSealed
			}
			res, err := rec(batch.MaxBatchSize)
			require.NoError(t, err)
			require.Error(t, res.Cause)
			require.ErrorIs(t, res.Cause, base.ErrCorrupt)
			require.Equal(t, tt.kept, res.Kept, "cause: %v", res.Cause)
			require.Equal(t, tt.kept, errorsIs(res.Cause, ErrLegacyKept))
			require.Equal(t, tt.torn, base.IsTornTail(res.Cause), "cause: %v", res.Cause)
			require.Equal(t, tt.validPos, res.ValidBytes)
			if tt.kept {
				require.Zero(t, res.TruncatedBytes)
				require.Equal(t, data, readAll(t, vfs.Default, path), "kept data was cut")
			} else {
				require.Equal(t, data[:tt.validPos], readAll(t, vfs.Default, path))
			}
		})
	}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// TestRecoverLegacyLookalikeInsideDamagedBatch: the payload of the damaged
// v2 batch itself is never searched for legacy data. A torn last batch
// (its header intact, its claimed length past the end of the file) or a
// last batch failing its CRC whose record value holds a valid legacy
// message is a torn tail, cut; it is not legacy data recovery must keep.
// A real legacy message after the damaged batch's records is still kept,
// also when the batch's length field is damaged to run past the end.
func TestRecoverLegacyLookalikeInsideDamagedBatch(t *testing.T) {
	first := simpleBatch(t, 0, 2, 1_800_000_000_000, 50)
	carrier := batchCarryingLegacy(t, 2, 10)
	tests := []struct {
		name   string
		data   func() []byte
		sealed bool
		kept   bool
		torn   bool
	}{
		{"torn last batch", func() []byte { return slices.Concat(first, carrier[:len(carrier)-20]) }, false, false, true},
		{"torn last batch of a sealed segment", func() []byte { return slices.Concat(first, carrier[:len(carrier)-20]) }, true, false, true},
		{"last batch fails its CRC", func() []byte {
			d := slices.Concat(first, carrier)
			d[len(first)+batchaccess.CRCStart+2] ^= 1
			return d
		}, false, false, true},
		{"batch failing its CRC, then a legacy message", func() []byte {
			d := slices.Concat(first, carrier, legacyMessage(20, "real"))
			d[len(first)+batchaccess.CRCStart+2] ^= 1
			return d
		}, false, true, false},
		{"length damaged past the end, then a legacy message", func() []byte {
			d := slices.Concat(first, carrier, legacyMessage(20, "real"))
			binary.BigEndian.PutUint32(d[len(first)+8:], 1<<20)
			return d
		}, false, true, false},
	}
	for _, tt := range tests {
		for _, cfg := range []Config{{}, {DisableMmap: true}} {
			t.Run(fmt.Sprintf("%s/mmap=%v", tt.name, !cfg.DisableMmap), func(t *testing.T) {
				data := tt.data()
				s, path := openLegacy(t, data, cfg)
				rec := s.Recover
				if tt.sealed {
					rec = s.RecoverSealed
				}
				res, err := rec(batch.MaxBatchSize)
				require.NoError(t, err)
				require.ErrorIs(t, res.Cause, base.ErrCorrupt)
				require.Equal(t, tt.kept, res.Kept, "cause: %v", res.Cause)
				require.Equal(t, tt.torn, base.IsTornTail(res.Cause), "cause: %v", res.Cause)
				require.Equal(t, int64(len(first)), res.ValidBytes)
				require.Equal(t, int64(2), res.NextOffset)
				if tt.kept {
					require.Equal(t, data, readAll(t, vfs.Default, path))
				} else {
					require.Equal(t, []byte(first), readAll(t, vfs.Default, path))
				}
			})
		}
	}
}
