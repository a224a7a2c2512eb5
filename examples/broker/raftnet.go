package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Raft transport: every node keeps one outgoing TCP connection to each
// peer's raft address and accepts theirs. A frame is
//
//	uint32 length of the rest (big-endian)
//	uint16 topic length, topic, int32 partition
//	the raft message (protobuf)
//
// Messages are fire and forget, as raft expects of its transport: a full
// queue or a broken connection drops them (raft retries), and the peer
// is reported unreachable to the partition's raft node only through
// missing answers.
const (
	// raftQueue is how many frames wait per peer before new ones are
	// dropped.
	raftQueue = 8192
	// maxRaftFrame bounds an incoming frame (a MsgApp is at most
	// raftMaxMsgBytes of entries, plus one batch beyond).
	maxRaftFrame = 64 << 20
)

// errRaftFrame is wrapped by every error about a malformed incoming frame.
var errRaftFrame = errors.New("broker: malformed raft frame")

// transport moves raft messages between the nodes.
type transport struct {
	self    uint64
	log     *slog.Logger
	ln      net.Listener
	deliver func(topic string, partition int32, m *pb.Message)

	wg sync.WaitGroup

	mu     sync.Mutex
	peers  map[uint64]*peer // grows when a membership change adds a node (addPeer)
	ctx    context.Context  // set by start: new peers' senders run until it ends
	conns  map[net.Conn]struct{}
	closed bool // ctx ended: connections tracked from now on are closed at once
}

// peer is the outgoing side towards one node.
type peer struct {
	id uint64
	q  chan []byte

	mu   sync.Mutex
	addr string
}

// newTransport listens on the node's raft address.
func newTransport(ctx context.Context, self uint64, addr string, peers map[uint64]string, logger *slog.Logger, deliver func(string, int32, *pb.Message)) (*transport, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("raft listener: %w", err)
	}
	t := &transport{self: self, log: logger, ln: ln, deliver: deliver, peers: make(map[uint64]*peer), conns: make(map[net.Conn]struct{})}
	for id, a := range peers {
		if id != self {
			t.peers[id] = &peer{id: id, addr: a, q: make(chan []byte, raftQueue)}
		}
	}
	return t, nil
}

// start runs the accept loop and one sender per peer until ctx ends.
func (t *transport) start(ctx context.Context) {
	t.wg.Go(func() { t.accept(ctx) })
	t.mu.Lock()
	t.ctx = ctx
	for _, p := range t.peers {
		t.wg.Go(func() { t.sendLoop(ctx, p) })
	}
	t.mu.Unlock()
	t.wg.Go(func() {
		<-ctx.Done()
		_ = t.ln.Close()
		t.mu.Lock()
		t.closed = true
		for c := range t.conns {
			_ = c.Close()
		}
		t.mu.Unlock()
	})
}

// wait returns once every goroutine of the transport has ended.
func (t *transport) wait() { t.wg.Wait() }

// addPeer makes node id reachable at addr (a node a membership change
// names): a new peer gets its sender; a known one whose address changed
// is dialled at the new address from its next connection on.
func (t *transport) addPeer(id uint64, addr string) {
	if id == t.self {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.peers[id]; ok {
		p.setAddr(addr)
		return
	}
	p := &peer{id: id, addr: addr, q: make(chan []byte, raftQueue)}
	t.peers[id] = p
	if t.ctx != nil && !t.closed {
		ctx := t.ctx
		t.wg.Go(func() { t.sendLoop(ctx, p) })
	}
}

// setAddr changes the address the peer is dialled at.
func (p *peer) setAddr(addr string) {
	p.mu.Lock()
	p.addr = addr
	p.mu.Unlock()
}

// address returns the address the peer is dialled at.
func (p *peer) address() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// send queues m for its destination; it never blocks.
func (t *transport) send(topic string, partition int32, m *pb.Message) {
	t.mu.Lock()
	p, ok := t.peers[m.GetTo()]
	t.mu.Unlock()
	if !ok {
		return
	}
	body, err := proto.Marshal(m)
	if err != nil {
		t.log.Error("raft message does not encode", "err", err)
		return
	}
	f := make([]byte, 0, 4+2+len(topic)+4+len(body))
	f = binary.BigEndian.AppendUint32(f, uint32(2+len(topic)+4+len(body)))
	f = binary.BigEndian.AppendUint16(f, uint16(len(topic)))
	f = append(f, topic...)
	f = binary.BigEndian.AppendUint32(f, uint32(partition))
	f = append(f, body...)
	select {
	case p.q <- f:
	default: // dropped: raft resends
	}
}

// sendLoop writes p's queue to a connection, dialling (with a backoff
// from 10 ms to 500 ms) whenever it has none.
func (t *transport) sendLoop(ctx context.Context, p *peer) {
	var backoff time.Duration
	for ctx.Err() == nil {
		d := net.Dialer{Timeout: time.Second}
		c, err := d.DialContext(ctx, "tcp", p.address())
		if err != nil {
			backoff = min(max(2*backoff, 10*time.Millisecond), 500*time.Millisecond)
			// Messages queued meanwhile are stale: drop them.
			for len(p.q) > 0 {
				<-p.q
			}
			sleepCtx(ctx, backoff)
			continue
		}
		backoff = 0
		t.track(c, true)
		err = t.write(ctx, c, p)
		t.track(c, false)
		_ = c.Close()
		if err != nil && ctx.Err() == nil {
			t.log.Debug("raft connection lost", "peer", p.id, "err", err)
		}
	}
}

// write sends frames until an error or ctx ends; it flushes whenever the
// queue is empty.
func (t *transport) write(ctx context.Context, c net.Conn, p *peer) error {
	w := bufio.NewWriterSize(c, 256<<10)
	for {
		var f []byte
		select {
		case <-ctx.Done():
			return nil
		case f = <-p.q:
		}
		_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := w.Write(f); err != nil {
			return err
		}
		if len(p.q) == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
}

// track adds or removes a connection from the set closed at shutdown; a
// connection added after shutdown began is closed at once.
func (t *transport) track(c net.Conn, add bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if add {
		if t.closed {
			_ = c.Close()
			return
		}
		t.conns[c] = struct{}{}
	} else {
		delete(t.conns, c)
	}
}

// accept serves incoming connections.
func (t *transport) accept(ctx context.Context) {
	for {
		c, err := t.ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			sleepCtx(ctx, 10*time.Millisecond)
			continue
		}
		t.track(c, true)
		t.wg.Go(func() {
			defer t.track(c, false)
			defer c.Close()
			if err := t.read(c); err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
				t.log.Debug("raft connection closed", "remote", c.RemoteAddr().String(), "err", err)
			}
		})
	}
}

// read delivers the frames of one incoming connection.
func (t *transport) read(c net.Conn) error {
	r := bufio.NewReaderSize(c, 256<<10)
	var hdr [4]byte
	var buf []byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return err
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n < 6 || n > maxRaftFrame {
			return fmt.Errorf("%w: length %d", errRaftFrame, n)
		}
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return err
		}
		tl := int(binary.BigEndian.Uint16(buf))
		if 2+tl+4 > len(buf) {
			return fmt.Errorf("%w: topic of %d bytes in a frame of %d", errRaftFrame, tl, n)
		}
		topic := string(buf[2 : 2+tl])
		partition := int32(binary.BigEndian.Uint32(buf[2+tl:]))
		m := &pb.Message{}
		// Unmarshal copies: buf is reused for the next frame.
		if err := proto.Unmarshal(buf[2+tl+4:], m); err != nil {
			return fmt.Errorf("%w: %v", errRaftFrame, err)
		}
		t.deliver(topic, partition, m)
	}
}
