package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

// dupCounter is a slog.Handler that counts the broker's "produce retry"
// records (duplicates answered with the original offset) and passes every
// record on.
type dupCounter struct {
	inner slog.Handler
	n     *atomic.Int32
}

func (h dupCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h dupCounter) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "produce retry") {
		h.n.Add(1)
	}
	return h.inner.Handle(ctx, r)
}
func (h dupCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h dupCounter) WithGroup(string) slog.Handler      { return h }

// dropProxy forwards Kafka connections from a loopback listener to the
// broker and closes the connection, instead of forwarding, every dropEvery-th
// produce response: the broker wrote the records and its answer, the client
// never sees it and retries.
type dropProxy struct {
	ln        net.Listener
	target    string
	dropEvery int64
	produces  atomic.Int64 // produce responses the broker wrote
	drops     atomic.Int64
	wg        sync.WaitGroup

	// armed makes the next produce response be held back: held is closed
	// and the connection stays silent until release is closed, then it is
	// dropped.
	armed   atomic.Bool
	held    chan struct{}
	release chan struct{}

	mu    sync.Mutex
	conns []net.Conn
}

// newDropProxy listens on 127.0.0.1:0; serve starts forwarding. dropEvery 0
// drops nothing.
func newDropProxy(t *testing.T, dropEvery int64) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return &dropProxy{ln: ln, dropEvery: dropEvery, held: make(chan struct{}), release: make(chan struct{})}
}

// serve forwards to target until close.
func (p *dropProxy) serve(target string) {
	p.target = target
	p.wg.Go(func() {
		for {
			c, err := p.ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.forward(c) })
		}
	})
}

// close stops the proxy and every connection it holds, and waits for its
// goroutines.
func (p *dropProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// track remembers c for close.
func (p *dropProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

// readFrame reads one size-prefixed Kafka frame.
func readKafkaFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 64<<20 {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	b := make([]byte, 4+n)
	copy(b, size[:])
	_, err := io.ReadFull(r, b[4:])
	return b, err
}

// forward relays one client connection. Requests are parsed for their API
// key and correlation id so that responses can be recognised.
func (p *dropProxy) forward(client net.Conn) {
	p.track(client)
	defer client.Close()
	broker, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.track(broker)
	defer broker.Close()
	var mu sync.Mutex
	apiKeys := make(map[int32]int16) // correlation id -> API key
	p.wg.Go(func() {
		defer broker.Close()
		defer client.Close()
		for {
			f, err := readKafkaFrame(client)
			if err != nil || len(f) < 12 {
				return
			}
			mu.Lock()
			apiKeys[int32(binary.BigEndian.Uint32(f[8:]))] = int16(binary.BigEndian.Uint16(f[4:]))
			mu.Unlock()
			if _, err := broker.Write(f); err != nil {
				return
			}
		}
	})
	for {
		f, err := readKafkaFrame(broker)
		if err != nil || len(f) < 8 {
			return
		}
		mu.Lock()
		key, ok := apiKeys[int32(binary.BigEndian.Uint32(f[4:]))]
		mu.Unlock()
		if ok && key == int16(kmsg.Produce) {
			n := p.produces.Add(1)
			if p.armed.CompareAndSwap(true, false) {
				p.drops.Add(1)
				close(p.held)
				<-p.release
				return
			}
			if p.dropEvery > 0 && n%p.dropEvery == 0 {
				p.drops.Add(1)
				return // closes both sides: the answer is lost
			}
		}
		if _, err := client.Write(f); err != nil {
			return
		}
	}
}

// storedRecord is one record read back from a partition directory.
type storedRecord struct {
	Offset     int64
	Key, Value string
	ProducerID int64
	Epoch      int16
	Sequence   int32
}

// storedRecords returns every record of the partition directory (the broker
// must be stopped) with its batch's producer id, epoch and the record's
// sequence.
func storedRecords(t *testing.T, dir string) []storedRecord {
	t.Helper()
	p, err := plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	var out []storedRecord
	for off := p.LogStartOffset(); off < p.LogEndOffset(); {
		recs, err := p.ReadFrom(off, 1<<20)
		require.NoError(t, err)
		rest := recs.Bytes()
		for len(rest) > 0 {
			var bt batch.Batch
			bt, rest, err = batch.Parse(rest)
			require.NoError(t, err)
			require.NoError(t, bt.Validate())
			var dec batch.Decoder
			for r, err := range bt.All(&dec) {
				require.NoError(t, err)
				out = append(out, storedRecord{
					Offset: r.Offset, Key: string(r.Key), Value: string(r.Value),
					ProducerID: bt.ProducerID(), Epoch: bt.ProducerEpoch(),
					Sequence: bt.BaseSequence() + int32(r.Offset-bt.BaseOffset()),
				})
			}
		}
		off = recs.NextOffset()
		require.NoError(t, recs.Close())
	}
	return out
}

// A franz-go idempotent producer whose every third produce response is lost
// (the proxy drops the connection after the broker wrote it) retries those
// batches; the broker recognises the retries and answers them with the
// original offsets. 300 records are stored exactly once, in order, and
// every record's acknowledged offset is where it is stored.
func TestIdempotentRetriesThroughDroppingProxy(t *testing.T) {
	t.Parallel()
	const rounds, perRound = 30, 10
	dir := t.TempDir()
	proxy := newDropProxy(t, 3)
	dups := new(atomic.Int32)
	b := startBrokerWith(t, dir, 1, func(c *config) {
		c.Advertise = proxy.ln.Addr().String() // clients reach the broker only through the proxy
		c.Logger = slog.New(dupCounter{inner: c.Logger.Handler(), n: dups})
	})
	proxy.serve(b.addr)
	t.Cleanup(proxy.close)

	cl := newClient(t, proxy.ln.Addr().String(),
		kgo.DefaultProduceTopic("idem"), kgo.AllowAutoTopicCreation(),
		kgo.ProducerLinger(time.Millisecond),
		kgo.RecordRetries(100),
		kgo.RequestRetries(100),
		kgo.RecordDeliveryTimeout(60*time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 5 * time.Millisecond }),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	acked := make([]int64, rounds*perRound)
	var mu sync.Mutex
	var errs []error
	for r := range rounds {
		for i := r * perRound; i < (r+1)*perRound; i++ {
			rec := &kgo.Record{Key: fmt.Appendf(nil, "k-%d", i), Value: fmt.Appendf(nil, "v-%d", i)}
			cl.Produce(ctx, rec, func(rec *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, fmt.Errorf("record %s: %w", rec.Key, err))
					return
				}
				acked[i] = rec.Offset
			})
		}
		require.NoError(t, cl.Flush(ctx))
	}
	mu.Lock()
	require.Empty(t, errs)
	for i, off := range acked {
		require.EqualValues(t, i, off, "record %d was acknowledged at offset %d", i, off)
	}
	mu.Unlock()
	cl.Close()
	proxy.close()
	b.stop(t)

	assert.GreaterOrEqual(t, proxy.drops.Load(), int64(rounds/3), "the proxy dropped too few answers to exercise retries")
	assert.Positive(t, dups.Load(), "no retry reached the broker as a duplicate")
	got := storedRecords(t, filepath.Join(dir, "idem-0"))
	require.Len(t, got, rounds*perRound)
	for i, r := range got {
		require.Equal(t, storedRecord{Offset: int64(i), Key: fmt.Sprintf("k-%d", i), Value: fmt.Sprintf("v-%d", i),
			ProducerID: got[0].ProducerID, Epoch: 0, Sequence: int32(i)}, r)
	}
}

// idemBatch encodes n records for producer pid at epoch, first sequence
// seq.
func idemBatch(t *testing.T, pid int64, epoch int16, seq int32, n int, transactional bool) []byte {
	t.Helper()
	bld := batch.NewBuilder(batch.BuilderOptions{
		PartitionLeaderEpoch: -1,
		Producer:             &batch.Producer{ID: pid, Epoch: epoch, BaseSequence: seq},
		Transactional:        transactional,
	})
	now := time.Now().UnixMilli()
	for i := range n {
		require.NoError(t, bld.Add(batch.Record{Value: fmt.Appendf(nil, "p%d-e%d-s%d", pid, epoch, int(seq)+i), Timestamp: now}))
	}
	b, err := bld.Build()
	require.NoError(t, err)
	return b
}

// The produce path answers each producer-state outcome with Kafka 3.x/4.x's
// code, per partition: a retry of one of the last five batches is NONE with
// the original base offset (nothing written), a gap or a stale sequence and
// a new epoch not starting at 0 are OUT_OF_ORDER_SEQUENCE_NUMBER, an older
// epoch is INVALID_PRODUCER_EPOCH, a non-transactional batch inside an open
// transaction is INVALID_TXN_STATE, and an unknown producer is accepted at
// any sequence (no UNKNOWN_PRODUCER_ID since KIP-360).
func TestProduceIdempotenceErrorCodes(t *testing.T) {
	t.Parallel()
	type step struct {
		pid   int64
		epoch int16
		seq   int32
		n     int
		txn   bool
		code  int16 // expected error code
		base  int64 // expected base offset (-1 with an error)
	}
	const pid = 7
	tests := []struct {
		name  string
		steps []step
		end   int64 // log end offset afterwards
	}{
		{"retry of the last batch", []step{
			{pid, 0, 0, 3, false, 0, 0},
			{pid, 0, 0, 3, false, 0, 0},
			{pid, 0, 3, 1, false, 0, 3},
		}, 4},
		{"retry of an older batch of the last five", []step{
			{pid, 0, 0, 3, false, 0, 0},
			{pid, 0, 3, 2, false, 0, 3},
			{pid, 0, 5, 1, false, 0, 5},
			{pid, 0, 3, 2, false, 0, 3},
			{pid, 0, 0, 3, false, 0, 0},
		}, 6},
		{"sequence gap", []step{
			{pid, 0, 0, 3, false, 0, 0},
			{pid, 0, 5, 1, false, kerr.OutOfOrderSequenceNumber.Code, -1},
		}, 3},
		{"stale sequence that is no retry", []step{
			{pid, 0, 0, 3, false, 0, 0},
			{pid, 0, 3, 3, false, 0, 3},
			{pid, 0, 1, 2, false, kerr.OutOfOrderSequenceNumber.Code, -1},
		}, 6},
		{"new epoch not at sequence 0", []step{
			{pid, 0, 0, 1, false, 0, 0},
			{pid, 1, 5, 1, false, kerr.OutOfOrderSequenceNumber.Code, -1},
			{pid, 1, 0, 1, false, 0, 1},
		}, 2},
		{"older epoch", []step{
			{pid, 1, 0, 1, false, 0, 0},
			{pid, 0, 1, 1, false, kerr.InvalidProducerEpoch.Code, -1},
			{pid, 0, 0, 1, false, kerr.InvalidProducerEpoch.Code, -1},
		}, 1},
		{"non-transactional batch in an open transaction", []step{
			{pid, 0, 0, 1, true, 0, 0},
			{pid, 0, 1, 1, false, kerr.InvalidTxnState.Code, -1},
		}, 1},
		{"unknown producer at any sequence", []step{
			{pid, 0, 42, 2, false, 0, 0},
			{pid, 0, 44, 1, false, 0, 2},
			{pid + 1, 3, 1000, 1, false, 0, 3},
		}, 4},
		{"negative base sequence", []step{
			{pid, 0, -1, 1, false, kerr.InvalidRecord.Code, -1},
		}, 0},
	}
	b := startBroker(t, t.TempDir(), 1)
	rc := dialRaw(t, b.addr)
	for i, tc := range tests {
		topic := fmt.Sprintf("codes-%d", i)
		for j, s := range tc.steps {
			got := produceRaw(t, rc, 9, topic, 0, idemBatch(t, s.pid, s.epoch, s.seq, s.n, s.txn))
			assert.Equal(t, s.code, got.ErrorCode, "%s: step %d: %v", tc.name, j, kerr.ErrorForCode(got.ErrorCode))
			assert.Equal(t, s.base, got.BaseOffset, "%s: step %d", tc.name, j)
		}
		assert.Equal(t, tc.end, listOffset(t, rc, topic, 0, -1).Offset, "%s: log end offset", tc.name)
	}
}

// appendErrorCode maps each producer-state sentinel, however it is
// wrapped, to Kafka's code.
func TestAppendErrorCodeProducerSentinels(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		code int16
	}{
		{plog.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber.Code},
		{plog.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch.Code},
		{plog.ErrInvalidTxnState, kerr.InvalidTxnState.Code},
	}
	for _, tc := range tests {
		for _, err := range []error{tc.err, fmt.Errorf("partition orders-0: %w", tc.err)} {
			assert.Equal(t, tc.code, appendErrorCode(err, nil), "%v", err)
		}
	}
}

// One librdkafka idempotent producer (confluent_kafka, enable.idempotence)
// keeps producing across a broker restart on the same data directory and
// port. The answer to the first batch after the pause is lost: the broker
// wrote it, then restarts; the producer retries it to the restarted broker,
// which knows the producer from its snapshot and answers the retry with the
// original offset instead of storing it again. Every record is stored
// once, in order, from one producer id and epoch with consecutive
// sequences.
func TestConfluentIdempotentAcrossRestart(t *testing.T) {
	needConfluent(t)
	t.Parallel()
	const n1, n2 = 40, 35
	dir := t.TempDir()
	proxy := newDropProxy(t, 0)
	advertise := func(c *config) { c.Advertise = proxy.ln.Addr().String() }
	b := startBrokerWith(t, dir, 1, advertise)
	addr := b.addr
	proxy.serve(addr)
	t.Cleanup(proxy.close)
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(proxy.release) }) }
	t.Cleanup(release)

	ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, systemPython, "testdata/ck_client.py", "produce-idem", proxy.ln.Addr().String(), "idem", fmt.Sprint(n1), fmt.Sprint(n2))
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	lines := bufio.NewScanner(stdout)
	phase := func(want int) {
		t.Helper()
		if !lines.Scan() {
			require.NoError(t, cmd.Wait())
			require.Failf(t, "client ended early", "ck_client.py ended before it produced %d records: %v\nstderr: %s", want, lines.Err(), stderr.String())
		}
		var got struct{ Produced int }
		require.NoError(t, json.Unmarshal(lines.Bytes(), &got), "%q", lines.Text())
		require.Equal(t, want, got.Produced)
	}
	phase(n1)

	proxy.armed.Store(true)
	_, err = io.WriteString(stdin, "go on\n")
	require.NoError(t, err)
	select {
	case <-proxy.held:
	case <-ctx.Done():
		require.Failf(t, "nothing held back", "no produce answer to hold back: %v\nstderr: %s", ctx.Err(), stderr.String())
	}
	b.stop(t)
	dups := new(atomic.Int32)
	b = startBrokerWith(t, dir, 1, func(c *config) {
		advertise(c)
		c.Addr = addr
		c.Logger = slog.New(dupCounter{inner: c.Logger.Handler(), n: dups})
	})
	release()
	phase(n1 + n2)
	require.NoError(t, cmd.Wait(), "stderr: %s", stderr.String())
	b.stop(t)
	assert.Positive(t, dups.Load(), "the restarted broker saw no retry")

	got := storedRecords(t, filepath.Join(dir, "idem-0"))
	require.Len(t, got, n1+n2)
	require.GreaterOrEqual(t, got[0].ProducerID, int64(0))
	for i, r := range got {
		require.Equal(t, storedRecord{Offset: int64(i), Key: fmt.Sprintf("k%d", i), Value: fmt.Sprintf("m-%d", i),
			ProducerID: got[0].ProducerID, Epoch: got[0].Epoch, Sequence: int32(i)}, r)
	}
}
