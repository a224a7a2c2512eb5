package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/partlog/partlog/batch"
)

// testBroker is a broker running in-process on 127.0.0.1:0.
type testBroker struct {
	dir    string
	addr   string
	cancel context.CancelFunc
	done   chan error
	panics *atomic.Int32 // panics the broker recovered from
}

// panicCounter is a slog.Handler that counts the broker's "panic" records.
type panicCounter struct{ n *atomic.Int32 }

func (h panicCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h panicCounter) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "panic") {
		h.n.Add(1)
	}
	return nil
}
func (h panicCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h panicCounter) WithGroup(string) slog.Handler      { return h }

// startBroker runs a broker on dir and stops it at the end of the test
// (unless the test stopped it already).
func startBroker(t *testing.T, dir string, partitions int) *testBroker {
	t.Helper()
	return startBrokerWith(t, dir, partitions, nil)
}

// startBrokerWith is startBroker with a hook to adjust the config.
func startBrokerWith(t *testing.T, dir string, partitions int, adjust func(*config)) *testBroker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	b := &testBroker{dir: dir, cancel: cancel, done: make(chan error, 1), panics: new(atomic.Int32)}
	cfg := config{
		Addr:       "127.0.0.1:0",
		DataDir:    dir,
		Partitions: partitions,
		Logger:     slog.New(panicCounter{b.panics}),
		Ready:      func(a net.Addr) { ready <- a },
	}
	if adjust != nil {
		adjust(&cfg)
	}
	go func() { b.done <- run(ctx, cfg) }()
	select {
	case a := <-ready:
		b.addr = a.String()
	case err := <-b.done:
		cancel()
		require.Failf(t, "broker did not start", "run: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		require.Fail(t, "broker did not start within 10s")
	}
	t.Cleanup(func() { b.stop(t) })
	return b
}

// stop shuts the broker down (SIGINT's path: cancel the context) and checks
// it closed its partitions cleanly. Calling it twice is fine.
func (b *testBroker) stop(t *testing.T) {
	t.Helper()
	if b.done == nil {
		return
	}
	b.cancel()
	n := b.panics.Load()
	assert.LessOrEqual(t, n, int32(0), "the broker recovered from %d panics", n)
	select {
	case err := <-b.done:
		assert.NoError(t, err, "broker shutdown")
	case <-time.After(20 * time.Second):
		assert.Fail(t, "broker did not stop within 20s")
	}
	b.done = nil
}

// newClient returns a kgo client for the broker, closed at the end of the test.
func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.RetryTimeout(10 * time.Second),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// consume polls until n records arrived (or the context ends) and returns
// them in order.
func consume(ctx context.Context, t *testing.T, cl *kgo.Client, n int) []*kgo.Record {
	t.Helper()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "consumed %d of %d records before the deadline", len(out), n)
		fs.EachError(func(topic string, p int32, err error) {
			require.NoError(t, err, "fetch %s[%d]", topic, p)
		})
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

// rawConn speaks the protocol directly, one request at a time, so a test
// controls versions and bytes exactly.
type rawConn struct {
	t    *testing.T
	c    net.Conn
	r    *bufio.Reader
	corr int32
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return &rawConn{t: t, c: c, r: bufio.NewReader(c)}
}

// send writes one request frame at req's version.
func (rc *rawConn) send(req kmsg.Request) int32 {
	rc.t.Helper()
	rc.corr++
	buf := []byte{0, 0, 0, 0}
	buf = binary.BigEndian.AppendUint16(buf, uint16(req.Key()))
	buf = binary.BigEndian.AppendUint16(buf, uint16(req.GetVersion()))
	buf = binary.BigEndian.AppendUint32(buf, uint32(rc.corr))
	buf = binary.BigEndian.AppendUint16(buf, uint16(len("raw-test")))
	buf = append(buf, "raw-test"...)
	if req.IsFlexible() {
		buf = append(buf, 0)
	}
	buf = req.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	rc.write(buf)
	return rc.corr
}

func (rc *rawConn) write(b []byte) {
	rc.t.Helper()
	_ = rc.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := rc.c.Write(b)
	require.NoError(rc.t, err)
}

// readFrame reads one response frame; io.EOF when the broker closed.
func (rc *rawConn) readFrame() ([]byte, error) {
	return rc.readFrameWithin(15 * time.Second)
}

// readFrameWithin is readFrame with a deadline of its own.
func (rc *rawConn) readFrameWithin(d time.Duration) ([]byte, error) {
	_ = rc.c.SetReadDeadline(time.Now().Add(d))
	var sz [4]byte
	if _, err := io.ReadFull(rc.r, sz[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(sz[:])
	if n > 64<<20 {
		return nil, fmt.Errorf("response of %d bytes", n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(rc.r, b)
	return b, err
}

// do sends req and decodes the response at the same version.
func (rc *rawConn) do(req kmsg.Request) kmsg.Response {
	rc.t.Helper()
	corr := rc.send(req)
	b, err := rc.readFrame()
	require.NoError(rc.t, err, "%s v%d", kmsg.NameForKey(req.Key()), req.GetVersion())
	got := int32(binary.BigEndian.Uint32(b))
	require.Equal(rc.t, corr, got, "correlation id %d, want %d", got, corr)
	b = b[4:]
	resp := req.ResponseKind()
	if resp.IsFlexible() && req.Key() != int16(kmsg.ApiVersions) {
		require.NotEmpty(rc.t, b, "bad response header tags: % x", b[:min(len(b), 8)])
		require.Equal(rc.t, byte(0), b[0], "bad response header tags: % x", b[:min(len(b), 8)])
		b = b[1:]
	}
	require.NoError(rc.t, resp.ReadFrom(b), "decode %s v%d response", kmsg.NameForKey(req.Key()), req.GetVersion())
	return resp
}

// buildBatch encodes n records "<prefix>-<i>" with the given codec.
func buildBatch(t *testing.T, prefix string, n int, codec batch.Compression) []byte {
	t.Helper()
	bld := batch.NewBuilder(batch.BuilderOptions{Compression: codec, PartitionLeaderEpoch: -1})
	now := time.Now().UnixMilli()
	for i := range n {
		err := bld.Add(batch.Record{
			Key:       fmt.Appendf(nil, "k%d", i),
			Value:     fmt.Appendf(nil, "%s-%d", prefix, i),
			Timestamp: now + int64(i),
		})
		require.NoError(t, err)
	}
	b, err := bld.Build()
	require.NoError(t, err)
	return b
}

// produceRaw sends one batch to topic/partition with acks=-1 and returns the
// partition's answer.
func produceRaw(t *testing.T, rc *rawConn, version int16, topic string, partition int32, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := rc.do(req).(*kmsg.ProduceResponse)
	require.Len(t, resp.Topics, 1, "produce response shape: %+v", resp)
	require.Len(t, resp.Topics[0].Partitions, 1, "produce response shape: %+v", resp)
	return resp.Topics[0].Partitions[0]
}

// listOffset asks ListOffsets (v7) for one partition.
func listOffset(t *testing.T, rc *rawConn, topic string, partition int32, ts int64) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	return listOffsetVersion(t, rc, 7, topic, partition, ts)
}

// listOffsetVersion asks ListOffsets at a version for one partition.
func listOffsetVersion(t *testing.T, rc *rawConn, version int16, topic string, partition int32, ts int64) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = version
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = partition
	rp.Timestamp = ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := rc.do(req).(*kmsg.ListOffsetsResponse)
	return resp.Topics[0].Partitions[0]
}

// checkNoLeak reports the goroutines of partlog and franz-go that outlive
// the test. It runs as a cleanup registered before the broker's and the
// clients' (leakCheck), so it runs after the events that end them: the
// broker's run returned (testBroker.stop) and every client's Close
// returned. Goroutines of the runtime and the standard library, which end
// on their own time, are not counted. franz-go may have started a
// goroutine that has not run yet when Close returns (CI caught one still
// runnable in its consumer's spawn wrapper); such a goroutine returns as
// soon as it runs, so the check gives them up to leakGrace to be
// scheduled: a leak is a goroutine still there after that.
func checkNoLeak(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(leakGrace)
	for {
		ours := ourGoroutines()
		if len(ours) <= base {
			return
		}
		if time.Now().After(deadline) {
			assert.Failf(t, "goroutines leaked", "%d goroutines of partlog or franz-go, %d at start, %v after the test; now:\n%s", len(ours), base, leakGrace, strings.Join(ours, "\n\n"))
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// leakGrace bounds how long checkNoLeak lets goroutines that were started
// but not yet scheduled run to their end.
const leakGrace = 10 * time.Second

// ourGoroutines returns the stacks of the goroutines, other than the
// caller's, that run partlog's or franz-go's code.
func ourGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	gs := strings.Split(string(buf), "\n\n")
	var ours []string
	for _, g := range gs[1:] { // the first stack is the caller's
		if strings.Contains(g, "partlog") || strings.Contains(g, "franz-go") {
			ours = append(ours, g)
		}
	}
	return ours
}
