package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Connection hygiene, as Kafka's broker keeps it: an idle timeout
// (connections.max.idle.ms), a bound on one request (socket.request.max.bytes)
// and on the request bytes all connections hold together
// (queued.max.request.bytes), and request bytes buffered as they arrive
// rather than allocated from the size a client announces.

// connDefaults fills in the connection limits' defaults and checks them.
func (c *config) connDefaults() error {
	if c.IdleTimeout == 0 {
		c.IdleTimeout = defaultIdleTimeout
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = defaultMaxRequestBytes
	}
	if c.QueuedMaxRequestBytes == 0 {
		c.QueuedMaxRequestBytes = defaultQueuedMaxRequestBytes
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = defaultMaxConnections
	}
	if c.MaxAutoCreatePerRequest == 0 {
		c.MaxAutoCreatePerRequest = defaultMaxAutoCreatePerRequest
	}
	if c.SegmentIndexBytes == 0 {
		c.SegmentIndexBytes = defaultSegmentIndexBytes
	}
	switch {
	case c.MaxRequestBytes < 8:
		return fmt.Errorf("socket.request.max.bytes %d: a request header alone needs 8 bytes", c.MaxRequestBytes)
	case c.QueuedMaxRequestBytes < 0:
		return fmt.Errorf("queued.max.request.bytes %d is negative", c.QueuedMaxRequestBytes)
	case c.MaxConnections < 0:
		return fmt.Errorf("max.connections %d is negative", c.MaxConnections)
	case c.MaxAutoCreatePerRequest < 0:
		return fmt.Errorf("auto-create limit %d is negative", c.MaxAutoCreatePerRequest)
	}
	return nil
}

// memPool is the budget of request bytes all connections may hold beyond
// their allowance (queued.max.request.bytes). A connection that needs more
// than what is left waits until another releases some, as a Kafka broker
// mutes a channel when its memory pool is exhausted.
type memPool struct {
	mu    sync.Mutex
	limit int64
	used  int64
	freed chan struct{} // closed and replaced by every release
	// onWait, when set, is called each time a connection starts waiting
	// (tests use it to know the budget is exhausted).
	onWait func()
}

func newMemPool(limit int64) *memPool {
	return &memPool{limit: limit, freed: make(chan struct{})}
}

// errMemoryWait is what acquire returns when the budget stayed exhausted
// for the whole wait.
var errMemoryWait = errors.New("no request memory became free")

// acquire takes n bytes from the budget, waiting up to wait (0: until ctx
// ends) for them. A single grant larger than the whole budget is made when
// nothing else is held, so that one large request is never refused forever.
func (p *memPool) acquire(ctx context.Context, n int64, wait time.Duration) error {
	var timer <-chan time.Time
	for {
		p.mu.Lock()
		if p.used+n <= p.limit || p.used == 0 {
			p.used += n
			p.mu.Unlock()
			return nil
		}
		freed := p.freed
		onWait := p.onWait
		p.mu.Unlock()
		if onWait != nil {
			onWait()
		}
		if timer == nil && wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-freed:
		case <-timer:
			return errMemoryWait
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// release returns n bytes to the budget and wakes the waiters.
func (p *memPool) release(n int64) {
	if n == 0 {
		return
	}
	p.mu.Lock()
	p.used -= n
	close(p.freed)
	p.freed = make(chan struct{})
	p.mu.Unlock()
}

// requestReader reads one connection's request frames, buffering each
// request's bytes as they arrive, in buffers that double from
// requestAllowance up to the announced size, charging the pool for what
// exceeds the allowance.
type requestReader struct {
	s *server
	c net.Conn
	r *bufio.Reader

	held    int64 // bytes of the current frame buffer, counted in s.buffered
	charged int64 // the part of held taken from s.pool
	want    int32 // the size the current request announced (0: none)
	got     int   // bytes of it received so far
}

// sizeError is a size prefix outside [8, socket.request.max.bytes].
type sizeError struct{ size, limit int32 }

func (e *sizeError) Error() string {
	return fmt.Sprintf("request size %d outside [8, %d] (socket.request.max.bytes)", e.size, e.limit)
}

// next returns the next request frame (without its size prefix). It fails
// when the connection is idle past the timeout (also in the middle of a
// request), when the size prefix is out of bounds, when no memory became
// free within the idle timeout, or when the client closed the connection.
func (rr *requestReader) next(ctx context.Context) ([]byte, error) {
	rr.want, rr.got = 0, 0
	var sz [4]byte
	rr.deadline()
	if _, err := io.ReadFull(rr.r, sz[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(sz[:]))
	if size < 8 || size > rr.s.maxRequest {
		return nil, &sizeError{size: size, limit: rr.s.maxRequest}
	}
	rr.want = size
	var buf []byte
	for len(buf) < int(size) {
		if len(buf) == cap(buf) {
			newCap := min(int(size), max(2*cap(buf), requestAllowance))
			if err := rr.grow(ctx, newCap); err != nil {
				return nil, err
			}
			nb := make([]byte, len(buf), newCap)
			copy(nb, buf)
			buf = nb
		}
		rr.deadline()
		n, err := rr.r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		rr.got = len(buf)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return buf, nil
}

// grow accounts for a frame buffer of newCap bytes replacing the current
// one, drawing what passes the allowance from the pool.
func (rr *requestReader) grow(ctx context.Context, newCap int) error {
	charge := max(int64(newCap)-requestAllowance, 0) - rr.charged
	if charge > 0 {
		if err := rr.s.pool.acquire(ctx, charge, rr.s.idle); err != nil {
			return err
		}
		rr.charged += charge
	}
	now := rr.s.buffered.Add(int64(newCap) - rr.held)
	rr.held = int64(newCap)
	for peak := rr.s.peakBuffered.Load(); now > peak && !rr.s.peakBuffered.CompareAndSwap(peak, now); peak = rr.s.peakBuffered.Load() {
	}
	return nil
}

// release gives back the current frame's memory (the frame must no longer
// be used).
func (rr *requestReader) release() {
	rr.s.pool.release(rr.charged)
	rr.s.buffered.Add(-rr.held)
	rr.charged, rr.held = 0, 0
}

// deadline arms the idle timeout for the next read.
func (rr *requestReader) deadline() {
	if rr.s.idle > 0 {
		_ = rr.c.SetReadDeadline(time.Now().Add(rr.s.idle))
	}
}

// logClose says why next failed, when the broker (not the client) ends the
// connection.
func (rr *requestReader) logClose(err error) {
	remote := rr.c.RemoteAddr().String()
	var se *sizeError
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		if rr.want > 0 {
			rr.s.log.Info("closing idle connection in the middle of a request (connections.max.idle.ms)",
				"remote", remote, "idle", rr.s.idle, "request_size", rr.want, "received", rr.got)
		} else {
			rr.s.log.Info("closing idle connection (connections.max.idle.ms)", "remote", remote, "idle", rr.s.idle)
		}
	case errors.As(err, &se):
		rr.s.log.Warn("closing connection: bad request size", "remote", remote, "size", se.size, "socket_request_max_bytes", se.limit)
	case errors.Is(err, errMemoryWait):
		rr.s.log.Warn("closing connection: request memory (queued.max.request.bytes) stayed exhausted for the idle timeout",
			"remote", remote, "request_size", rr.want, "received", rr.got, "idle", rr.s.idle)
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, context.Canceled):
		// The client closed, or the broker is shutting down.
	default:
		rr.s.log.Debug("connection ended", "remote", remote, "err", err)
	}
}
