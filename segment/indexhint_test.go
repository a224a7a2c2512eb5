package segment

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
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
	fsys, dir := fk.fs(t)
	mustMkdir(t, fsys, dir)
	cfg := fk.cfg
	cfg.IndexIntervalBytes = -1 // an entry for every batch after the first
	s, err := Create(fsys, dir, 0, cfg)
	require.NoError(t, err)
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
	upTo := size // a Read that ends with the damaged entry's batch
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
	if cutTime {
		// Time entry i is offset i+1's too (every batch's timestamp
		// grows).
		timePath := segPath(dir, 0, TimeIndexSuffix)
		tidx := readAll(t, fsys, timePath)
		require.Equal(t, uint32(damaged), binary.BigEndian.Uint32(tidx[12*(damaged-1)+8:]))
		writeFile(t, fsys, timePath, tidx[:12*damaged])
	}

	var misled []int64
	if exception && damaged != n-1 {
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
		}},
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
		if damaged == n-1 {
			// Open's scan proved the last entry no batch boundary and
			// rebuilt the index.
			got, _ := indexEntries(r)
			require.True(t, equalEntries(entries, got), "%s: offset index %v, want %v", name, got, entries)
		}
		fl.first(r)
		if name != "TruncateTo" {
			checkLookups(t, r, m, misled...)
		}
		require.NoError(t, r.Close(), name)
	}
}
