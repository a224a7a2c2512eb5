package log_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/legacy"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// entryRange frames the first entry of set (v2 or legacy) and returns the
// offsets it covers and its size.
func entryRange(t *testing.T, set []byte) (first, last int64, size int) {
	t.Helper()
	n, magic, next, err := batch.FrameEntry(set)
	require.NoError(t, err)
	if legacy.IsMagic(magic) {
		e := legacy.Entry(set[:n])
		var d batch.Decoder
		require.NoError(t, d.ValidateLegacy(e))
		first, err := d.LegacyBaseOffset(e)
		require.NoError(t, err)
		return first, next - 1, n
	}
	bt := batch.Batch(set[:n])
	require.NoError(t, bt.Validate())
	return bt.BaseOffset(), bt.LastOffset(), n
}

// TestLegacyDataSurvivesOpen is issue 12 item 1: Open, with the default
// and the strict policy, after a clean and after an unclean shutdown,
// keeps every byte of legacy data, serves it as stored from every offset,
// and appends continue after it (as v2). On the old code the unclean
// default open cut 00000000000000000000.log to 0 bytes and deleted
// segment 2.
func TestLegacyDataSurvivesOpen(t *testing.T) {
	policies := map[string]plog.RecoveryPolicy{"default": plog.DefaultRecovery{}, "strict": plog.StrictRecovery{}}
	for _, d := range legacyDirs {
		for pname, policy := range policies {
			for _, clean := range []bool{false, true} {
				name := d.name + "/" + pname + "/unclean"
				if clean {
					name = d.name + "/" + pname + "/clean"
				}
				t.Run(name, func(t *testing.T) {
					dir := copyFixtureFrom(t, "legacy", d.name)
					if clean {
						require.NoError(t, os.WriteFile(filepath.Join(dir, ".kafka_cleanshutdown"), nil, 0o644))
					}
					before := logFiles(t, dir)
					p, err := plog.Open(dir, plog.Config{Recovery: policy})
					require.NoError(t, err)
					require.Equal(t, before, logFiles(t, dir), "Open changed a .log")
					require.Equal(t, int64(0), p.LogStartOffset())
					require.Equal(t, d.end, p.LogEndOffset())
					require.NoError(t, p.Verify())
					checkReads(t, p, before, d.end)

					// Appends stay v2 and continue after the legacy data;
					// a legacy message keeps its typed error.
					legacy := legacyMessage(0, legacy.MagicV1, 1000, "k", strings.Repeat("v", 64))
					_, err = p.AppendBatch(legacy)
					require.ErrorIs(t, err, plog.ErrInvalidBatch)
					require.ErrorIs(t, err, batch.ErrUnsupportedMagic)
					off, err := p.AppendBatch(logtest.MakeBatch(2, 10, time.Now().UnixMilli(), 1))
					require.NoError(t, err)
					require.Equal(t, d.end, off)
					require.NoError(t, p.Close())

					// Reopen cleanly and after a crash: the same log.
					for _, unclean := range []bool{false, true} {
						if unclean {
							require.NoError(t, os.Remove(filepath.Join(dir, ".kafka_cleanshutdown")))
						}
						p, err = plog.Open(dir, plog.Config{Recovery: policy})
						require.NoError(t, err)
						require.Equal(t, d.end+2, p.LogEndOffset())
						checkReads(t, p, before, d.end)
						require.NoError(t, p.Verify())
						require.NoError(t, p.Close())
					}
				})
			}
		}
	}
}

// checkReads reads from every offset below end and checks that the first
// entry returned holds it and is byte for byte the stored entry.
func checkReads(t *testing.T, p *plog.Partition, files map[string][]byte, end int64) {
	t.Helper()
	var stored []byte
	for _, name := range slices.Sorted(mapsKeys(files)) {
		stored = append(stored, files[name]...)
	}
	for o := int64(0); o < end; o++ {
		r, err := p.ReadFrom(o, 1)
		require.NoError(t, err)
		got := r.Bytes()
		first, last, n := entryRange(t, got)
		require.Len(t, got, n, "maxBytes 1: exactly one entry")
		require.LessOrEqual(t, first, o, "offset %d", o)
		require.GreaterOrEqual(t, last, o, "offset %d", o)
		require.Equal(t, last+1, r.NextOffset())
		require.True(t, bytes.Contains(stored, got), "offset %d: not the stored bytes", o)
		require.NoError(t, r.Close())
	}
	r, err := p.ReadFrom(0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, files["00000000000000000000.log"], r.Bytes())
	require.NoError(t, r.Close())
}

func mapsKeys(m map[string][]byte) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestLegacyOffsetForTimestamp: time lookups answer across magic 1
// messages, gzip wrappers and v2 batches as a scan of every record does,
// and magic 0 messages (no timestamp: -1, as Kafka has it) never match.
func TestLegacyOffsetForTimestamp(t *testing.T) {
	t.Run("mixed v1 and v2", func(t *testing.T) {
		dir := copyFixtureFrom(t, "legacy", "mixed-0")
		set := logFiles(t, dir)["00000000000000000000.log"]
		recs := recordTimes(t, set)
		require.Len(t, recs, 20)
		p, err := plog.Open(dir, plog.Config{})
		require.NoError(t, err)
		defer p.Close()
		maxTS, maxOff := int64(-1), int64(-1)
		for _, r := range recs {
			if r[1] > maxTS {
				maxTS, maxOff = r[1], r[0]
			}
			for _, ts := range []int64{r[1] - 1, r[1], r[1] + 1} {
				want, found := int64(-1), false
				for _, c := range recs {
					if c[1] >= ts {
						want, found = c[0], true
						break
					}
				}
				got, ok, err := p.OffsetForTimestamp(ts)
				require.NoError(t, err)
				require.Equal(t, found, ok, "ts %d", ts)
				if found {
					require.Equal(t, want, got.Offset, "ts %d", ts)
				}
			}
		}
		got, ok, err := p.OffsetForTimestamp(plog.MaxTimestamp)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, plog.TimestampOffset{Timestamp: maxTS, Offset: maxOff}, plog.TimestampOffset{Timestamp: got.Timestamp, Offset: got.Offset})
	})
	t.Run("v0 messages have no timestamp", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "t-0")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		v2 := logtest.MakeBatch(1, 5, 5000, 1)
		batch.Batch(v2).SetBaseOffset(2)
		data := slices.Concat(legacyMessage(0, legacy.MagicV0, 0, "a", "1"), legacyMessage(1, legacy.MagicV0, 0, "b", "2"), v2)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), data, 0o644))
		p, err := plog.Open(dir, plog.Config{})
		require.NoError(t, err)
		defer p.Close()
		require.Equal(t, int64(3), p.LogEndOffset())
		for _, ts := range []int64{0, 4999, 5000} {
			got, ok, err := p.OffsetForTimestamp(ts)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, int64(2), got.Offset, "ts %d", ts)
		}
		_, ok, err := p.OffsetForTimestamp(5001)
		require.NoError(t, err)
		require.False(t, ok)
		r, err := p.ReadFrom(1, 1)
		require.NoError(t, err)
		require.Equal(t, data[len(data)-len(v2)-legacyLen(data):len(data)-len(v2)], r.Bytes())
		require.NoError(t, r.Close())
	})
}

// TestLegacyRecovery: a real torn tail after legacy data is still cut;
// a legacy message that fails its CRC where a crash of partlog's cannot
// have left it (a sealed segment, or data after it) is never cut: Open
// refuses, under every policy, with an error naming the file and the
// position, and changes no .log.
func TestLegacyRecovery(t *testing.T) {
	t.Run("torn tail after legacy data is cut", func(t *testing.T) {
		for pname, policy := range map[string]plog.RecoveryPolicy{"default": plog.DefaultRecovery{}, "strict-allow-torn": plog.StrictRecovery{AllowTornTail: true}} {
			t.Run(pname, func(t *testing.T) {
				dir := copyFixtureFrom(t, "legacy", "mixed-0")
				path := filepath.Join(dir, "00000000000000000000.log")
				good, err := os.ReadFile(path)
				require.NoError(t, err)
				torn := logtest.MakeBatch(3, 100, 1_800_000_000_000, 2)
				batch.Batch(torn).SetBaseOffset(20)
				require.NoError(t, os.WriteFile(path, slices.Concat(good, torn[:len(torn)/2]), 0o644))
				p, err := plog.Open(dir, plog.Config{Recovery: policy})
				require.NoError(t, err)
				require.Equal(t, int64(20), p.LogEndOffset())
				require.NoError(t, p.Close())
				after, err := os.ReadFile(path)
				require.NoError(t, err)
				require.Equal(t, good, after)
			})
		}
	})
	tests := []struct {
		name    string
		dir     string
		file    string
		flipAt  int   // byte flipped (inside a legacy message's value)
		wantPos int64 // position reported: the start of that message
	}{
		{"sealed segment", "issue12-0", "00000000000000000000.log", 70, 0},
		{"sealed segment, second message", "issue12-0", "00000000000000000000.log", 140, 72},
		{"active segment with data after it", "mixed-0", "00000000000000000000.log", 140, 72},
		{"active segment, gzip wrapper with data after it", "mixed-0", "00000000000000000000.log", 200, 143},
	}
	for _, tt := range tests {
		for pname, policy := range map[string]plog.RecoveryPolicy{"default": plog.DefaultRecovery{}, "strict": plog.StrictRecovery{}, "strict-allow-torn": plog.StrictRecovery{AllowTornTail: true}} {
			t.Run(tt.name+"/"+pname, func(t *testing.T) {
				dir := copyFixtureFrom(t, "legacy", tt.dir)
				path := filepath.Join(dir, tt.file)
				data, err := os.ReadFile(path)
				require.NoError(t, err)
				data[tt.flipAt] ^= 0x20
				require.NoError(t, os.WriteFile(path, data, 0o644))
				before := logFiles(t, dir)
				_, err = plog.Open(dir, plog.Config{Recovery: policy})
				require.Error(t, err)
				require.ErrorIs(t, err, plog.ErrRecoveryRefused)
				require.ErrorIs(t, err, base.ErrCorrupt)
				require.ErrorIs(t, err, segment.ErrLegacyKept)
				require.False(t, base.IsTornTail(err))
				var ce *base.CorruptionError
				require.True(t, errors.As(err, &ce))
				require.Equal(t, path, ce.File)
				require.Equal(t, tt.wantPos, ce.Pos)
				require.Equal(t, before, logFiles(t, dir), "a .log changed")
				// A clean open serves the data as stored; Verify names the damage.
				require.NoError(t, os.WriteFile(filepath.Join(dir, ".kafka_cleanshutdown"), nil, 0o644))
				p, err := plog.Open(dir, plog.Config{Recovery: policy})
				require.NoError(t, err)
				err = p.Verify()
				require.ErrorIs(t, err, base.ErrCorrupt)
				require.True(t, errors.As(err, &ce))
				require.Equal(t, path, ce.File)
				require.NoError(t, p.Close())
				require.Equal(t, before, logFiles(t, dir))
			})
		}
	}
}

// TestLegacyRecoveryKeepsSealedSegmentCutInsideAMessage: a sealed segment
// Kafka wrote whose file ends inside a legacy message (its header whole,
// its size running past the end) is legacy data recovery cannot prove
// torn: partlog never writes legacy messages, so no crash of its own left
// it, and a sealed segment without a recovery point was flushed whole.
// Open refuses under every policy and changes no .log. It used to take
// the message for a torn tail: DefaultRecovery cut the segment before it
// (issue12-0's first message, the whole segment) and removed the later
// segment.
func TestLegacyRecoveryKeepsSealedSegmentCutInsideAMessage(t *testing.T) {
	for _, cut := range []int64{40, 71, 100} {
		for pname, policy := range map[string]plog.RecoveryPolicy{"default": plog.DefaultRecovery{}, "strict": plog.StrictRecovery{}, "strict-allow-torn": plog.StrictRecovery{AllowTornTail: true}} {
			t.Run(fmt.Sprintf("%d/%s", cut, pname), func(t *testing.T) {
				dir := copyFixtureFrom(t, "legacy", "issue12-0")
				path := filepath.Join(dir, "00000000000000000000.log")
				require.NoError(t, os.Truncate(path, cut))
				before := logFiles(t, dir)
				p, err := plog.Open(dir, plog.Config{Recovery: policy})
				if err == nil {
					_ = p.Close()
				}
				require.ErrorIs(t, err, plog.ErrRecoveryRefused)
				require.ErrorIs(t, err, segment.ErrLegacyKept)
				var ce *base.CorruptionError
				require.True(t, errors.As(err, &ce))
				require.Equal(t, path, ce.File)
				require.Equal(t, before, logFiles(t, dir), "a .log changed")
			})
		}
	}
	// The end of the active segment is still a torn tail, whatever its
	// magic: cut by DefaultRecovery, the first message kept.
	dir := copyFixtureFrom(t, "legacy", "mixed-0")
	path := filepath.Join(dir, "00000000000000000000.log")
	require.NoError(t, os.Truncate(path, 100))
	p, err := plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	require.Equal(t, int64(1), p.LogEndOffset())
	require.NoError(t, p.Close())
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, int64(72), fi.Size())
}
