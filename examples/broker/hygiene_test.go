package main

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/partlog/partlog/batch"
)

// logRecorder is a slog.Handler that keeps every message (with its
// attributes) and passes records on to next.
type logRecorder struct {
	next slog.Handler
	mu   *sync.Mutex
	msgs *[]string
}

func newLogRecorder(next slog.Handler) logRecorder {
	return logRecorder{next: next, mu: new(sync.Mutex), msgs: new([]string)}
}

func (h logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h logRecorder) Handle(ctx context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	h.mu.Lock()
	*h.msgs = append(*h.msgs, b.String())
	h.mu.Unlock()
	return h.next.Handle(ctx, r)
}
func (h logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h logRecorder) WithGroup(string) slog.Handler      { return h }

// matching returns the recorded lines containing every part.
func (h logRecorder) matching(parts ...string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
next:
	for _, m := range *h.msgs {
		for _, p := range parts {
			if !strings.Contains(m, p) {
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}

// recordLogs makes the broker's logger also record into a logRecorder.
func recordLogs(rec *logRecorder) func(*config) {
	return func(c *config) {
		*rec = newLogRecorder(c.Logger.Handler())
		c.Logger = slog.New(*rec)
	}
}

// both applies several config adjustments.
func both(fs ...func(*config)) func(*config) {
	return func(c *config) {
		for _, f := range fs {
			f(c)
		}
	}
}

// expectClosed reads from c until the broker closes it; the deadline only
// bounds a failing test.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(60*time.Second)))
	_, err := io.Copy(io.Discard, c)
	require.NoError(t, err, "io.Copy returns nil at EOF: the broker closed the connection")
}

// A partition without records gets an empty records field, never a null
// one, whatever the reason: caught up, unknown partition, unknown topic,
// offset out of range. librdkafka refuses a null one ("invalid
// MessageSetSize -1") and kcat -e never exits.
func TestFetchEmptyRecordsAreNotNull(t *testing.T) {
	t.Parallel()
	b := startBroker(t, t.TempDir(), 1)
	rc := dialRaw(t, b.addr)
	require.EqualValues(t, 0, produceRaw(t, rc, 9, "t", 0, buildBatch(t, "r", 3, batch.CompressionNone)).ErrorCode)

	for v := supported[kmsg.Fetch].min; v <= supported[kmsg.Fetch].max; v++ {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxBytes, req.MaxWaitMillis = v, -1, 1<<20, 0
		add := func(topic string, partition int32, offset int64) {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		add("t", 0, 3)    // caught up
		add("t", 7, 0)    // unknown partition
		add("nope", 0, 0) // unknown topic
		add("t", 0, 100)  // out of range
		add("t", 0, 0)    // data
		resp := rc.do(req).(*kmsg.FetchResponse)
		require.Len(t, resp.Topics, 5)
		wantErr := []int16{0, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Code, kerr.OffsetOutOfRange.Code}
		for i, code := range wantErr {
			p := resp.Topics[i].Partitions[0]
			assert.Equal(t, code, p.ErrorCode, "v%d partition %d", v, i)
			assert.NotNil(t, p.RecordBatches, "v%d partition %d: records must be empty, not null", v, i)
			assert.Empty(t, p.RecordBatches, "v%d partition %d", v, i)
		}
		assert.NotEmpty(t, resp.Topics[4].Partitions[0].RecordBatches, "v%d", v)
	}
}

// ApiVersions advertises Produce from version 0, as Kafka 3.9 does (and
// Kafka 4, KAFKA-18659), so that librdkafka compresses; a Produce v0-2
// request is answered at its version (oldversions.go converts its records).
func TestApiVersionsProduceFromZero(t *testing.T) {
	t.Parallel()
	b := startBroker(t, t.TempDir(), 1)
	rc := dialRaw(t, b.addr)
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "test", "1"
	resp := rc.do(av).(*kmsg.ApiVersionsResponse)
	var produce *kmsg.ApiVersionsResponseApiKey
	for i := range resp.ApiKeys {
		if resp.ApiKeys[i].ApiKey == int16(kmsg.Produce) {
			produce = &resp.ApiKeys[i]
		}
	}
	require.NotNil(t, produce)
	assert.EqualValues(t, 0, produce.MinVersion)
	assert.EqualValues(t, 9, produce.MaxVersion)

	for v := int16(0); v <= 3; v++ {
		p := produceRaw(t, rc, v, "t", 0, buildBatch(t, "r", 1, batch.CompressionNone))
		assert.EqualValues(t, 0, p.ErrorCode, "produce v%d", v)
		assert.EqualValues(t, v, p.BaseOffset, "produce v%d", v)
	}
}

// A connection on which nothing arrives for connections.max.idle.ms is
// closed, with a log line: one that sent nothing, one that sent half a size
// prefix, one that sent half a request.
func TestIdleConnectionsAreClosed(t *testing.T) {
	t.Parallel()
	var rec logRecorder
	b := startBrokerWith(t, t.TempDir(), 1, both(recordLogs(&rec), func(c *config) { c.IdleTimeout = 50 * time.Millisecond }))
	for _, tc := range []struct {
		name string
		send []byte
		log  string
	}{
		{"nothing", nil, "closing idle connection"},
		{"half a size prefix", []byte{0, 0}, "closing idle connection"},
		{"half a request", append(binary.BigEndian.AppendUint32(nil, 1000), make([]byte, 100)...), "in the middle of a request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", b.addr)
			require.NoError(t, err)
			defer c.Close()
			if tc.send != nil {
				_, err = c.Write(tc.send)
				require.NoError(t, err)
			}
			expectClosed(t, c)
		})
	}
	// Each close was logged once the connection goroutines finished.
	b.stop(t)
	assert.Len(t, rec.matching("closing idle connection (connections.max.idle.ms)"), 2)
	assert.Len(t, rec.matching("in the middle of a request", "request_size=1000", "received=100"), 1)
}

// A size prefix above socket.request.max.bytes closes the connection before
// anything is buffered, with a log line.
func TestRequestSizeLimit(t *testing.T) {
	t.Parallel()
	var rec logRecorder
	b := startBrokerWith(t, t.TempDir(), 1, both(recordLogs(&rec), func(c *config) { c.MaxRequestBytes = 4096 }))
	c, err := net.Dial("tcp", b.addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write(binary.BigEndian.AppendUint32(nil, 4097))
	require.NoError(t, err)
	expectClosed(t, c)
	b.stop(t)
	assert.Len(t, rec.matching("bad request size", "size=4097", "socket_request_max_bytes=4096"), 1)
}

// 50 connections that each announce a 100 MiB request and send 1 MiB of it
// hold no more than queued.max.request.bytes plus a small allowance per
// connection, and the broker keeps serving other clients meanwhile. Before,
// each connection allocated its announced 100 MiB at once.
func TestHalfSentRequestFloodKeepsMemoryBounded(t *testing.T) {
	const (
		conns  = 50
		queued = 8 << 20
		sent   = 1 << 20
	)
	var srv *server
	waited := make(chan struct{}, 1)
	b := startBrokerWith(t, t.TempDir(), 1, func(c *config) {
		c.QueuedMaxRequestBytes = queued
		c.onServer = func(s *server) {
			srv = s
			s.pool.onWait = func() {
				select {
				case waited <- struct{}{}:
				default:
				}
			}
		}
	})
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	var flood []net.Conn
	var writers sync.WaitGroup
	for range conns {
		c, err := net.Dial("tcp", b.addr)
		require.NoError(t, err)
		flood = append(flood, c)
		msg := binary.BigEndian.AppendUint32(nil, defaultMaxRequestBytes)
		msg = append(msg, 0, 0, 0, 12, 0, 0, 0, 1, 0, 0) // ApiVersions v12 header, never finished
		msg = append(msg, make([]byte, sent)...)
		writers.Add(1)
		go func() {
			defer writers.Done()
			_, _ = c.Write(msg) // blocks once the broker stops reading; ends when closed
		}()
	}
	t.Cleanup(func() {
		for _, c := range flood {
			_ = c.Close()
		}
		writers.Wait()
	})
	// The shared budget ran out: some connections wait for memory.
	select {
	case <-waited:
	case <-time.After(60 * time.Second):
		require.Fail(t, "no connection ever waited for request memory")
	}

	// Other clients are served meanwhile (their requests fit the
	// per-connection allowance).
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := newClient(t, b.addr, kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics("served"))
	for i := range 10 {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "served", Value: []byte{byte(i)}}).FirstErr())
	}
	require.Len(t, consume(ctx, t, cl, 10), 10)

	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	bound := int64(queued + (conns+10)*requestAllowance)
	assert.LessOrEqual(t, srv.peakBuffered.Load(), bound, "request bytes buffered at the peak")
	assert.Less(t, int64(after.HeapInuse)-int64(before.HeapInuse), int64(64<<20), "heap growth during the flood")
	t.Logf("peak buffered %d bytes (bound %d), heap in use %d -> %d bytes", srv.peakBuffered.Load(), bound, before.HeapInuse, after.HeapInuse)

	// Everything is given back once the connections are gone.
	cl.Close()
	for _, c := range flood {
		_ = c.Close()
	}
	b.stop(t)
	assert.Zero(t, srv.buffered.Load())
	assert.Zero(t, srv.pool.used)
}

// A connection beyond max.connections is closed at once, with a log line;
// the others keep working.
func TestMaxConnections(t *testing.T) {
	t.Parallel()
	var rec logRecorder
	b := startBrokerWith(t, t.TempDir(), 1, both(recordLogs(&rec), func(c *config) { c.MaxConnections = 2 }))
	av := func() kmsg.Request {
		r := kmsg.NewPtrApiVersionsRequest()
		r.Version = 0
		return r
	}
	a, c2 := dialRaw(t, b.addr), dialRaw(t, b.addr)
	a.do(av()) // both are registered once they were answered
	c2.do(av())
	third, err := net.Dial("tcp", b.addr)
	require.NoError(t, err)
	defer third.Close()
	expectClosed(t, third)
	a.do(av())
	b.stop(t)
	assert.Len(t, rec.matching("max.connections reached", "max_connections=2"), 1)
}

// flakyListener fails its first Accept calls with errs.
type flakyListener struct {
	net.Listener
	mu   sync.Mutex
	errs []error
}

func (l *flakyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		l.mu.Unlock()
		return nil, err
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

// EMFILE and other accept errors are logged and retried with a doubling
// backoff; the accept loop never ends because of them.
func TestAcceptSurvivesErrors(t *testing.T) {
	t.Parallel()
	var rec logRecorder
	var mu sync.Mutex
	var backoffs []time.Duration
	emfile := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	aborted := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.ECONNABORTED)}
	b := startBrokerWith(t, t.TempDir(), 1, both(recordLogs(&rec), func(c *config) {
		c.wrapListener = func(ln net.Listener) net.Listener {
			return &flakyListener{Listener: ln, errs: []error{emfile, emfile, emfile, aborted}}
		}
		c.onServer = func(s *server) {
			s.acceptBackoff = func(_ context.Context, d time.Duration) {
				mu.Lock()
				backoffs = append(backoffs, d)
				mu.Unlock()
			}
		}
	}))
	rc := dialRaw(t, b.addr)
	r := kmsg.NewPtrApiVersionsRequest()
	r.Version = 0
	rc.do(r)
	b.stop(t)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}, backoffs)
	assert.Len(t, rec.matching("accept failed, retrying", "too many open files", "too_many_open_files=true"), 3)
	assert.Len(t, rec.matching("accept failed, retrying", "too_many_open_files=false"), 1)
}

// dirUsage returns the disk blocks (in bytes) the files under dir take.
func dirUsage(t *testing.T, dir string) int64 {
	t.Helper()
	var total int64
	require.NoError(t, filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && !fi.IsDir() {
			total += st.Blocks * 512
		}
		return nil
	}))
	return total
}

// One Metadata request creates at most MaxAutoCreatePerRequest topics (the
// others get UNKNOWN_TOPIC_OR_PARTITION and are created when the client asks
// again), a created partition costs about 2 MiB of disk (two 1 MiB indexes)
// instead of 20 MiB, and with auto-creation off nothing is created, by
// Metadata or Produce.
func TestAutoCreateIsBounded(t *testing.T) {
	t.Parallel()
	metadata := func(n int) *kmsg.MetadataRequest {
		req := kmsg.NewPtrMetadataRequest()
		req.Version, req.AllowAutoTopicCreation = 12, true
		for i := range n {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr("topic-" + string(rune('A'+i%26)) + string(rune('a'+i/26)))
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	t.Run("limit per request", func(t *testing.T) {
		dir := t.TempDir()
		b := startBroker(t, dir, 1)
		rc := dialRaw(t, b.addr)
		before := dirUsage(t, dir) // __consumer_offsets-0
		resp := rc.do(metadata(40)).(*kmsg.MetadataResponse)
		created := 0
		for _, tp := range resp.Topics {
			switch tp.ErrorCode {
			case 0:
				created++
			default:
				assert.Equal(t, kerr.UnknownTopicOrPartition.Code, tp.ErrorCode)
			}
		}
		assert.Equal(t, defaultMaxAutoCreatePerRequest, created)
		perPartition := (dirUsage(t, dir) - before) / int64(created)
		assert.LessOrEqual(t, perPartition, int64(2*defaultSegmentIndexBytes+64<<10), "disk per created partition")
		t.Logf("disk per auto-created partition: %d bytes", perPartition)
		// Asking again creates the next ones.
		resp = rc.do(metadata(40)).(*kmsg.MetadataResponse)
		created = 0
		for _, tp := range resp.Topics {
			if tp.ErrorCode == 0 {
				created++
			}
		}
		assert.Equal(t, 2*defaultMaxAutoCreatePerRequest, created)
	})
	t.Run("off", func(t *testing.T) {
		dir := t.TempDir()
		b := startBrokerWith(t, dir, 1, func(c *config) { c.DisableAutoCreate = true })
		rc := dialRaw(t, b.addr)
		resp := rc.do(metadata(3)).(*kmsg.MetadataResponse)
		for _, tp := range resp.Topics {
			assert.Equal(t, kerr.UnknownTopicOrPartition.Code, tp.ErrorCode)
		}
		p := produceRaw(t, rc, 9, "fresh", 0, buildBatch(t, "r", 1, batch.CompressionNone))
		assert.Equal(t, kerr.UnknownTopicOrPartition.Code, p.ErrorCode)
		ents, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range ents {
			// Only the internal topics, which the broker creates on start.
			internal := strings.HasPrefix(e.Name(), offsetsTopic) || strings.HasPrefix(e.Name(), txnStateTopic)
			assert.True(t, internal || !e.IsDir(), "created %s", e.Name())
		}
	})
}

// connDefaults refuses limits that make no sense.
func TestConnConfigErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []config{
		{MaxRequestBytes: 7},
		{QueuedMaxRequestBytes: -1},
		{MaxConnections: -1},
		{MaxAutoCreatePerRequest: -1},
	} {
		require.Error(t, c.connDefaults(), "%+v", c)
	}
	var c config
	require.NoError(t, c.connDefaults())
	assert.Equal(t, defaultIdleTimeout, c.IdleTimeout)
	assert.EqualValues(t, 104857600, c.MaxRequestBytes)
	assert.Equal(t, math32Max, c.MaxConnections)
}

const math32Max = 2147483647
