package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/partlog/partlog/index/vfs"
	plog "github.com/partlog/partlog/log"
)

// config is what run needs; main fills it from flags, tests directly.
type config struct {
	// Addr is the listen address, host:port; port 0 picks a free port.
	Addr string
	// DataDir holds one directory per topic-partition.
	DataDir string
	// Partitions is the partition count of auto-created topics (default 1).
	Partitions int
	// AllowRemote permits a listen address that is not loopback.
	AllowRemote bool
	// Advertise is the host:port put in Metadata and FindCoordinator
	// answers; default the address the listener got.
	Advertise string
	// SegmentBytes is segment.bytes for every partition (0: Kafka's default).
	SegmentBytes int64
	// OffsetsSegmentBytes is segment.bytes of __consumer_offsets (0:
	// Kafka's offsets.topic.segment.bytes, 100 MiB).
	OffsetsSegmentBytes int64
	// CleanupPolicy is cleanup.policy of the other topics: "delete"
	// (default), "compact" or "compact,delete".
	CleanupPolicy string
	// Retention is retention.ms of the other topics (0: 7 days; negative:
	// unlimited).
	Retention time.Duration
	// CleanupInterval is how often the cleanup policies run (0: one
	// minute; negative: never).
	CleanupInterval time.Duration
	// CleanupDone, when set, is called after each run of the cleanup
	// policies (tests wait on it instead of sleeping).
	CleanupDone func()
	// FetchParked, when set, is called each time a Fetch parks to wait for
	// data, just before it waits (tests produce after it instead of
	// sleeping).
	FetchParked func()
	// Logger receives connection and request events (default: discard).
	Logger *slog.Logger
	// Ready, when set, is called with the listener's address once the
	// broker accepts connections (tests listen on port 0).
	Ready func(addr net.Addr)

	// IdleTimeout is connections.max.idle.ms: a connection on which
	// nothing arrives for this long is closed, whether it sent nothing or
	// half a request (0: Kafka's 10 minutes; negative: never).
	IdleTimeout time.Duration
	// MaxRequestBytes is socket.request.max.bytes: a request whose size
	// prefix announces more closes the connection before anything is
	// buffered (0: Kafka's 104857600).
	MaxRequestBytes int32
	// QueuedMaxRequestBytes is queued.max.request.bytes: the most request
	// bytes all connections together may hold in memory beyond each
	// connection's first requestAllowance bytes. A connection whose next
	// bytes do not fit stops reading until memory is released (0:
	// defaultQueuedMaxRequestBytes; Kafka's default is unbounded).
	QueuedMaxRequestBytes int64
	// MaxConnections is max.connections: a connection accepted beyond it
	// is closed at once, with a log line (0: Kafka's 2147483647).
	MaxConnections int
	// DisableAutoCreate is auto.create.topics.enable=false: Metadata and
	// Produce never create a topic.
	DisableAutoCreate bool
	// MaxAutoCreatePerRequest is how many topics one request may create
	// (0: defaultMaxAutoCreatePerRequest). Topics beyond it get
	// UNKNOWN_TOPIC_OR_PARTITION, so the client asks again.
	MaxAutoCreatePerRequest int
	// TransactionMaxTimeout is transaction.max.timeout.ms: the longest
	// transaction timeout InitProducerID accepts (0: 15 minutes).
	TransactionMaxTimeout time.Duration
	// TransactionCheckInterval is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms: how
	// often transactions open past their timeout are aborted (0: 10 s;
	// negative: never).
	TransactionCheckInterval time.Duration
	// SegmentIndexBytes is segment.index.bytes of every partition: the
	// size each active segment's .index and .timeindex are preallocated
	// (with reserved disk blocks) to (0: defaultSegmentIndexBytes).
	SegmentIndexBytes int

	// GroupMetadataVersion is the GroupMetadataValue version of the group
	// metadata records written to __consumer_offsets, 1-3, as Kafka
	// writes the version of its inter.broker.protocol.version: 1 before
	// 2.1, 2 before 2.3, 3 since (0: 3, Kafka 3.9's). Version 0 (before
	// 0.10.1) is read but never written.
	GroupMetadataVersion int16
	// OffsetsRetention is offsets.retention.minutes: an empty group's
	// committed offsets are deleted this long after it became empty,
	// those of a group without members this long after their commit
	// (0: 7 days, Kafka's default; negative: never).
	OffsetsRetention time.Duration
	// OffsetsRetentionCheck is offsets.retention.check.interval.ms: how
	// often expired offsets are looked for (0: 10 minutes).
	OffsetsRetentionCheck time.Duration

	// RemoteStorage, when set, turns tiered storage on (-remote-dir,
	// -remote-s3-endpoint; tiering.go): the user topics' sealed
	// segments are copied to it and read back from it below the local
	// log start. Not with Cluster.
	RemoteStorage plog.RemoteStorage
	// LocalRetentionMs and LocalRetentionBytes are local.retention.ms and
	// local.retention.bytes of the tiered topics: copied segments are
	// deleted locally past them (0: no bound of that kind).
	LocalRetentionMs, LocalRetentionBytes int64
	// RemoteInterval is remote.log.manager.task.interval.ms: how often
	// each tiered partition is copied and its retention applied (0: 30
	// seconds).
	RemoteInterval time.Duration

	// NodeID and Cluster select cluster mode (-node, -cluster): every
	// user topic's partitions are replicated through raft among the
	// nodes of Cluster, of which this is NodeID (see cluster.go). Nil
	// Cluster: the single-node broker.
	NodeID  uint64
	Cluster []clusterNode
	// Join (-join) starts a node that is not a member yet: on its first
	// start its partitions begin with Cluster's other nodes as voters
	// and itself as a learner, until AddRaftVoter adds it (membership.go).
	Join bool

	// onServer, when set, is called with the server before it accepts
	// connections (tests read its counters).
	onServer func(*server)
	// wrapListener, when set, wraps the listener (tests inject accept
	// errors).
	wrapListener func(net.Listener) net.Listener
	// wrapRaftRead, when set, wraps each replica's reads of its
	// partition (tests inject read errors into raft's Storage.Entries).
	wrapRaftRead func(topic string, partition int32, read readFunc) readFunc
}

const (
	// defaultIdleTimeout is connections.max.idle.ms: 10 minutes.
	defaultIdleTimeout = 10 * time.Minute
	// defaultMaxRequestBytes is socket.request.max.bytes: 100 MiB.
	defaultMaxRequestBytes = 100 << 20
	// defaultQueuedMaxRequestBytes bounds the request bytes all
	// connections buffer together. Kafka's queued.max.request.bytes is
	// unbounded by default; here a flood of half-sent requests must not
	// take the process's memory, so the default is a bound.
	defaultQueuedMaxRequestBytes = 256 << 20
	// defaultMaxConnections is max.connections: Kafka's Int.MaxValue.
	defaultMaxConnections = math.MaxInt32
	// defaultMaxAutoCreatePerRequest is how many topics one Metadata or
	// Produce request may create.
	defaultMaxAutoCreatePerRequest = 16
	// defaultSegmentIndexBytes is the broker's segment.index.bytes: 1 MiB
	// instead of Kafka's 10 MiB. Kafka's preallocated index files are
	// sparse; partlog reserves their blocks (so that a full disk fails an
	// append instead of faulting a write into the mapping), so every idle
	// partition would cost 20 MiB of real disk with Kafka's size. With 1
	// MiB a segment holds at least 87,381 index entries (time index) and
	// rolls at the latest after about 340 MiB of 4 KiB-indexed data.
	defaultSegmentIndexBytes = 1 << 20
	// requestAllowance is what every connection may buffer of a request
	// without drawing on QueuedMaxRequestBytes, so small requests (Kafka's
	// ApiVersions, Metadata, Fetch, most Produce) are always served, even
	// while half-sent large requests hold the shared budget.
	requestAllowance = 64 << 10
	// requestChunk is the most a connection reads (and so allocates
	// ahead) at once: request bytes are buffered as they arrive, never
	// from the announced size.
	requestChunk = 1 << 20
	// maxFetchBytes is fetch.max.bytes: the most a Fetch response
	// carries (beyond its first batch).
	maxFetchBytes = 55 << 20
	// maxFetchWait bounds how long a Fetch may park (its MaxWaitMillis is
	// clamped to it).
	maxFetchWait = 30 * time.Second
	// nodeID is this broker's id: it leads every partition.
	nodeID = 0
	// clusterID is the cluster id Metadata reports.
	clusterID = "partlog-broker"
)

// errCloseConn makes the connection loop close the connection, as Kafka does
// for requests it cannot parse or an API version it does not implement.
var errCloseConn = errors.New("broker: closing connection")

// server is one running broker: the listener, the open connections, the
// partitions and the group coordinator.
type server struct {
	log        *slog.Logger
	store      *store
	offsets    *offsetStore
	groups     *coordinator
	txns       *txnCoordinator
	host       string
	port       int32
	prodIDPool *producerIDs
	cluster    *cluster      // nil: single node
	coord      *coordinators // cluster mode's coordinator gates (coordstate.go)

	idle          time.Duration // connections.max.idle.ms (0: never)
	maxRequest    int32         // socket.request.max.bytes
	maxConns      int           // max.connections
	pool          *memPool      // queued.max.request.bytes
	buffered      atomic.Int64  // request bytes all connections hold now
	peakBuffered  atomic.Int64  // the most buffered ever was
	autoCreate    bool
	createPerReq  int
	acceptBackoff func(ctx context.Context, d time.Duration) // waits d (tests stub it)
	fetchParked   func()                                     // config.FetchParked
	// cleanupPolicy and retention are -cleanup-policy and -retention:
	// the cleanup of a topic without configuration overrides.
	cleanupPolicy string
	retention     time.Duration

	mu    sync.Mutex // guards conns
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// run serves the Kafka protocol on cfg.Addr until ctx is cancelled, then
// closes every connection and every partition and returns. An error is
// returned when the broker cannot start (address refused or in use, data
// directory unreadable) or when closing a partition fails.
func run(ctx context.Context, cfg config) (err error) {
	switch {
	case cfg.GroupMetadataVersion == 0:
		cfg.GroupMetadataVersion = defaultGroupValueVersion
	case cfg.GroupMetadataVersion < 1 || cfg.GroupMetadataVersion > maxGroupValueVersion:
		return fmt.Errorf("%w: %d (1-%d)", errGroupValueVersion, cfg.GroupMetadataVersion, maxGroupValueVersion)
	}
	if cfg.Partitions <= 0 {
		cfg.Partitions = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := checkLoopback(cfg.Addr, cfg.AllowRemote); err != nil {
		return err
	}
	if cfg.OffsetsSegmentBytes == 0 {
		cfg.OffsetsSegmentBytes = defaultOffsetsSegmentBytes
	}
	if err := cfg.connDefaults(); err != nil {
		return err
	}
	remote, err := remoteConfig(cfg) // tiering.go
	if err != nil {
		return err
	}
	st, err := openStore(cfg.DataDir, int32(cfg.Partitions), storeConfig{
		segmentBytes:        cfg.SegmentBytes,
		offsetsSegmentBytes: cfg.OffsetsSegmentBytes,
		indexBytes:          cfg.SegmentIndexBytes,
		replicated:          cfg.Cluster != nil,
		remote:              remote,
	}, cfg.Logger)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := st.close(); err == nil {
			err = cerr
		}
	}()
	offsets, err := openOffsetStore(st)
	if err != nil {
		return err
	}
	txns, err := openTxnCoordinator(st, offsets, cfg.Logger, cfg.TransactionMaxTimeout, cfg.Cluster != nil)
	if err != nil {
		return err
	}
	floor := max(st.maxProducerID(), txns.maxProducerID()) + 1
	if cfg.Cluster != nil && floor > 0 {
		// The partitions hold ids spread by node (cluster.producerID):
		// the allocator's next raw id is past the largest one's.
		floor = (floor-1)/producerIDStride + 1
	}
	prodIDs, err := openProducerIDs(vfs.Default, cfg.DataDir, floor)
	if err != nil {
		return err
	}
	txns.ids = prodIDs
	var cl *cluster
	if cfg.Cluster != nil {
		cctx, cancel := context.WithCancel(ctx)
		if cl, err = newCluster(cctx, cfg, st); err != nil {
			cancel()
			return err
		}
		defer cl.stop() // before the store closes
		defer cancel()  // and before that, the replicas end
		if err := cl.start(cctx); err != nil {
			return err
		}
	}

	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Addr)
	if err != nil {
		return err
	}
	if cfg.wrapListener != nil {
		ln = cfg.wrapListener(ln)
	}
	if !cfg.AllowRemote {
		// "localhost" may resolve to anything: check what we got.
		if ta, ok := ln.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
			_ = ln.Close()
			return fmt.Errorf("%s is not a loopback address (use -allow-remote)", ln.Addr())
		}
	}
	adv := cfg.Advertise
	if adv == "" {
		adv = ln.Addr().String()
	}
	host, portStr, err := net.SplitHostPort(adv)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("advertised address: %w", err)
	}
	port, err := strconv.ParseInt(portStr, 10, 32)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("advertised port: %w", err)
	}

	s := &server{
		log:        cfg.Logger,
		store:      st,
		offsets:    offsets,
		host:       host,
		port:       int32(port),
		conns:      make(map[net.Conn]struct{}),
		prodIDPool: prodIDs,
		txns:       txns,
		cluster:    cl,

		idle:          max(cfg.IdleTimeout, 0),
		maxRequest:    cfg.MaxRequestBytes,
		maxConns:      cfg.MaxConnections,
		pool:          newMemPool(cfg.QueuedMaxRequestBytes),
		autoCreate:    !cfg.DisableAutoCreate,
		createPerReq:  cfg.MaxAutoCreatePerRequest,
		cleanupPolicy: cfg.CleanupPolicy,
		retention:     cfg.Retention,
		acceptBackoff: sleepCtx,
		fetchParked:   cfg.FetchParked,
	}
	s.groups = newCoordinator(s.log, offsets, cfg.GroupMetadataVersion, cfg.OffsetsRetention, cfg.OffsetsRetentionCheck)
	if cl != nil {
		s.setupClusterCoordinators()
	} else {
		offsets.mu.Lock()
		s.groups.load(offsets.groupRecordsLocked())
		offsets.mu.Unlock()
	}
	clr, err := newCleaner(s, cfg)
	if err != nil {
		_ = ln.Close()
		s.groups.close()
		return err
	}
	if cfg.onServer != nil {
		cfg.onServer(s)
	}
	txns.start(cfg.TransactionCheckInterval)
	defer txns.close()
	s.log.Info("broker listening", "addr", ln.Addr().String(), "data", cfg.DataDir, "topics", st.topicCount())
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr())
	}

	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		s.accept(ctx, ln)
	}()
	go func() {
		defer s.wg.Done()
		clr.run(ctx)
	}()
	<-ctx.Done()
	s.log.Info("broker shutting down")
	_ = ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.groups.close()
	s.wg.Wait()
	return nil
}

// checkLoopback refuses a listen address whose host is not a loopback name
// or IP unless allowRemote is set. An empty host (all interfaces) is remote.
func checkLoopback(addr string, allowRemote bool) error {
	if allowRemote {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address: %w", err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("refusing to listen on %q: not a loopback address (use -allow-remote; the broker has no authentication)", addr)
	}
	return nil
}

// accept serves each new connection in its own goroutine until the
// listener is closed or ctx ends. Any other accept error (EMFILE when the
// process is out of descriptors, ECONNABORTED, ENOBUFS, ...) is logged and
// retried after a backoff that doubles from 5 ms to 1 s, as Kafka's acceptor
// keeps accepting after an IOException: one error never ends the loop. A
// connection beyond max.connections is closed at once, with a log line.
func (s *server) accept(ctx context.Context, ln net.Listener) {
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed, retrying", "err", err, "too_many_open_files", errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE), "backoff", backoff)
			s.acceptBackoff(ctx, backoff)
			continue
		}
		backoff = 0
		s.mu.Lock()
		if ctx.Err() != nil {
			s.mu.Unlock()
			_ = c.Close()
			return
		}
		if len(s.conns) >= s.maxConns {
			n := len(s.conns)
			s.mu.Unlock()
			s.log.Warn("closing new connection: max.connections reached", "remote", c.RemoteAddr().String(), "connections", n, "max_connections", s.maxConns)
			_ = c.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.serveConn(ctx, c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			_ = c.Close()
		}()
	}
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// requestHeader is Kafka's request header, v0 to v2.
type requestHeader struct {
	key           int16
	version       int16
	correlationID int32
	clientID      *string
	// clientHost is the client's address as Kafka records it in group
	// metadata ("/" and the IP); not part of the header's bytes.
	clientHost string
}

// serveConn answers requests on c one at a time, in order (Kafka answers a
// connection's requests in the order they came).
func (s *server) serveConn(ctx context.Context, c net.Conn) {
	defer func() {
		// A bug in a handler must not take the broker (and every other
		// client) down: drop this connection and say why.
		if r := recover(); r != nil {
			s.log.Error("panic serving connection, closing it", "remote", c.RemoteAddr().String(), "panic", r, "stack", string(debug.Stack()))
		}
	}()
	r := bufio.NewReaderSize(c, 64<<10)
	rr := &requestReader{s: s, c: c, r: r}
	defer rr.release()
	var out []byte
	for {
		frame, err := rr.next(ctx)
		if err != nil {
			rr.logClose(err)
			return
		}
		hdr, body, err := parseRequestHeader(frame)
		if err != nil {
			s.log.Warn("bad request header, closing", "remote", c.RemoteAddr().String(), "err", err)
			return
		}
		hdr.clientHost = clientHost(c.RemoteAddr())
		resp, cleanup, err := s.handle(ctx, hdr, body)
		if err != nil {
			s.log.Warn("closing connection", "remote", c.RemoteAddr().String(), "api", hdr.key, "version", hdr.version, "err", err)
			return
		}
		if resp == nil { // acks=0
			rr.release()
			continue
		}
		_ = c.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if fr, ok := resp.(*fetchResponse); ok && fr.Version >= zeroCopyFetch.min && fr.Version <= zeroCopyFetch.max {
			err = writeFetch(c, hdr.correlationID, fr)
		} else {
			out = appendResponse(out[:0], hdr, resp)
			_, err = c.Write(out)
		}
		if cleanup != nil {
			cleanup()
		}
		rr.release()
		if err != nil {
			return
		}
		if cap(out) > 1<<20 {
			out = nil // do not pin a large fetch buffer per idle connection
		}
	}
}

// parseRequestHeader decodes the request header (v1: api key, version,
// correlation id, nullable client id; v2 adds tagged fields, for flexible
// versions) and returns the body after it.
func parseRequestHeader(b []byte) (requestHeader, []byte, error) {
	var h requestHeader
	if len(b) < 10 {
		return h, nil, errors.New("short header")
	}
	h.key = int16(binary.BigEndian.Uint16(b[0:]))
	h.version = int16(binary.BigEndian.Uint16(b[2:]))
	h.correlationID = int32(binary.BigEndian.Uint32(b[4:]))
	n := int16(binary.BigEndian.Uint16(b[8:]))
	b = b[10:]
	if n >= 0 {
		if int(n) > len(b) {
			return h, nil, errors.New("client id overruns the request")
		}
		id := string(b[:n])
		h.clientID = &id
		b = b[n:]
	} else if n != -1 {
		return h, nil, errors.New("negative client id length")
	}
	if requestIsFlexible(h.key, h.version) {
		rest, err := skipTags(b)
		if err != nil {
			return h, nil, err
		}
		b = rest
	}
	return h, b, nil
}

// requestIsFlexible reports whether a request uses header v2 (tagged fields).
// For an API kmsg does not know it is false; for an unsupported ApiVersions
// version, Kafka's rule is the flexible header from v3 on.
func requestIsFlexible(key, version int16) bool {
	req := kmsg.RequestForKey(key)
	if req == nil {
		return false
	}
	req.SetVersion(version)
	return req.IsFlexible()
}

// skipTags skips a tagged-field section: uvarint count, then per field a
// uvarint tag, a uvarint size and the bytes.
func skipTags(b []byte) ([]byte, error) {
	num, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, errors.New("bad tagged field count")
	}
	b = b[n:]
	for range num {
		_, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, errors.New("bad tagged field size")
		}
		b = b[n+int(size):]
	}
	return b, nil
}

// appendResponse appends the size-prefixed response frame: the response
// header (correlation id; v1 adds an empty tagged-field section for flexible
// versions, except for ApiVersions, whose response header is always v0) and
// the body encoded at the request's version.
func appendResponse(dst []byte, hdr requestHeader, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(hdr.correlationID))
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
