package segment

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"pgregory.net/rapid"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/rapidflag"
	"github.com/partlog/partlog/internal/vfs"
)

// genSpecs draws a batch sequence from base: gaps between batches, gaps
// inside batches (compaction), timestamps that go up and down, batches
// without timestamps, LogAppendTime, compression. Batch max timestamps are
// distinct (see corruptIndex).
func genSpecs(t *rapid.T, base int64) []spec {
	n := rapid.IntRange(0, 40).Draw(t, "batches")
	next := base + rapid.Int64Range(0, 3).Draw(t, "firstGap")
	var out []spec
	for i := range n {
		next += rapid.Int64Range(0, 2).Draw(t, "gap")
		recs := rapid.IntRange(1, 6).Draw(t, "records")
		sp := spec{valueSize: rapid.IntRange(0, 300).Draw(t, "valueSize")}
		maxTs := int64(rapid.IntRange(0, 50).Draw(t, "ts"))*1000 + int64(i)
		noTs := rapid.IntRange(0, 9).Draw(t, "noTs") == 0
		off := next
		for r := range recs {
			if r > 0 {
				off += 1 + rapid.Int64Range(0, 2).Draw(t, "innerGap")
			}
			ts := maxTs - rapid.Int64Range(0, 900).Draw(t, "tsBack")
			if r == recs-1 {
				ts = maxTs
			}
			if noTs {
				ts = -1
			}
			sp.offsets = append(sp.offsets, off)
			sp.timestamps = append(sp.timestamps, ts)
		}
		switch rapid.IntRange(0, 9).Draw(t, "kind") {
		case 0:
			if !noTs {
				sp.logAppend = maxTs
			}
		case 1:
			sp.codec = batch.CompressionGzip
		case 2:
			sp.codec = batch.CompressionLZ4
		}
		out = append(out, sp)
		next = off + 1
	}
	return out
}

func TestPropertyLookups(t *testing.T) {
	root := t.TempDir()
	iter := 0
	rapid.Check(t, func(t *rapid.T) {
		iter++
		var fsys vfs.FS
		dir := "/seg"
		cfg := Config{IndexIntervalBytes: rapid.IntRange(-1, 700).Draw(t, "interval")}
		if rapid.Bool().Draw(t, "smallIndex") {
			cfg.MaxIndexBytes = 12 * rapid.IntRange(2, 8).Draw(t, "indexEntries")
		} else {
			cfg.MaxIndexBytes = 64 << 10
		}
		switch rapid.IntRange(0, 3).Draw(t, "fs") {
		case 0:
			fsys, dir = vfs.Default, filepath.Join(root, fmt.Sprint(iter))
		case 1:
			fsys, dir = vfs.Default, filepath.Join(root, fmt.Sprint(iter))
			cfg.DisableMmap = true
		default:
			fsys = vfs.NewMem()
		}
		mustMkdir(t, fsys, dir)
		base := rapid.Int64Range(0, 1000).Draw(t, "base")
		s, err := Create(fsys, dir, base, cfg)
		require.NoError(t, err)
		for _, sp := range genSpecs(t, base) {
			b := build(t, sp)
			if _, err := s.Append(b); err != nil {
				if errors.Is(err, ErrSegmentFull) {
					break // the partition would roll here
				}
				require.NoError(t, err)
			}
		}
		if rapid.IntRange(0, 4).Draw(t, "truncate") == 0 && s.NextOffset() > base {
			off := rapid.Int64Range(base, s.NextOffset()).Draw(t, "truncateTo")
			before := segmentModel(t, s)
			removed, err := s.TruncateTo(off)
			require.NoError(t, err)
			j := before.translate(off)
			if want := int64(0); j >= 0 {
				want = before.size - before.pos[j]
				require.Equal(t, want, removed, "TruncateTo(%d) removed %d, want %d", off, removed, want)
				require.Equal(t, before.pos[j], s.Size(), "TruncateTo(%d) removed %d, want %d", off, removed, want)
			}
		}
		m := checkSegment(t, s)
		checkLookups(t, s, m)
		size, next := s.Size(), s.NextOffset()
		maxTs, _ := s.MaxTimestamp()
		sealed := rapid.Bool().Draw(t, "seal")
		if sealed {
			require.NoError(t, s.Seal())
		}
		liveOff, liveTime := indexEntries(s)
		require.NoError(t, s.Close())

		// Reopen as is, then with damaged indexes: same answers.
		for round := range 3 {
			if round > 0 {
				corruptIndex(t, fsys, dir, base)
			}
			r, err := Open(fsys, dir, base, cfg)
			require.NoError(t, err, "reopen %d", round)
			require.Equal(t, size, r.Size(), "reopen %d: size %d next %d, want %d %d", round, r.Size(), r.NextOffset(), size, next)
			require.Equal(t, next, r.NextOffset(), "reopen %d: size %d next %d, want %d %d", round, r.Size(), r.NextOffset(), size, next)
			ts, _ := r.MaxTimestamp()
			require.Equal(t, maxTs, ts, "reopen %d: max timestamp %d, want %d", round, ts, maxTs)
			checkLookups(t, r, m)
			if round == 0 {
				checkSegment(t, r)
				// Recovery rebuilds the indexes Append built (Kafka's
				// rule in both places; sealing added the final time
				// entry that recovery adds).
				res, err := r.Recover(0)
				require.NoError(t, err, "Recover = %+v, %v", res, err)
				require.NoError(t, res.Cause, "Recover = %+v, %v", res, err)
				require.Equal(t, size, res.ValidBytes, "Recover = %+v, %v", res, err)
				require.Equal(t, next, res.NextOffset, "Recover = %+v, %v", res, err)
				gotOff, gotTime := indexEntries(r)
				require.True(t, equalEntries(gotOff, liveOff), "recovered indexes differ:\n%v %v\nlive:\n%v %v", gotOff, gotTime, liveOff, liveTime)
				if sealed {
					require.True(t, equalEntries(gotTime, liveTime), "recovered indexes differ:\n%v %v\nlive:\n%v %v", gotOff, gotTime, liveOff, liveTime)
				}
				checkLookups(t, r, m)
			}
			require.NoError(t, r.Close())
		}
	})
}

// corruptIndex damages one or both index files the ways crashes and bad
// disks do. Lookups must still be right after a reopen: Open detects the
// damage and rebuilds, or lookups detect an entry that does not match the
// log. (The one damage neither can see: a time entry's offset moved to a
// later batch with the same max timestamp; genSpecs keeps batch max
// timestamps distinct.)
func corruptIndex(t *rapid.T, fsys vfs.FS, dir string, base int64) {
	for _, suffix := range []string{IndexSuffix, TimeIndexSuffix} {
		if !rapid.Bool().Draw(t, "corrupt"+suffix) {
			continue
		}
		p := segPath(dir, base, suffix)
		data := readAll(t, fsys, p)
		switch mode := rapid.IntRange(0, 6).Draw(t, "mode"); mode {
		case 0: // deleted
			require.NoError(t, fsys.Remove(p))
			continue
		case 1: // cut anywhere
			data = data[:rapid.IntRange(0, len(data)).Draw(t, "cut")]
		case 2: // preallocated zero tail after a crash (KAFKA-12734)
			data = append(data, make([]byte, 12*rapid.IntRange(1, 50).Draw(t, "zeros"))...)
		case 3: // garbage
			data = make([]byte, rapid.IntRange(0, 200).Draw(t, "garbageLen"))
			for i := range data {
				data[i] = byte(rapid.IntRange(0, 255).Draw(t, "garbage"))
			}
		case 4, 5: // one byte changed
			if len(data) > 0 {
				i := rapid.IntRange(0, len(data)-1).Draw(t, "at")
				data[i] ^= byte(rapid.IntRange(1, 255).Draw(t, "xor"))
			}
		case 6: // emptied
			data = nil
		}
		f, err := fsys.Create(p)
		require.NoError(t, err)
		_, err = f.Write(data)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
}

// TestMain turns rapid's fail files off (rapidflag.Main).
func TestMain(m *testing.M) { rapidflag.Main(m) }
