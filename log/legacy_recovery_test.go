package log_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/batchaccess"
	"github.com/partlog/partlog/internal/legacy"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// recoveryPolicies are the policies every law-12 case runs under.
var recoveryPolicies = map[string]plog.RecoveryPolicy{
	"default":           plog.DefaultRecovery{},
	"strict":            plog.StrictRecovery{},
	"strict-allow-torn": plog.StrictRecovery{AllowTornTail: true},
}

// v2At returns a one-record v2 batch at offset.
func v2At(offset int64, seed byte) []byte {
	b := logtest.MakeBatch(1, 40, 1_800_000_000_000+offset, seed)
	batch.Batch(b).SetBaseOffset(offset)
	return b
}

// TestRecoveryNeverRemovesLaterLegacySegments: a Kafka directory copied in
// as is (no recovery point, no clean-shutdown marker: recovery starts at
// segment 0) whose first segment ends in a v2 batch failing its CRC and
// whose later segment holds valid magic 1 messages. Cutting the first
// segment would remove the later one and its legacy data, which recovery
// cannot prove torn (law 12): Open refuses under every policy, naming the
// damaged file and position, and changes no .log.
func TestRecoveryNeverRemovesLaterLegacySegments(t *testing.T) {
	legacySeg := slices.Concat(legacyMessage(2, legacy.MagicV1, 1_600_000_000_000, "k", "a"),
		legacyMessage(3, legacy.MagicV1, 1_600_000_000_001, "k", "b"),
		legacyMessage(4, legacy.MagicV1, 1_600_000_000_002, "k", "c"))
	first, second := v2At(0, 1), v2At(1, 2)
	layouts := []struct {
		name  string
		files map[string][]byte
	}{
		{"legacy in the next segment", map[string][]byte{
			"00000000000000000000.log": slices.Concat(first, second),
			"00000000000000000002.log": legacySeg,
		}},
		{"legacy two segments later", map[string][]byte{
			"00000000000000000000.log": slices.Concat(first, second),
			"00000000000000000002.log": slices.Concat(legacySeg[:legacyLen(legacySeg)], v2At(3, 3)),
			"00000000000000000004.log": legacyMessage(4, legacy.MagicV0, 0, "k", "c"),
		}},
		// The next segment's legacy messages follow a batch whose length
		// no longer frames, before its last index entry (its .index and
		// .timeindex name the last legacy message): the damage lies
		// inside the segment as Open found it (law 5). Recovery would
		// keep the legacy data after it (it cannot prove it torn), so
		// the walk that looks for legacy data in later segments before
		// any of them is recovered counts it (it used to fail with an
		// assertion error, a panic under -tags invariants).
		// Without its indexes the next segment ends, as Open finds it,
		// where its batches stop framing: the legacy messages lie past
		// its size, in the bytes its recovery judges (it used to be cut
		// with them under DefaultRecovery).
		{"legacy after framing damage past the next segment's end", map[string][]byte{
			"00000000000000000000.log": slices.Concat(first, second),
			"00000000000000000002.log": slices.Concat(v2At(2, 2), zeroLength(v2At(3, 3)), legacySeg[legacyLen(legacySeg):]),
		}},
		{"legacy after framing damage in the next segment", map[string][]byte{
			"00000000000000000000.log":       slices.Concat(first, second),
			"00000000000000000002.log":       slices.Concat(v2At(2, 2), zeroLength(v2At(3, 3)), legacySeg[legacyLen(legacySeg):]),
			"00000000000000000002.index":     offsetIndexEntry(4-2, int64(2*len(v2At(2, 2))+legacyLen(legacySeg))),
			"00000000000000000002.timeindex": binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, 1_600_000_000_002), 4-2),
		}},
	}
	for _, l := range layouts {
		for pname, policy := range recoveryPolicies {
			t.Run(l.name+"/"+pname, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "copied-0")
				require.NoError(t, os.MkdirAll(dir, 0o755))
				for name, data := range l.files {
					data = slices.Clone(data)
					if name == "00000000000000000000.log" {
						data[len(first)+batchaccess.CRCStart+5] ^= 0x10 // the last batch fails its CRC
					}
					require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
				}
				before := logFiles(t, dir)
				_, err := plog.Open(dir, plog.Config{Recovery: policy})
				require.Error(t, err)
				require.ErrorIs(t, err, plog.ErrRecoveryRefused)
				require.ErrorIs(t, err, base.ErrCorrupt)
				require.ErrorIs(t, err, segment.ErrLegacyKept)
				var ce *base.CorruptionError
				require.True(t, errors.As(err, &ce))
				require.Equal(t, filepath.Join(dir, "00000000000000000000.log"), ce.File)
				require.Equal(t, int64(len(first)), ce.Pos)
				require.Equal(t, before, logFiles(t, dir), "a .log changed or was removed")
			})
		}
	}
}

// zeroLength returns b with its batchLength set to 0: it frames as no
// batch.
func zeroLength(b []byte) []byte {
	b = slices.Clone(b)
	binary.BigEndian.PutUint32(b[8:], 0)
	return b
}

// offsetIndexEntry is one .index entry: relative offset rel at position pos.
func offsetIndexEntry(rel int32, pos int64) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(rel)), uint32(pos))
}

// TestRecoveryTornBatchCarryingLegacyBytes: a crash tears the last batch,
// whose record value holds a legacy message with a valid CRC (a mirror
// storing raw message sets). The torn batch's own payload is not legacy
// data following the damage: DefaultRecovery and StrictRecovery with
// AllowTornTail cut the torn tail, StrictRecovery refuses it as a torn tail.
func TestRecoveryTornBatchCarryingLegacyBytes(t *testing.T) {
	for pname, policy := range recoveryPolicies {
		t.Run(pname, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "mirror-0")
			p, err := plog.Open(dir, plog.Config{})
			require.NoError(t, err)
			now := time.Now().UnixMilli()
			_, err = p.AppendBatch(logtest.MakeBatch(2, 30, now, 1))
			require.NoError(t, err)
			good := p.SegmentInfos()[0].Size
			bld := batch.NewBuilder(batch.BuilderOptions{})
			require.NoError(t, bld.Add(batch.Record{Timestamp: now, Key: []byte("k"),
				Value: slices.Concat(legacyMessage(7, legacy.MagicV1, 1_600_000_000_000, "", "raw message set"), bytes.Repeat([]byte("rest of the value "), 3))}))
			carrier, err := bld.Build()
			require.NoError(t, err)
			_, err = p.AppendBatch(carrier)
			require.NoError(t, err)
			require.NoError(t, p.Sync())
			require.NoError(t, p.Close())
			makeUnclean(t, dir)
			path := filepath.Join(dir, "00000000000000000000.log")
			st, err := os.Stat(path)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(path, st.Size()-20))

			p, err = plog.Open(dir, plog.Config{Recovery: policy})
			if s, ok := policy.(plog.StrictRecovery); ok && !s.AllowTornTail {
				require.ErrorIs(t, err, plog.ErrRecoveryRefused)
				require.True(t, base.IsTornTail(err), "%v", err)
				require.NotErrorIs(t, err, segment.ErrLegacyKept)
				return
			}
			require.NoError(t, err)
			require.Equal(t, int64(2), p.LogEndOffset())
			require.NoError(t, p.Close())
			st, err = os.Stat(path)
			require.NoError(t, err)
			require.Equal(t, good, st.Size())
		})
	}
}
