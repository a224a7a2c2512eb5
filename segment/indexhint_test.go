package segment

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
)

// TestIndexEntryIntoAValue: offset index entries whose positions were
// damaged to point inside a record's value, at bytes that frame as a
// batch (batches stored as data, followed by data that frames as
// nothing), mislead neither Open nor a lookup, but for the one exception
// DESIGN law 5 names. Two kinds of value:
//   - the header of a batch of the entry's offset: it passes the checks
//     made of the header at an entry's position, and the bytes after it
//     frame as nothing (Read's walk from the batch lastIndexedBatch
//     found, Open's scan from the entry before the last). It is the
//     exception for Translate of exactly the entry's offset, which reads
//     no header after the entry's and answers with the fake batch, so
//     that one lookup is not checked;
//   - a whole batch of the offset before the entry's, then such a header:
//     two headers frame, and the scans from the entry (translate,
//     FindOffsetByTimestamp, scanFromIndex under TruncateTo and Open's
//     search for the largest timestamp) meet the bytes that do not frame
//     and must scan again from a known boundary.
//
// For the last entry Open must find the log's end and next offset, not
// where the bytes after the entry stop framing, and rebuild the index;
// for the others Translate, FindOffsetByTimestamp, Read (jumping to the
// entry for a long range) and TruncateTo, each the first call after an
// open, must answer as the undamaged index does, on every filesystem kind.
func TestIndexEntryIntoAValue(t *testing.T) {
	const n = 80 // batches of about 330 bytes: Read's range passes readJumpBytes
	// The value of the batch before the damaged entry's.
	values := map[string]func(t *testing.T, damaged int64) []byte{
		"a header": func(t *testing.T, damaged int64) []byte {
			return bytes.Clone(simpleBatch(t, damaged, 1, 1000, 40)[:batch.HeaderSize])
		},
		"a batch and a header": func(t *testing.T, damaged int64) []byte {
			v := bytes.Clone(simpleBatch(t, damaged-1, 1, 1000, 40))
			return append(v, simpleBatch(t, damaged-1, 1, 1000, 40)[:batch.HeaderSize]...)
		},
	}
	for _, fk := range fsKinds {
		for name, value := range values {
			for _, damaged := range []int64{1, 3 * n / 4, n - 1} {
				for _, cutTime := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s/%s/entry of offset %d/time index cut %v", fk.name, name, damaged, cutTime), func(t *testing.T) {
						testIndexEntryIntoAValue(t, fk, n, damaged, value(t, damaged), cutTime, name == "a header")
					})
				}
			}
		}
	}
}

// testIndexEntryIntoAValue is TestIndexEntryIntoAValue's case: the batch
// before offset damaged's stores inner in its value, and the entry of
// damaged points at it. With cutTime the time index is also cut after its
// entry for damaged, as a crash can leave it, so that Open's search for the
// largest timestamp starts at the damaged entry. exception says that inner
// frames as a batch whose last offset is damaged: Translate(damaged) is
// then misled (unless Open rebuilt the index) and not checked.
func testIndexEntryIntoAValue(t *testing.T, fk fsKind, n, damaged int64, inner []byte, cutTime, exception bool) {
	d := damageIndexEntry(t, fk, n, damaged, inner)
	fsys, dir, cfg, m, size, entries, upTo, want := d.fsys, d.dir, d.cfg, d.m, d.size, d.entries, d.upTo, d.want
	if cutTime {
		// Time entry i is offset i+1's too (every batch's timestamp
		// grows).
		timePath := segPath(dir, 0, TimeIndexSuffix)
		tidx := readAll(t, fsys, timePath)
		require.Equal(t, uint32(damaged), binary.BigEndian.Uint32(tidx[12*(damaged-1)+8:]))
		writeFile(t, fsys, timePath, tidx[:12*damaged])
	}

	// Open rebuilds the index when it finds the damage: at the last
	// entry, and where its search for the largest timestamp starts at
	// the damaged entry (the time index cut there) and meets the bytes
	// that do not frame. With the exception's value the check of the
	// time index's last entry lands on the fake batch first, finds its
	// timestamp wrong and rebuilds the time index instead, and the
	// search starts at the end.
	rebuiltAtOpen := damaged == n-1 || (cutTime && !exception)
	var misled []int64
	if exception && !rebuiltAtOpen {
		misled = []int64{damaged}
	}
	// TruncateTo goes last: it cuts the files the others open.
	firstLookups := []struct {
		name  string
		first func(r *Segment)
	}{
		{"Translate", func(r *Segment) {
			if len(misled) > 0 {
				return
			}
			pos, _, found, err := r.Translate(damaged, 0)
			require.NoError(t, err)
			require.True(t, found)
			require.Equal(t, m.pos[damaged], pos)
		}},
		{"FindOffsetByTimestamp", func(r *Segment) {
			off, ts, found, err := r.FindOffsetByTimestamp(0, damaged)
			require.NoError(t, err)
			require.True(t, found)
			require.Equal(t, damaged, off)
			require.Equal(t, 1000+damaged, ts)
		}},
		{"Read", func(r *Segment) {
			sl, err := r.Read(0, int(upTo), r.Size(), true)
			require.NoError(t, err)
			require.Equal(t, want, sl)
		}},
		{"TruncateTo", func(r *Segment) {
			removed, err := r.TruncateTo(damaged + 1)
			require.NoError(t, err)
			require.Equal(t, size-upTo, removed)
			require.Equal(t, upTo, r.Size())
			require.Equal(t, damaged+1, r.NextOffset())
			ts, off := r.MaxTimestamp()
			require.Equal(t, 1000+damaged, ts)
			require.Equal(t, damaged, off)
			// Now the damaged entry's own offset: translate lands on
			// the bytes in the value (the exception), or its scan
			// meets bytes that do not frame; the cut must still fall
			// where the batch starts.
			removed, err = r.TruncateTo(damaged)
			require.NoError(t, err)
			require.Equal(t, upTo-m.pos[damaged], removed)
			require.Equal(t, m.pos[damaged], r.Size())
			require.Equal(t, damaged, r.NextOffset())
			ts, off = r.MaxTimestamp()
			require.Equal(t, 1000+damaged-1, ts)
			require.Equal(t, damaged-1, off)
		}},
	}
	// The first calls that must have found the damage, and so marked the
	// index suspect: those whose scan from the entry meets bytes that do
	// not frame (Open rebuilt the last entry's index).
	wantSuspect := map[string]bool{
		"Translate": !exception && !rebuiltAtOpen,
		"Read":      exception && !rebuiltAtOpen && damaged == 3*n/4, // the only Read that jumps to the entry
	}
	for _, fl := range firstLookups {
		name := fl.name
		r, err := Open(fsys, dir, 0, cfg)
		require.NoError(t, err, name)
		require.Equal(t, size, r.Size(), name)
		require.Equal(t, n, r.NextOffset(), name)
		ts, off := r.MaxTimestamp()
		require.Equal(t, 1000+n-1, ts, name)
		require.Equal(t, n-1, off, name)
		if rebuiltAtOpen {
			got, _ := indexEntries(r)
			require.True(t, equalEntries(entries, got), "%s: offset index %v, want %v", name, got, entries)
		}
		require.False(t, r.indexSuspect.Load(), name)
		fl.first(r)
		if wantSuspect[name] {
			require.True(t, r.indexSuspect.Load(), "%s: the index is not marked suspect", name)
		}
		if name != "TruncateTo" {
			checkLookups(t, r, m, misled...)
		}
		require.NoError(t, r.Close(), name)
	}
}

// damagedSegment is a segment damageIndexEntry wrote and damaged, with the
// undamaged segment's answers.
type damagedSegment struct {
	fsys    vfs.FS
	dir     string
	cfg     Config
	m       *model
	size    int64
	entries [][2]int64 // the offset index, as indexEntries gives it
	upTo    int64      // where the damaged entry's batch ends
	want    Slice      // Read(0, upTo) before the damage
}

// damageIndexEntry writes a segment of n one-record batches of about 330
// bytes, with an offset index entry for every batch after the first, in
// which the batch before offset damaged's stores inner in its value; it
// closes the segment and points the entry of damaged at inner.
func damageIndexEntry(t *testing.T, fk fsKind, n, damaged int64, inner []byte) damagedSegment {
	fsys, dir, cfg, s := createIndexingEveryBatch(t, fk)
	for off := range n {
		value := bytes.Repeat([]byte{'v'}, 260)
		if off == damaged-1 {
			value = append(bytes.Clone(inner), value...)
		}
		bld := batch.NewBuilder(batch.BuilderOptions{BaseOffset: off})
		require.NoError(t, bld.Add(batch.Record{Timestamp: 1000 + off, Value: value}))
		b, err := bld.Build()
		require.NoError(t, err)
		mustAppend(t, s, b)
	}
	m := checkSegment(t, s)
	size := s.Size()
	entries, _ := indexEntries(s)
	upTo := size
	if damaged+1 < n {
		upTo = m.pos[damaged+1]
	}
	want, err := s.Read(0, int(upTo), size, true)
	require.NoError(t, err)
	require.Equal(t, Slice{Start: 0, End: upTo, FirstOffset: 0, NextOffset: damaged + 1}, want)
	require.NoError(t, s.Close())

	// Entry i is offset i+1's: every batch holds one record, and every
	// batch after the first has an entry.
	logBytes := readAll(t, fsys, segPath(dir, 0, LogSuffix))
	idxPath := segPath(dir, 0, IndexSuffix)
	idx := readAll(t, fsys, idxPath)
	inside := bytes.Index(logBytes[m.pos[damaged-1]:], inner)
	require.Positive(t, inside)
	at := 8 * (damaged - 1)
	require.Equal(t, uint32(damaged), binary.BigEndian.Uint32(idx[at:]))
	require.Equal(t, uint32(m.pos[damaged]), binary.BigEndian.Uint32(idx[at+4:]))
	binary.BigEndian.PutUint32(idx[at+4:], uint32(m.pos[damaged-1]+int64(inside)))
	writeFile(t, fsys, idxPath, idx)
	return damagedSegment{fsys, dir, cfg, m, size, entries, upTo, want}
}

// TestReadJumpIntoAValue: Read's jump to the last indexed batch that fits
// checks that the batches after it do not go back in offsets. The damaged
// entry points at a whole batch stored in a value, with the entry's
// offset (the exception of DESIGN law 5 for Translate and
// FindOffsetByTimestamp of exactly that offset, not checked here), and
// after it at the header of a batch of offset 0 that claims more bytes
// than the read takes: without the check the walk would stop there, inside
// a batch, and Read would return a range that ends mid-batch.
func TestReadJumpIntoAValue(t *testing.T) {
	const n, damaged = 80, 60
	inner := append(bytes.Clone(simpleBatch(t, damaged, 1, 1000, 40)), simpleBatch(t, 0, 1, 1000, 1000)[:batch.HeaderSize]...)
	for _, fk := range fsKinds {
		t.Run(fk.name, func(t *testing.T) {
			d := damageIndexEntry(t, fk, n, damaged, inner)
			r, err := Open(d.fsys, d.dir, 0, d.cfg)
			require.NoError(t, err)
			defer r.Close()
			sl, err := r.Read(0, int(d.upTo), r.Size(), true)
			require.NoError(t, err)
			require.Equal(t, d.want, sl)
			require.True(t, r.indexSuspect.Load())
		})
	}
}

// TestOpenLogDamageBeforeLastEntry: a .log damaged between the last two
// offset index entries (a batch whose header no longer frames) is not taken
// for a damaged index. Open's scan from the entry before the last stops at
// the damage; Open then finds the log's end from the last entry, as it did
// before that scan, keeps the index and does not mark it suspect.
func TestOpenLogDamageBeforeLastEntry(t *testing.T) {
	const n = 20
	for _, fk := range fsKinds {
		t.Run(fk.name, func(t *testing.T) {
			fsys, dir, cfg, s := createIndexingEveryBatch(t, fk)
			for off := range int64(n) {
				mustAppend(t, s, simpleBatch(t, off, 1, 1000+off, 100))
			}
			m := checkSegment(t, s)
			size := s.Size()
			entries, _ := indexEntries(s)
			require.NoError(t, s.Close())

			// The batch at the entry before the last loses its magic.
			logPath := segPath(dir, 0, LogSuffix)
			data := readAll(t, fsys, logPath)
			data[m.pos[n-2]+hdrMagicAt] = 0x7f
			writeFile(t, fsys, logPath, data)

			r, err := Open(fsys, dir, 0, cfg)
			require.NoError(t, err)
			defer r.Close()
			require.Equal(t, size, r.Size())
			require.Equal(t, int64(n), r.NextOffset())
			got, _ := indexEntries(r)
			require.True(t, equalEntries(entries, got), "offset index %v, want %v", got, entries)
			require.False(t, r.indexSuspect.Load())
			// The damaged batch is an error where it is read.
			_, _, _, err = r.Translate(n-2, 0)
			require.ErrorIs(t, err, batch.ErrCorrupt)
		})
	}
}

// createIndexingEveryBatch creates a segment at offset 0 on the
// filesystem kind fk with an offset index entry for every batch after the
// first (IndexIntervalBytes -1).
func createIndexingEveryBatch(t *testing.T, fk fsKind) (vfs.FS, string, Config, *Segment) {
	fsys, dir := fk.fs(t)
	mustMkdir(t, fsys, dir)
	cfg := fk.cfg
	cfg.IndexIntervalBytes = -1
	s, err := Create(fsys, dir, 0, cfg)
	require.NoError(t, err)
	return fsys, dir, cfg, s
}
