package log

import (
	"container/list"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/segment"
)

// This file is tiered storage's read side: reads below a partition's local
// log start served from the remote copies, through the Dir's bounded
// cache of fetched offset indexes and segment chunks.

// remoteCacheKey names a cached piece of a copy: an index (kind >= 0) or
// the chunk-th chunk of the segment (kind -1).
type remoteCacheKey struct {
	copyID RemoteSegmentID
	kind   RemoteIndexKind
	chunk  int64
}

const remoteChunkKind RemoteIndexKind = -1

type remoteCacheEntry struct {
	key remoteCacheKey
	b   []byte
}

// remoteCache is a least-recently-used cache of fetched bytes, bounded in
// bytes. Entries are immutable: a reader may keep a slice after eviction.
type remoteCache struct {
	limit int64

	mu   sync.Mutex
	used int64
	lru  list.List // of *remoteCacheEntry, most recent first
	m    map[remoteCacheKey]*list.Element
	hits int64
}

func newRemoteCache(limit int64) *remoteCache {
	return &remoteCache{limit: limit, m: make(map[remoteCacheKey]*list.Element)}
}

// get returns the bytes of k, fetching them with load on a miss.
func (c *remoteCache) get(k remoteCacheKey, load func() ([]byte, error)) ([]byte, error) {
	c.mu.Lock()
	if e, ok := c.m[k]; ok {
		c.lru.MoveToFront(e)
		c.hits++
		b := e.Value.(*remoteCacheEntry).b
		c.mu.Unlock()
		return b, nil
	}
	c.mu.Unlock()
	b, err := load()
	if err != nil {
		return nil, err
	}
	if remoteCacheCost(b) > c.limit {
		return b, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok {
		c.m[k] = c.lru.PushFront(&remoteCacheEntry{key: k, b: b})
		c.used += remoteCacheCost(b)
	}
	for c.used > c.limit {
		e := c.lru.Back()
		ce := e.Value.(*remoteCacheEntry)
		c.lru.Remove(e)
		delete(c.m, ce.key)
		c.used -= remoteCacheCost(ce.b)
	}
	return b, nil
}

// remoteCacheEntryBytes is what the cache counts for an entry besides its
// bytes (key, list element, map slot), so that the many empty indexes
// (transaction indexes, mostly) a scan over the copies caches stay bounded
// too.
const remoteCacheEntryBytes = 128

// remoteCacheCost is what an entry of b counts against the cache's limit.
func remoteCacheCost(b []byte) int64 { return int64(len(b)) + remoteCacheEntryBytes }

// index returns the whole index of kind k of the copy id.
func (t *partTier) index(ctx context.Context, id RemoteSegmentID, k RemoteIndexKind) ([]byte, error) {
	return t.d.cache.get(remoteCacheKey{copyID: id, kind: k}, func() ([]byte, error) {
		rc, err := t.d.cfg.Storage.FetchIndex(ctx, id, k)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc)
	})
}

// chunk returns the i-th chunk of the segment of md.
func (t *partTier) chunk(ctx context.Context, md RemoteSegmentMetadata, i int64) ([]byte, error) {
	size := t.d.cfg.ChunkBytes
	return t.d.cache.get(remoteCacheKey{copyID: md.ID, kind: remoteChunkKind, chunk: i}, func() ([]byte, error) {
		start := i * size
		end := min(start+size, md.Size)
		rc, err := t.d.cfg.Storage.FetchSegment(ctx, md.ID, start, end)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		b := make([]byte, end-start)
		if _, err := io.ReadFull(rc, b); err != nil {
			return nil, err
		}
		return b, nil
	})
}

// readAt appends the bytes [pos, pos+n) of the segment of md to dst.
func (t *partTier) readAt(ctx context.Context, dst []byte, md RemoteSegmentMetadata, pos, n int64) ([]byte, error) {
	size := t.d.cfg.ChunkBytes
	for n > 0 {
		c, err := t.chunk(ctx, md, pos/size)
		if err != nil {
			return dst, err
		}
		off := pos % size
		if off >= int64(len(c)) {
			return dst, fmt.Errorf("%w: chunk %d of %s ends at %d", batch.ErrCorrupt, pos/size, md.ID, len(c))
		}
		k := min(n, int64(len(c))-off)
		dst = append(dst, c[off:off+k]...)
		pos += k
		n -= k
	}
	return dst, nil
}

// entryHeader is the framing every entry of a .log shares: the offset
// (a v2 batch's base, a legacy message's own) and the length that follows.
const entryHeader = 12

// copyEntry is one entry of a copy's .log as walkCopy sees it.
type copyEntry struct {
	// pos and size are its byte position and size in the copy.
	pos, size int64
	// base and last are its first and last offsets (a legacy message's
	// own offset for both).
	base, last int64
	// h is its first batch.HeaderSize bytes (fewer at the copy's end):
	// the whole header of a v2 batch.
	h []byte
}

// v2 reports whether e is a RecordBatch v2 batch whose header h holds.
func (e copyEntry) v2() bool {
	return len(e.h) >= batch.HeaderSize && e.h[16] >= 2
}

// walkCopy calls fn with each entry of the copy md from the byte position
// pos, which must be an entry's start, until fn returns false or an error,
// or the copy ends. The headers are read through the cache's chunks and
// checked to frame within the copy.
func (t *partTier) walkCopy(ctx context.Context, md RemoteSegmentMetadata, pos int64, fn func(copyEntry) (bool, error)) error {
	var hdr [batch.HeaderSize]byte
	for pos < md.Size {
		h, err := t.readAt(ctx, hdr[:0], md, pos, min(int64(len(hdr)), md.Size-pos))
		if err != nil {
			return err
		}
		if len(h) < entryHeader {
			return fmt.Errorf("%w: entry header cut at %d", batch.ErrCorrupt, pos)
		}
		size := entryHeader + int64(binary.BigEndian.Uint32(h[8:12]))
		if size > md.Size-pos {
			return fmt.Errorf("%w: entry at %d of %d bytes overruns the segment", batch.ErrCorrupt, pos, size)
		}
		if int64(len(h)) > size {
			h = h[:size]
		}
		e := copyEntry{pos: pos, size: size, base: int64(binary.BigEndian.Uint64(h[:8])), h: h}
		e.last = e.base
		if len(h) >= 27 && h[16] >= 2 {
			e.last = e.base + int64(int32(binary.BigEndian.Uint32(h[23:27])))
		}
		more, err := fn(e)
		if err != nil || !more {
			return err
		}
		pos += size
	}
	return nil
}

// offsetFloor returns the position, from the copy's offset index idx
// (entries of a batch's base offset relative to md.BaseOffset and its
// position), of the last indexed batch starting at or below offset; 0 when
// none is.
func offsetFloor(md RemoteSegmentMetadata, idx []byte, offset int64) int64 {
	n := len(idx) / 8
	i := sort.Search(n, func(i int) bool {
		return md.BaseOffset+int64(binary.BigEndian.Uint32(idx[8*i:])) > offset
	}) - 1
	if i < 0 {
		return 0
	}
	return int64(binary.BigEndian.Uint32(idx[8*i+4:]))
}

// copyRead is how a read below the local log start goes on after
// remoteRead.
type copyRead uint8

const (
	// copyServed: the copy answered, with batches or with an error.
	copyServed copyRead = iota
	// copyGone: the copy went while it was read (total retention, a
	// truncation): read again against the current metadata and log start.
	copyGone
	// copyLocal: offset lies in a gap of the offsets that runs from the
	// last copy below the local log start up to it; the first local batch
	// answers, as it did when the segments before it were local.
	copyLocal
	// copyNone: offset is below the first copy, outside the whole log.
	copyNone
)

// remoteErr counts a failed remote read and returns err, about what,
// wrapping ErrRemoteUnavailable: the copy is recorded "copied", so any
// failure to read it is the store's and may go away on a retry. A
// not-found keeps ErrRemoteSegmentNotFound in the chain, but a store that
// lost a copy it acknowledged is unavailable for that copy (law 14), never
// an answer of its own.
func (t *partTier) remoteErr(what string, id RemoteSegmentID, err error) error {
	t.readFails.Add(1)
	if !errors.Is(err, ErrRemoteUnavailable) {
		err = fmt.Errorf("%w: %w", ErrRemoteUnavailable, err)
	}
	return fmt.Errorf("partlog/log: %s from remote segment %s: %w", what, id, err)
}

// brokenErr is the error of a read that needs the copies of a partition
// whose remote log metadata could not be read.
func (t *partTier) brokenErr(what string) error {
	return fmt.Errorf("%w: %s: %w", ErrRemoteUnavailable, what, t.broken)
}

// remoteRead reads offset, below the local log start localStart, from the
// copies as ReadFrom reads a local segment: whole batches, starting with
// the first whose last offset is at or past offset, from the copy
// remoteMeta.locate names. how is copyServed when the copy answered, with
// batches or an error, else it says where the read goes on. A fetch that
// failed once the metadata no longer records the copy "copied" is no
// answer: the copy went meanwhile and the read starts again (copyGone), as
// a local read does after segment.ErrDeleted. Any failure of a copy still
// recorded wraps ErrRemoteUnavailable (remoteErr).
func (t *partTier) remoteRead(offset, localStart int64, maxBytes int) (_ Records, how copyRead, err error) {
	if t.broken != nil {
		return Records{}, copyServed, t.brokenErr(fmt.Sprintf("offset %d", offset))
	}
	meta := t.meta.Load()
	if offset < meta.start {
		// Deleted from the whole log (DeleteRecordsBefore), though a
		// copy may still hold it until the next pass.
		return Records{}, copyServed, fmt.Errorf("%w: offset %d below the log start %d", ErrOffsetOutOfRange, offset, meta.start)
	}
	md, how := meta.locate(offset, localStart)
	if how != copyServed {
		return Records{}, how, nil
	}
	ctx := t.d.ctx
	r := newRecords()
	defer func() {
		if err == nil {
			return
		}
		_ = r.discard()
		if !t.meta.Load().copied(md.ID) {
			how, err = copyGone, nil
			return
		}
		err = t.remoteErr(fmt.Sprintf("read offset %d", offset), md.ID, err)
	}()
	idx, err := t.index(ctx, md.ID, RemoteOffsetIndex)
	if err != nil {
		return Records{}, copyServed, err
	}
	b := r.scratch[:0]
	first, next := int64(-1), int64(-1)
	err = t.walkCopy(ctx, md, offsetFloor(md, idx, offset), func(e copyEntry) (bool, error) {
		if e.last < offset {
			return true, nil
		}
		if first >= 0 && int64(len(b))+e.size > int64(maxBytes) {
			return false, nil
		}
		var err error
		if b, err = t.readAt(ctx, b, md, e.pos, e.size); err != nil {
			return false, err
		}
		if first < 0 {
			first = e.base
		}
		next = e.last + 1
		return int64(len(b)) < int64(maxBytes), nil
	})
	if err != nil {
		return Records{}, copyServed, err
	}
	if first < 0 {
		return Records{}, copyServed, fmt.Errorf("%w: no batch at or after offset %d in the copy ending at %d", batch.ErrCorrupt, offset, md.EndOffset)
	}
	r.scratch, r.b = b, b
	r.first, r.next, r.from = first, next, offset
	t.remoteReads.Add(1)
	return r.handle(), copyServed, nil
}

// wholeStart returns the first offset of the whole log given the local log
// start: the first copy's base offset, or the whole log's start when that
// lies inside the copy (DeleteRecordsBefore), when copies hold offsets
// below localStart (the offsets a read serves from the copies), else
// localStart. first is that copy, ok false when there is none.
func (t *partTier) wholeStart(localStart int64) (start int64, first RemoteSegmentMetadata, ok bool) {
	m := t.meta.Load()
	for _, e := range m.segs {
		if e.state != remoteCopied {
			continue
		}
		// No copy in use lies wholly below the start (remoteMeta).
		if s := max(e.desc.BaseOffset, m.start); s < localStart {
			return s, e.desc, true
		}
		break
	}
	return localStart, RemoteSegmentMetadata{}, false
}

// copyEpochAt returns the leader epoch of offset in the copy md (the last
// of its epochs starting at or below offset), UndefinedEpoch when none
// does.
func copyEpochAt(md RemoteSegmentMetadata, offset int64) int32 {
	epoch := UndefinedEpoch
	for _, e := range md.LeaderEpochs {
		if e.StartOffset > offset {
			break
		}
		epoch = e.Epoch
	}
	return epoch
}

// remoteOffsetForTimestamp answers OffsetForTimestamp for ts >= 0 from the
// copies of the offsets below localStart, in offset order, skipping those
// whose MaxTimestamp is below ts. done is false when none of them holds a
// record with a timestamp >= ts: the local segments answer. A record at
// or past hw is not found (done).
func (t *partTier) remoteOffsetForTimestamp(ts, localStart, hw int64) (_ TimestampOffset, found, done bool, err error) {
	if t.broken != nil {
		return TimestampOffset{}, false, true, t.brokenErr(fmt.Sprintf("offset for timestamp %d", ts))
	}
	start, _, _ := t.wholeStart(localStart)
	for _, e := range t.meta.Load().segs {
		md := e.desc
		if md.BaseOffset >= localStart {
			break
		}
		if e.state != remoteCopied || md.MaxTimestamp < ts {
			continue
		}
		to, ok, err := t.findInCopy(md, ts, start)
		if err != nil {
			return TimestampOffset{}, false, true, t.remoteErr(fmt.Sprintf("offset for timestamp %d", ts), md.ID, err)
		}
		if !ok {
			continue
		}
		if to.Offset >= hw {
			return TimestampOffset{}, false, true, nil
		}
		return to, true, true, nil
	}
	return TimestampOffset{}, false, false, nil
}

// findInCopy returns the first record of the copy md whose timestamp is
// >= ts and whose offset is >= startOffset, as Segment.FindOffsetByTimestamp
// finds it in a local segment: the copy's time index gives the last entry
// at or below ts, its offset index the position of the last indexed batch
// starting at or below max(that entry's offset, startOffset), and the
// batches are scanned from there, through the cache's chunks, for the
// first whose maxTimestamp is >= ts and the first record in it that
// qualifies. The answer carries its batch's partitionLeaderEpoch
// (UndefinedEpoch for a legacy message).
func (t *partTier) findInCopy(md RemoteSegmentMetadata, ts, startOffset int64) (to TimestampOffset, found bool, err error) {
	ctx := t.d.ctx
	tidx, err := t.index(ctx, md.ID, RemoteTimeIndex)
	if err != nil {
		return to, false, err
	}
	from := md.BaseOffset
	// Entries are 12 bytes (timestamp, offset relative to the base) with
	// increasing timestamps; the last one at or below ts.
	n := len(tidx) / 12
	if i := sort.Search(n, func(i int) bool { return int64(binary.BigEndian.Uint64(tidx[12*i:])) > ts }) - 1; i >= 0 {
		from = md.BaseOffset + int64(binary.BigEndian.Uint32(tidx[12*i+8:]))
	}
	from = max(from, startOffset)
	oidx, err := t.index(ctx, md.ID, RemoteOffsetIndex)
	if err != nil {
		return to, false, err
	}
	var b []byte
	err = t.walkCopy(ctx, md, offsetFloor(md, oidx, from), func(e copyEntry) (bool, error) {
		if e.last < startOffset {
			return true, nil
		}
		if e.v2() && int64(binary.BigEndian.Uint64(e.h[35:43])) < ts {
			return true, nil // the batch's maxTimestamp is below ts
		}
		var err error
		if b, err = t.readAt(ctx, b[:0], md, e.pos, e.size); err != nil {
			return false, err
		}
		off, rts, ok, err := segment.FirstRecordAtOrAfter(b, ts, startOffset)
		if err != nil {
			return false, fmt.Errorf("entry at %d: %w", e.pos, err)
		}
		if !ok {
			return true, nil
		}
		to = TimestampOffset{Timestamp: rts, Offset: off, LeaderEpoch: UndefinedEpoch}
		if e.v2() {
			to.LeaderEpoch = batch.Batch(b).PartitionLeaderEpoch()
		}
		found = true
		return false, nil
	})
	return to, found, err
}

// maxTimestampCopy returns the copy holding offsets below firstLocal (the
// base offset of the first local segment) with the largest MaxTimestamp,
// the first on ties; ok is false when no such copy has a timestamp.
func (t *partTier) maxTimestampCopy(firstLocal int64) (md RemoteSegmentMetadata, ok bool) {
	best := batch.NoTimestamp
	for _, e := range t.meta.Load().segs {
		if e.desc.BaseOffset >= firstLocal {
			break
		}
		if e.state == remoteCopied && e.desc.MaxTimestamp > best {
			md, best, ok = e.desc, e.desc.MaxTimestamp, true
		}
	}
	return md, ok
}

// remoteAborted appends to dst the aborted transactions overlapping
// [from, upper) from the transaction indexes of the copies below
// firstLocal (the base offset of the first local segment), from the one
// holding from on, and reports complete as Segment.CollectAbortedTxns
// does: the local segments after them need not be looked at.
func (t *partTier) remoteAborted(dst []AbortedTxn, from, upper, firstLocal int64) (_ []AbortedTxn, complete bool, err error) {
	if t.broken != nil {
		return dst, false, t.brokenErr(fmt.Sprintf("aborted transactions from offset %d", from))
	}
	for _, e := range t.meta.Load().segs {
		md := e.desc
		if md.BaseOffset >= firstLocal {
			break
		}
		if e.state != remoteCopied || md.EndOffset < from {
			continue
		}
		b, err := t.index(t.d.ctx, md.ID, RemoteTxnIndex)
		if err != nil {
			return dst, false, t.remoteErr(fmt.Sprintf("aborted transactions from offset %d", from), md.ID, err)
		}
		list, err := segment.DecodeTxnIndex(md.ID.String()+".txnindex", b)
		if err != nil {
			return dst, false, t.remoteErr(fmt.Sprintf("aborted transactions from offset %d", from), md.ID, err)
		}
		for _, a := range list {
			if a.LastOffset >= from && a.FirstOffset < upper {
				dst = append(dst, a)
			}
			if a.LastStableOffset >= upper {
				return dst, true, nil
			}
		}
	}
	return dst, false, nil
}
