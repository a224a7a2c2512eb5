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
	if int64(len(b)) > c.limit {
		return b, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok {
		c.m[k] = c.lru.PushFront(&remoteCacheEntry{key: k, b: b})
		c.used += int64(len(b))
	}
	for c.used > c.limit {
		e := c.lru.Back()
		ce := e.Value.(*remoteCacheEntry)
		c.lru.Remove(e)
		delete(c.m, ce.key)
		c.used -= int64(len(ce.b))
	}
	return b, nil
}

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

// remoteRead reads whole batches starting with the one holding offset from
// the copy that holds it, as ReadFrom reads a local segment. ok is false
// when no copy holds offset.
func (t *partTier) remoteRead(offset int64, maxBytes int) (_ Records, ok bool, err error) {
	if t.broken != nil {
		return Records{}, true, fmt.Errorf("%w: offset %d: %w", ErrRemoteUnavailable, offset, t.broken)
	}
	md, found := t.meta.Load().find(offset)
	if !found {
		return Records{}, false, nil
	}
	ctx := t.d.ctx
	r := newRecords()
	defer func() {
		if err != nil {
			_ = r.discard()
			t.readFails.Add(1)
			if !errors.Is(err, ErrRemoteUnavailable) && !errors.Is(err, ErrRemoteSegmentNotFound) {
				err = fmt.Errorf("%w: %w", ErrRemoteUnavailable, err)
			}
			err = fmt.Errorf("partlog/log: read offset %d from remote segment %s: %w", offset, md.ID, err)
		}
	}()
	idx, err := t.index(ctx, md.ID, RemoteOffsetIndex)
	if err != nil {
		return Records{}, true, err
	}
	n := len(idx) / 8
	// The last entry at or below offset.
	i := sort.Search(n, func(i int) bool {
		return md.BaseOffset+int64(binary.BigEndian.Uint32(idx[8*i:])) > offset
	}) - 1
	var pos int64
	if i >= 0 {
		pos = int64(binary.BigEndian.Uint32(idx[8*i+4:]))
	}
	b := r.scratch[:0]
	// Through a v2 batch's lastOffsetDelta (bytes 23 to 27).
	var hdr [27]byte
	first, next := int64(-1), int64(-1)
	for pos < md.Size {
		h, err := t.readAt(ctx, hdr[:0], md, pos, min(int64(len(hdr)), md.Size-pos))
		if err != nil {
			return Records{}, true, err
		}
		if len(h) < entryHeader {
			return Records{}, true, fmt.Errorf("%w: entry header cut at %d", batch.ErrCorrupt, pos)
		}
		size := entryHeader + int64(binary.BigEndian.Uint32(h[8:12]))
		if pos+size > md.Size {
			return Records{}, true, fmt.Errorf("%w: entry at %d of %d bytes overruns the segment", batch.ErrCorrupt, pos, size)
		}
		base := int64(binary.BigEndian.Uint64(h[:8]))
		last := base
		if len(h) >= 27 && h[16] >= 2 {
			last = base + int64(int32(binary.BigEndian.Uint32(h[23:27])))
		}
		if last < offset {
			pos += size
			continue
		}
		if first >= 0 && int64(len(b))+size > int64(maxBytes) {
			break
		}
		if b, err = t.readAt(ctx, b, md, pos, size); err != nil {
			return Records{}, true, err
		}
		if first < 0 {
			first = base
		}
		next = last + 1
		pos += size
		if int64(len(b)) >= int64(maxBytes) {
			break
		}
	}
	if first < 0 {
		return Records{}, true, fmt.Errorf("%w: no batch at or after offset %d in the copy ending at %d", batch.ErrCorrupt, offset, md.EndOffset)
	}
	r.scratch, r.b = b, b
	r.first, r.next, r.from = first, next, offset
	t.remoteReads.Add(1)
	return r.handle(), true, nil
}
