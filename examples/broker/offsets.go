package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

// Kafka's __consumer_offsets schema (the parts this broker writes and reads).
const (
	offsetKeyVersion   = 1 // OffsetCommitKey: group, topic, partition
	offsetValueVersion = 3 // OffsetCommitValue v3: offset, leaderEpoch, metadata, commitTimestamp
	// maxMetadataSize is offset.metadata.max.bytes.
	maxMetadataSize = 4096
)

// offsetKey names one committed offset.
type offsetKey struct {
	group     string
	topic     string
	partition int32
}

// committed is one committed offset, as OffsetFetch returns it.
type committed struct {
	offset      int64
	leaderEpoch int32
	metadata    string
}

// offsetCommit is one entry of a commit.
type offsetCommit struct {
	key offsetKey
	committed
}

// offsetStore keeps committed offsets in memory and, durably, in the
// __consumer_offsets-0 partition. mu serializes commits so the map changes
// in the order the records are in the log.
type offsetStore struct {
	p *plog.Partition
	// w writes p's batches durably: AppendBatch and Sync on one node,
	// through raft in cluster mode (coordstate.go). Set before o is
	// shared.
	w  stateWriter
	mu struct {
		sync.Mutex
		m   map[offsetKey]committed
		bld *batch.Builder
		// pending holds, per producer id, the offsets TxnOffsetCommit
		// wrote in that producer's open transaction (txnoffsets.go).
		pending map[int64]map[offsetKey]pendingOffset
		// seq numbers the offset records in the order they are in the
		// log (replay order, then appends); at is the seq of the record
		// each entry of m came from. A transaction's offset is applied on
		// commit only over an offset recorded before it (Kafka's rule:
		// the later record in the log wins).
		seq int64
		at  map[offsetKey]int64
		// groups holds the latest group metadata record of each group
		// (groupmeta.go).
		groups map[string]groupRecord
		// commitTime is when each entry of m was committed, in
		// milliseconds (its record's commit timestamp): offset expiry
		// (groupadmin.go).
		commitTime map[offsetKey]int64
	}
}

// newOffsetStore returns an empty store writing to p.
func newOffsetStore(p *plog.Partition) *offsetStore {
	o := &offsetStore{p: p, w: localWriter{p}}
	o.resetLocked()
	o.mu.bld = batch.NewBuilder(batch.BuilderOptions{})
	return o
}

// resetLocked forgets every offset (before a replay).
// REQUIRES: o.mu held, or o not yet shared.
func (o *offsetStore) resetLocked() {
	o.mu.m = make(map[offsetKey]committed)
	o.mu.pending = make(map[int64]map[offsetKey]pendingOffset)
	o.mu.at = make(map[offsetKey]int64)
	o.mu.seq = 0
	o.mu.groups = make(map[string]groupRecord)
	o.mu.commitTime = make(map[offsetKey]int64)
}

// openOffsetStore opens (creating) __consumer_offsets-0 and replays it.
// A data directory taken over from Kafka has more partitions of
// __consumer_offsets (50 by default, a group's commits in the one its name
// hashes to): they are replayed first, and partition 0, where this broker
// writes, last, so its commits win.
func openOffsetStore(st *store) (*offsetStore, error) {
	ps, err := st.topic(offsetsTopic, true)
	if err != nil {
		return nil, err
	}
	o := newOffsetStore(ps[0])
	for i := range ps {
		p := ps[(i+1)%len(ps)]
		if err := o.replay(p); err != nil {
			return nil, fmt.Errorf("replaying %s: %w", p.Dir(), err)
		}
	}
	return o, nil
}

// replay reads a partition from its log start to its high watermark and
// applies every offset-commit record and group metadata record (key
// version 2, groupmeta.go); the last one for a key wins, a null value
// deletes. A transactional batch's offsets wait in pending
// until their producer's marker: COMMIT applies them, ABORT drops them.
func (o *offsetStore) replay(p *plog.Partition) error {
	var dec batch.Decoder
	return readToHighWatermark(p, func(rest []byte, off int64) error {
		return o.replayBatches(rest, off, &dec)
	})
}

// legacyOverhead is the part of a legacy message (magic 0 or 1) before
// its counted bytes: offset (8) and messageSize (4), Kafka's frozen format.
const legacyOverhead = 8 + 4

// frameLegacy splits the legacy message at the start of b from the rest:
// the framing only, which Decoder.ValidateLegacy checks with the rest of
// the message.
func frameLegacy(b []byte) (e, rest []byte, err error) {
	if len(b) < legacyOverhead {
		return nil, b, fmt.Errorf("%w: %d bytes, shorter than a legacy message's overhead", batch.ErrTruncated, len(b))
	}
	size := int64(int32(binary.BigEndian.Uint32(b[8:])))
	if size < 0 || int64(len(b)) < legacyOverhead+size {
		return nil, b, fmt.Errorf("%w: legacy message of %d bytes in %d", batch.ErrTruncated, size, len(b)-legacyOverhead)
	}
	n := legacyOverhead + int(size)
	return b[:n], b[n:], nil
}

// replayBatches applies the records at or after off in the batches rest.
func (o *offsetStore) replayBatches(rest []byte, off int64, dec *batch.Decoder) error {
	for len(rest) > 0 {
		if m, ok := batch.PeekMagic(rest); ok && (m == 0 || m == 1) {
			// A legacy message Kafka 0.10 committed: its records
			// count the same.
			e, next, err := frameLegacy(rest)
			if err == nil {
				err = dec.ValidateLegacy(e)
			}
			var lrecs []batch.Record
			if err == nil {
				lrecs, err = dec.AppendLegacyRecords(nil, e, false)
			}
			if err != nil {
				return err
			}
			for _, rec := range lrecs {
				if rec.Offset >= off {
					o.applyLocked(rec.Key, rec.Value)
				}
			}
			rest = next
			continue
		}
		b, next, err := batch.Parse(rest)
		if err == nil {
			err = dec.Validate(b)
		}
		if err != nil {
			return err
		}
		rest = next
		if b.Attributes().IsControl() {
			// A transaction marker publishes or drops the offsets of
			// the producer's transaction.
			if b.BaseOffset() >= off {
				if err := o.replayMarkerLocked(b, dec); err != nil {
					return err
				}
			}
			continue
		}
		txn := b.Attributes().IsTransactional()
		for rec, err := range b.All(dec) {
			if err != nil {
				return err
			}
			if rec.Offset < off {
				continue
			}
			if txn {
				o.pendLocked(b.ProducerID(), rec.Key, rec.Value)
				continue
			}
			o.applyLocked(rec.Key, rec.Value)
		}
	}
	return nil
}

// readToHighWatermark reads p from its log start to its high watermark,
// calling apply with the bytes of each read (whole batches, the first one
// holding off) and the offset it read from: the replay of an internal
// topic at start.
func readToHighWatermark(p *plog.Partition, apply func(batches []byte, off int64) error) error {
	off := p.LogStartOffset()
	hw := p.HighWatermark()
	for off < hw {
		recs, err := p.ReadFrom(off, 1<<20)
		if err != nil {
			return err
		}
		if len(recs.Bytes()) == 0 {
			_ = recs.Close()
			break
		}
		err = apply(recs.Bytes(), off)
		next := recs.NextOffset()
		if cerr := recs.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if next <= off {
			return errors.New("broker: replay made no progress")
		}
		off = next
	}
	return nil
}

// applyLocked applies one record: a group metadata record to the groups,
// an offset commit to the map. Malformed records are skipped.
// REQUIRES: o.mu held, or o not yet shared.
func (o *offsetStore) applyLocked(key, value []byte) {
	if o.applyGroupLocked(key, value) {
		return
	}
	k, ok := decodeOffsetKey(key)
	if !ok {
		return
	}
	if value == nil {
		delete(o.mu.m, k)
		delete(o.mu.commitTime, k)
		o.mu.seq++
		o.mu.at[k] = o.mu.seq
		return
	}
	if c, ok := decodeOffsetValue(value); ok {
		o.setLocked(k, c)
		if t, ok := offsetCommitTime(value); ok {
			o.mu.commitTime[k] = t
		}
	}
}

// setLocked records c as k's committed offset, the latest in the log,
// committed now (a replayed record's own commit time replaces that).
// REQUIRES: o.mu held, or o not yet shared.
func (o *offsetStore) setLocked(k offsetKey, c committed) {
	o.mu.seq++
	o.mu.m[k] = c
	o.mu.commitTime[k] = time.Now().UnixMilli()
	o.mu.at[k] = o.mu.seq
}

// commit durably stores offsets for one group: one record per partition in
// one batch, appended and synced, then applied to the map.
func (o *offsetStore) commit(commits []offsetCommit) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.appendCommitsLocked(batch.BuilderOptions{}, commits); err != nil {
		return err
	}
	for _, c := range commits {
		o.setLocked(c.key, c.committed)
	}
	return nil
}

// appendCommitsLocked writes commits as one batch built with opts, one
// record per partition, and syncs it. REQUIRES: o.mu held.
func (o *offsetStore) appendCommitsLocked(opts batch.BuilderOptions, commits []offsetCommit) error {
	now := time.Now().UnixMilli()
	o.mu.bld.Reset(opts)
	for _, c := range commits {
		rec := batch.Record{
			Key:       encodeOffsetKey(nil, c.key),
			Value:     encodeOffsetValue(nil, c.committed, now),
			Timestamp: now,
		}
		if err := o.mu.bld.Add(rec); err != nil {
			return err
		}
	}
	b, err := o.mu.bld.Build()
	if err != nil {
		return err
	}
	return o.w.appendBatch(b)
}

// get returns a committed offset.
func (o *offsetStore) get(k offsetKey) (committed, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c, ok := o.mu.m[k]
	return c, ok
}

// groupKeys returns every committed key of a group.
func (o *offsetStore) groupKeys(group string) []offsetKey {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ks []offsetKey
	for k := range o.mu.m {
		if k.group == group {
			ks = append(ks, k)
		}
	}
	return ks
}

// appendInt16String appends a Kafka string: int16 length, bytes.
func appendInt16String(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

// encodeOffsetKey appends an offset-commit key, version 1.
func encodeOffsetKey(dst []byte, k offsetKey) []byte {
	dst = binary.BigEndian.AppendUint16(dst, offsetKeyVersion)
	dst = appendInt16String(dst, k.group)
	dst = appendInt16String(dst, k.topic)
	return binary.BigEndian.AppendUint32(dst, uint32(k.partition))
}

// encodeOffsetValue appends an offset-commit value, version 3.
func encodeOffsetValue(dst []byte, c committed, now int64) []byte {
	dst = binary.BigEndian.AppendUint16(dst, offsetValueVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(c.offset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.leaderEpoch))
	dst = appendInt16String(dst, c.metadata)
	return binary.BigEndian.AppendUint64(dst, uint64(now))
}

// reader is a cursor with a sticky failure flag.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) take(n int) []byte {
	if r.bad || n < 0 || n > len(r.b) {
		r.bad = true
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) int16() int16 {
	p := r.take(2)
	if p == nil {
		return 0
	}
	return int16(binary.BigEndian.Uint16(p))
}

func (r *reader) int32() int32 {
	p := r.take(4)
	if p == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(p))
}

func (r *reader) int64() int64 {
	p := r.take(8)
	if p == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(p))
}

func (r *reader) string() string {
	n := r.int16()
	return string(r.take(int(n)))
}

// decodeOffsetKey reads an offset-commit key (versions 0 and 1 share a
// layout); group metadata keys (version 2) and garbage give ok=false.
func decodeOffsetKey(b []byte) (offsetKey, bool) {
	r := reader{b: b}
	v := r.int16()
	if v != 0 && v != 1 {
		return offsetKey{}, false
	}
	k := offsetKey{group: r.string(), topic: r.string(), partition: r.int32()}
	return k, !r.bad
}

// decodeOffsetValue reads versions 0-3 of an offset-commit value.
func decodeOffsetValue(b []byte) (committed, bool) {
	r := reader{b: b}
	c := committed{leaderEpoch: -1}
	switch r.int16() {
	case 0, 1, 2:
		c.offset = r.int64()
		c.metadata = r.string()
	case 3:
		c.offset = r.int64()
		c.leaderEpoch = r.int32()
		c.metadata = r.string()
	default:
		return c, false
	}
	return c, !r.bad && c.offset >= 0 && c.offset < math.MaxInt64
}

// offsetCommitTime returns the commit timestamp of an offset-commit value
// of any version (0: the timestamp; 1-2: commit_timestamp; 3:
// commitTimestamp).
func offsetCommitTime(b []byte) (int64, bool) {
	r := reader{b: b}
	switch r.int16() {
	case 0, 1, 2:
		r.int64()
		r.string()
	case 3:
		r.int64()
		r.int32()
		r.string()
	default:
		return 0, false
	}
	t := r.int64()
	return t, !r.bad
}
