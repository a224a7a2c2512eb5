package producer

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/crc32c"
)

// Snapshot file layout (see the package documentation). Frozen: Kafka's
// ProducerStateManager, version 1.
const (
	snapshotVersion = 1

	versionOffset = 0
	crcOffset     = versionOffset + 2 // uint32 CRC-32C
	countOffset   = crcOffset + 4     // int32 entry count
	// HeaderSize is the size of a snapshot file without entries: an empty
	// state's whole file.
	HeaderSize = countOffset + 4
	// crcStart is where the bytes the CRC covers begin (the count and the
	// entries).
	crcStart = countOffset

	entryProducerID       = 0
	entryEpoch            = entryProducerID + 8       // int16
	entryLastSequence     = entryEpoch + 2            // int32
	entryLastOffset       = entryLastSequence + 4     // int64
	entryOffsetDelta      = entryLastOffset + 8       // int32
	entryTimestamp        = entryOffsetDelta + 4      // int64
	entryCoordinatorEpoch = entryTimestamp + 8        // int32
	entryTxnFirstOffset   = entryCoordinatorEpoch + 4 // int64
	// EntrySize is the size of one entry.
	EntrySize = entryTxnFirstOffset + 8
)

// Entry is one entry of a snapshot file, field for field: a producer's
// last batch and its transaction state.
type Entry struct {
	// ProducerID is the producer id.
	ProducerID int64
	// ProducerEpoch is the producer's epoch.
	ProducerEpoch int16
	// LastSequence is the last sequence of the producer's last batch; -1
	// when it has none.
	LastSequence int32
	// LastOffset is the last offset of the producer's last batch; -1 when
	// it has none.
	LastOffset int64
	// OffsetDelta is LastOffset minus the batch's first offset (and
	// LastSequence minus its first sequence, wrapping).
	OffsetDelta int32
	// Timestamp is the producer's last timestamp (ms).
	Timestamp int64
	// CoordinatorEpoch is the coordinator epoch of the producer's last
	// marker; -1 when none.
	CoordinatorEpoch int32
	// CurrentTxnFirstOffset is the first offset of the producer's open
	// transaction; -1 when none is open.
	CurrentTxnFirstOffset int64
}

// DecodeSnapshot decodes the bytes of a snapshot file, checksum checked.
// Errors wrap ErrCorruptSnapshot: fewer bytes than the header, a version
// other than 1, a CRC-32C mismatch, a count that is negative or disagrees
// with the length. It allocates the entries only after the length
// matched the count.
func DecodeSnapshot(data []byte) ([]Entry, error) {
	if len(data) < HeaderSize {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrCorruptSnapshot, len(data), HeaderSize)
	}
	if v := int16(binary.BigEndian.Uint16(data[versionOffset:])); v != snapshotVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrCorruptSnapshot, v, snapshotVersion)
	}
	if want, got := binary.BigEndian.Uint32(data[crcOffset:]), crc32c.Update(0, data[crcStart:]); want != got {
		return nil, fmt.Errorf("%w: CRC-32C %08x, computed %08x", ErrCorruptSnapshot, want, got)
	}
	n := int32(binary.BigEndian.Uint32(data[countOffset:]))
	if n < 0 || int64(len(data)-HeaderSize) != int64(n)*EntrySize {
		return nil, fmt.Errorf("%w: %d entries in %d bytes", ErrCorruptSnapshot, n, len(data))
	}
	out := make([]Entry, n)
	for i := range out {
		b := data[HeaderSize+i*EntrySize:][:EntrySize]
		out[i] = Entry{
			ProducerID:            int64(binary.BigEndian.Uint64(b[entryProducerID:])),
			ProducerEpoch:         int16(binary.BigEndian.Uint16(b[entryEpoch:])),
			LastSequence:          int32(binary.BigEndian.Uint32(b[entryLastSequence:])),
			LastOffset:            int64(binary.BigEndian.Uint64(b[entryLastOffset:])),
			OffsetDelta:           int32(binary.BigEndian.Uint32(b[entryOffsetDelta:])),
			Timestamp:             int64(binary.BigEndian.Uint64(b[entryTimestamp:])),
			CoordinatorEpoch:      int32(binary.BigEndian.Uint32(b[entryCoordinatorEpoch:])),
			CurrentTxnFirstOffset: int64(binary.BigEndian.Uint64(b[entryTxnFirstOffset:])),
		}
	}
	return out, nil
}

// AppendSnapshot appends the snapshot file holding entries, in the given
// order, to dst.
func AppendSnapshot(dst []byte, entries []Entry) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint16(dst, snapshotVersion)
	dst = binary.BigEndian.AppendUint32(dst, 0) // the CRC, set below
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(entries)))
	for _, e := range entries {
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.ProducerID))
		dst = binary.BigEndian.AppendUint16(dst, uint16(e.ProducerEpoch))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.LastSequence))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.LastOffset))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.OffsetDelta))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.Timestamp))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.CoordinatorEpoch))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.CurrentTxnFirstOffset))
	}
	binary.BigEndian.PutUint32(dst[start+crcOffset:], crc32c.Update(0, dst[start+crcStart:]))
	return dst
}

// SnapshotSuffix is the suffix of snapshot file names. Frozen: Kafka's.
const SnapshotSuffix = ".snapshot"

// snapshotDigits is the width of the offset in a snapshot file name.
const snapshotDigits = 20

// SnapshotFileName returns the name of the snapshot file at offset:
// "<offset, 20 digits>.snapshot".
func SnapshotFileName(offset int64) string {
	return fmt.Sprintf("%0*d%s", snapshotDigits, offset, SnapshotSuffix)
}

// ParseSnapshotFileName returns the offset a snapshot file name holds, and
// false for any other name.
func ParseSnapshotFileName(name string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, SnapshotSuffix)
	if !ok || len(digits) != snapshotDigits {
		return 0, false
	}
	off, err := strconv.ParseInt(digits, 10, 64)
	return off, err == nil && off >= 0
}

// decrementSequence returns seq - d, wrapping below 0 to MaxInt32 as
// Kafka's DefaultRecordBatch.decrementSequence.
func decrementSequence(seq, d int32) int32 {
	if seq < d {
		return int32(int64(1<<31-1) - int64(d-seq) + 1)
	}
	return seq - d
}

// Entries returns the state as snapshot entries, by ascending producer
// id: each producer's newest batch, epoch, coordinator epoch, open
// transaction and last timestamp.
func (s *State) Entries() []Entry {
	ids := make([]int64, 0, len(s.m))
	for pid := range s.m {
		ids = append(ids, pid)
	}
	slices.Sort(ids)
	out := make([]Entry, 0, len(s.m))
	for _, pid := range ids {
		e := s.m[pid]
		se := Entry{ProducerID: pid, ProducerEpoch: e.epoch, LastSequence: batch.NoSequence,
			LastOffset: -1, Timestamp: e.lastTimestamp, CoordinatorEpoch: e.coordinatorEpoch,
			CurrentTxnFirstOffset: e.txnFirstOffset}
		if l := e.last(); l != nil {
			se.LastSequence, se.LastOffset = l.LastSequence, l.LastOffset
			se.OffsetDelta = int32(l.LastOffset - l.FirstOffset)
		}
		out = append(out, se)
	}
	return out
}

// AppendSnapshot appends the state's snapshot file (its Entries) to dst.
func (s *State) AppendSnapshot(dst []byte) []byte { return AppendSnapshot(dst, s.Entries()) }

// Restore replaces the state with the producers of entries (a snapshot's),
// skipping those expired now (Config.Expiration against Config.Now; an
// entry with an open transaction never expires), as Kafka's
// loadFromSnapshot does; it counts as a sweep of expired producers. Each
// producer gets the one batch its entry describes (none when LastOffset <
// 0), and its open transaction, if any, is open again, starting at the
// entry's timestamp (the snapshot does not keep the start). Of two entries
// for one producer id the later wins (Kafka writes one per producer).
func (s *State) Restore(entries []Entry) {
	s.Reset()
	now := s.nowMs()
	s.lastSweep = now
	limit := s.cfg.Expiration.Milliseconds()
	for _, se := range entries {
		if s.m[se.ProducerID] != nil { // the later entry wins
			delete(s.m, se.ProducerID)
			s.dropTxn(se.ProducerID)
		}
		if se.CurrentTxnFirstOffset < 0 && limit > 0 && now-se.Timestamp >= limit {
			continue
		}
		e := newEntry()
		e.epoch, e.coordinatorEpoch, e.txnFirstOffset = se.ProducerEpoch, se.CoordinatorEpoch, se.CurrentTxnFirstOffset
		if se.LastOffset >= 0 {
			e.add(Batch{FirstSequence: decrementSequence(se.LastSequence, se.OffsetDelta), LastSequence: se.LastSequence,
				FirstOffset: se.LastOffset - int64(se.OffsetDelta), LastOffset: se.LastOffset, MaxTimestamp: se.Timestamp})
		}
		e.lastTimestamp = se.Timestamp
		s.m[se.ProducerID] = e
		if se.CurrentTxnFirstOffset >= 0 {
			s.beginTxn(OpenTxn{ProducerID: se.ProducerID, FirstOffset: se.CurrentTxnFirstOffset, StartTimestamp: se.Timestamp})
		}
	}
}
