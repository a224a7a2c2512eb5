package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/raftlog"
)

// brokerChildEnv makes the test binary run the broker's main instead of
// the tests: the cluster tests start nodes as child processes of the test
// binary, so that they can be killed with SIGKILL.
const brokerChildEnv = "PARTLOG_BROKER_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(brokerChildEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// clusterTimeout bounds each wait of the cluster tests for something the
// cluster must do (an election, a catch-up); it is far above what they
// take on a loaded machine.
const clusterTimeout = 15 * time.Second

// nodeProc is one broker process of a test cluster.
type nodeProc struct {
	id          int
	dir         string
	kafka, raft string
	spec        string   // -cluster for this node ("": the cluster's)
	args        []string // extra flags of this node
	cmd         *exec.Cmd
	exited      chan struct{}

	mu      sync.Mutex
	logs    bytes.Buffer
	changed chan struct{} // closed and replaced on every log line
}

// testCluster runs brokers in cluster mode on loopback, each its own
// process with its own data directory.
type testCluster struct {
	t     testing.TB
	spec  string
	args  []string
	nodes []*nodeProc
	plain bool // single-node mode: no -node and -cluster
}

// handedOut holds every port freeAddr returned in this test process: a
// killed node's port is free until the node restarts, and a parallel
// test must not take it meanwhile.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// freeAddr returns a loopback address with a port that was free and that
// no earlier call of this process returned, drawn below Linux's ephemeral
// range (32768-60999): the nodes' outgoing connections take their local
// ports from that range, and one of them could otherwise hold a killed
// node's port when it restarts.
func freeAddr(t testing.TB) string {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	for range 100 {
		port := 20000 + rand.IntN(12000)
		if handedOut.ports[port] {
			continue
		}
		a := fmt.Sprintf("127.0.0.1:%d", port)
		l, err := net.Listen("tcp", a)
		if err != nil {
			continue
		}
		require.NoError(t, l.Close())
		handedOut.ports[port] = true
		return a
	}
	require.Fail(t, "no free port in 20000-31999")
	return ""
}

// newTestCluster prepares n nodes (not started) with extra broker flags.
func newTestCluster(t testing.TB, n int, args ...string) *testCluster {
	c := &testCluster{t: t, args: args}
	root := t.TempDir()
	var spec []string
	for i := 1; i <= n; i++ {
		np := &nodeProc{id: i, dir: filepath.Join(root, fmt.Sprintf("node%d", i)), kafka: freeAddr(t), raft: freeAddr(t)}
		c.nodes = append(c.nodes, np)
		spec = append(spec, fmt.Sprintf("%d=%s/%s", i, np.kafka, np.raft))
	}
	c.spec = strings.Join(spec, ",")
	t.Cleanup(func() {
		c.stopAll()
		for _, np := range c.nodes {
			// A node built with -race reports races on its stderr.
			assert.NotContains(t, np.logText(), "WARNING: DATA RACE", "node %d", np.id)
		}
		if t.Failed() {
			for _, np := range c.nodes {
				t.Logf("node %d log:\n%s", np.id, np.logText())
			}
		}
	})
	return c
}

// node returns node id (1-based).
func (c *testCluster) node(id int) *nodeProc { return c.nodes[id-1] }

// start starts node id and waits until it accepts Kafka connections.
func (c *testCluster) start(id int) {
	t := c.t
	t.Helper()
	np := c.node(id)
	args := append([]string{"-data", np.dir, "-addr", np.kafka}, c.args...)
	if !c.plain {
		spec := c.spec
		if np.spec != "" {
			spec = np.spec
		}
		args = append(args, "-node", strconv.Itoa(id), "-cluster", spec)
	}
	args = append(args, np.args...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), brokerChildEnv+"=1")
	dieWithParent(cmd)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	np.mu.Lock()
	np.cmd, np.exited = cmd, make(chan struct{})
	np.changed = make(chan struct{})
	np.mu.Unlock()
	exited := np.exited
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			np.mu.Lock()
			np.logs.WriteString(sc.Text() + "\n")
			close(np.changed)
			np.changed = make(chan struct{})
			np.mu.Unlock()
		}
		_ = cmd.Wait()
		close(exited)
	}()
	np.waitLog(t, `msg="broker listening"`, 1)
}

// waitLog waits until the node's log holds substr n times in all (a
// process restart keeps the earlier lines).
func (np *nodeProc) waitLog(t testing.TB, substr string, n int) {
	t.Helper()
	timer := time.NewTimer(clusterTimeout)
	defer timer.Stop()
	for {
		np.mu.Lock()
		got := strings.Count(np.logs.String(), substr)
		ch, exited := np.changed, np.exited
		np.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-exited:
			require.Failf(t, "node exited", "node %d exited waiting for %q:\n%s", np.id, substr, np.logText())
		case <-timer.C:
			require.Failf(t, "timeout", "node %d: no %q within %v:\n%s", np.id, substr, clusterTimeout, np.logText())
		}
	}
}

// logText returns the node's log so far.
func (np *nodeProc) logText() string {
	np.mu.Lock()
	defer np.mu.Unlock()
	return np.logs.String()
}

// running reports whether the node's process runs.
func (np *nodeProc) running() bool {
	np.mu.Lock()
	defer np.mu.Unlock()
	if np.cmd == nil {
		return false
	}
	select {
	case <-np.exited:
		return false
	default:
		return true
	}
}

// kill ends node id with SIGKILL and waits for it.
func (c *testCluster) kill(id int) { c.signal(id, syscall.SIGKILL) }

// signal sends sig to node id and waits until it exited.
func (c *testCluster) signal(id int, sig syscall.Signal) {
	np := c.node(id)
	if !np.running() {
		return
	}
	_ = np.cmd.Process.Signal(sig)
	select {
	case <-np.exited:
	case <-time.After(clusterTimeout):
		_ = np.cmd.Process.Kill()
		<-np.exited
		assert.Failf(c.t, "node did not stop", "node %d did not stop after %v", id, sig)
	}
}

// stopAll stops every running node with SIGINT (a clean shutdown).
func (c *testCluster) stopAll() {
	for _, np := range c.nodes {
		c.signal(np.id, syscall.SIGINT)
	}
}

// request sends req to node id alone.
func (c *testCluster) request(ctx context.Context, id int, req kmsg.Request) (kmsg.Response, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.node(id).kafka), kgo.RequestRetries(0))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return cl.SeedBrokers()[0].Request(ctx, req)
}

// leader returns the leader of topic's partition 0 that node id names (0:
// none or unreachable).
func (c *testCluster) leader(id int, topic string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := c.request(ctx, id, req)
	if err != nil {
		return 0
	}
	mr := resp.(*kmsg.MetadataResponse)
	if len(mr.Topics) != 1 || len(mr.Topics[0].Partitions) == 0 || mr.Topics[0].Partitions[0].Leader <= 0 {
		return 0
	}
	return int(mr.Topics[0].Partitions[0].Leader)
}

// waitLeader waits until a running node other than not names a leader
// that runs and is not not, and returns it.
func (c *testCluster) waitLeader(topic string, not int) int {
	c.t.Helper()
	deadline := time.Now().Add(clusterTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		for _, np := range c.nodes {
			if np.id == not || !np.running() {
				continue
			}
			if l := c.leader(np.id, topic); l != 0 && l != not && c.node(l).running() && c.leader(l, topic) == l {
				return l
			}
		}
		<-tick.C
	}
	require.Failf(c.t, "no leader", "no node leads %s within %v", topic, clusterTimeout)
	return 0
}

// offsets returns node id's answer to ListOffsets for topic's partition 0
// at ts (-1 latest = its high watermark, -2 earliest = its log start), as
// the debugging replica (a follower answers too).
func (c *testCluster) offsets(id int, topic string, ts int64) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = debugReplicaID
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := c.request(ctx, id, req)
	if err != nil {
		return 0, err
	}
	p := resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return 0, fmt.Errorf("error code %d", p.ErrorCode)
	}
	return p.Offset, nil
}

// waitCaughtUp waits until every running node's high watermark equals the
// leader's (and stays put: nothing is being produced), and returns it.
func (c *testCluster) waitCaughtUp(topic string, leader int) int64 {
	c.t.Helper()
	deadline := time.Now().Add(clusterTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last []int64
	for time.Now().Before(deadline) {
		hw, err := c.offsets(leader, topic, -1)
		same := err == nil
		last = last[:0]
		for _, np := range c.nodes {
			if !np.running() {
				continue
			}
			o, err := c.offsets(np.id, topic, -1)
			last = append(last, o)
			same = same && err == nil && o == hw
		}
		if same {
			return hw
		}
		<-tick.C
	}
	require.Failf(c.t, "not caught up", "high watermarks %v never agreed within %v", last, clusterTimeout)
	return 0
}

// committedLog opens a stopped node's partition and returns the bytes of
// its committed entries from its log start up to offset upTo, which must
// be committed (at or below the offset after the commit index in its raft
// state), and its log start offset. (Stopping the nodes one by one may
// elect leaders that commit a few more entries on some nodes: the
// comparison stops at what all had committed.)
func committedLog(t *testing.T, np *nodeProc, topic string, upTo int64) (start int64, data []byte) {
	t.Helper()
	part, err := plog.Open(filepath.Join(np.dir, topic+"-0"), plog.Config{DisableAutoHighWatermark: true, StampLeaderEpoch: true})
	require.NoError(t, err, "node %d", np.id)
	defer func() { require.NoError(t, part.Close()) }()
	st, err := raftlog.OpenStorage(vfs.Default, raftStatePath(np.dir, topic, 0), part, &pb.ConfState{Voters: []uint64{1, 2, 3}})
	require.NoError(t, err, "node %d", np.id)
	end := st.CommittedOffset()
	require.GreaterOrEqual(t, end, upTo, "node %d committed up to %d", np.id, end)
	end = upTo
	for off := st.SnapshotOffset(); off < end; {
		r, err := part.ReadFromFollower(off, 1<<20)
		require.NoError(t, err)
		for b := r.Bytes(); len(b) > 0 && off < end; {
			bt, rest, err := batch.Parse(b)
			require.NoError(t, err)
			data = append(data, bt...)
			off = bt.NextOffset()
			b = rest
		}
		require.NoError(t, r.Close())
	}
	return st.SnapshotOffset(), data
}

// recordValues returns the values of the data records in log bytes
// (control batches skipped).
func recordValues(t *testing.T, data []byte) []string {
	t.Helper()
	var out []string
	for len(data) > 0 {
		bt, rest, err := batch.Parse(data)
		require.NoError(t, err)
		if !bt.Attributes().IsControl() {
			for rec, err := range bt.All(nil) {
				require.NoError(t, err)
				out = append(out, string(rec.Value))
			}
		}
		data = rest
	}
	return out
}

// dumplogVerify runs examples/dumplog --verify --quiet on a data directory.
func dumplogVerify(t *testing.T, bin, dir string) {
	t.Helper()
	out, err := exec.Command(bin, "--verify", "--quiet", dir).CombinedOutput()
	require.NoError(t, err, "dumplog --verify %s:\n%s", dir, out)
	assert.Contains(t, string(out), " 0 problems")
}

// buildDumplog builds examples/dumplog into a temporary directory. It is
// a package of the library's module, not of the broker's: it is built
// from the repository's root, with or without the workspace.
func buildDumplog(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "dumplog")
	cmd := exec.Command("go", "build", "-o", bin, "./examples/dumplog")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

// producer produces increasing values to partition 0 of a topic with
// acks=all and idempotence (franz-go's defaults) until stopped, and keeps
// what was acknowledged.
type producer struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	stopc  chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
	acked  atomic.Int64
	mu     sync.Mutex
	values map[string]int64 // acknowledged value -> offset
	errs   []error
}

// startProducer starts producing with at most 64 records in flight.
func startProducer(t testing.TB, c *testCluster, topic string, ts func() time.Time) *producer {
	var seeds []string
	for _, np := range c.nodes {
		seeds = append(seeds, np.kafka)
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.DefaultProduceTopic(topic),
		kgo.AllowAutoTopicCreation(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MetadataMinAge(50*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.ProduceRequestTimeout(10*time.Second),
	)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	stopc := make(chan struct{})
	p := &producer{cl: cl, cancel: cancel, stopc: stopc, values: make(map[string]int64)}
	sem := make(chan struct{}, 64)
	p.wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case sem <- struct{}{}:
			case <-stopc:
				return
			}
			r := &kgo.Record{Value: fmt.Appendf(nil, "%09d", i), Timestamp: ts()}
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				<-sem
				p.mu.Lock()
				defer p.mu.Unlock()
				if err != nil {
					p.errs = append(p.errs, err)
					return
				}
				p.values[string(r.Value)] = r.Offset
				p.acked.Add(1)
			})
		}
	})
	t.Cleanup(p.stop)
	return p
}

// waitAcked waits until at least n records were acknowledged.
func (p *producer) waitAcked(t testing.TB, n int64) {
	t.Helper()
	deadline := time.Now().Add(clusterTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for p.acked.Load() < n {
		if !time.Now().Before(deadline) {
			p.mu.Lock()
			errs := p.errs[:min(len(p.errs), 5)]
			p.mu.Unlock()
			require.Failf(t, "not acknowledged", "only %d of %d records acknowledged within %v; errors %v", p.acked.Load(), n, clusterTimeout, errs)
		}
		<-tick.C
	}
}

// stop stops producing and waits for the records in flight to be
// acknowledged (or fail).
func (p *producer) stop() {
	p.once.Do(func() {
		close(p.stopc)
		p.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
		defer cancel()
		_ = p.cl.Flush(ctx)
		p.cancel()
		p.cl.Close()
	})
}

// The leader of a partition is killed with SIGKILL three times while an
// idempotent producer writes with acks=all: each time another node takes
// over, the killed node restarts and catches up, and at the end every
// acknowledged record is in every replica's committed log, once and in
// order, and the three committed logs are the same bytes (and pass
// dumplog --verify).
func TestClusterLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	const topic = "replicated"
	c := newTestCluster(t, 3)
	for id := 1; id <= 3; id++ {
		c.start(id)
	}
	p := startProducer(t, c, topic, time.Now)
	p.waitAcked(t, 200)
	killed := 0
	for round := range 3 {
		leader := c.waitLeader(topic, 0)
		before := p.acked.Load()
		killedAt := time.Now()
		c.kill(leader)
		next := c.waitLeader(topic, leader)
		took := time.Since(killedAt)
		require.NotEqual(t, leader, next)
		p.waitAcked(t, before+200) // the new leader takes produces
		c.start(leader)
		t.Logf("round %d: killed leader %d, node %d took over after %v; %d records acknowledged", round, leader, next, took.Round(time.Millisecond), p.acked.Load())
		killed++
	}
	p.stop()
	p.mu.Lock()
	for _, err := range p.errs {
		assert.NoError(t, err, "a record was not acknowledged")
	}
	acked := p.values
	p.mu.Unlock()
	require.Equal(t, 3, killed)

	leader := c.waitLeader(topic, 0)
	hw := c.waitCaughtUp(topic, leader)
	c.stopAll()

	_, want := committedLog(t, c.node(1), topic, hw)
	require.NotEmpty(t, want)
	for id := 2; id <= 3; id++ {
		_, got := committedLog(t, c.node(id), topic, hw)
		require.True(t, bytes.Equal(want, got), "node %d's committed log (%d bytes) differs from node 1's (%d bytes)", id, len(got), len(want))
	}
	values := recordValues(t, want)
	seen := make(map[string]int, len(values))
	for i, v := range values {
		_, dup := seen[v]
		require.False(t, dup, "value %s stored twice", v)
		seen[v] = i
		if i > 0 {
			require.Less(t, values[i-1], v, "values out of order at record %d", i)
		}
	}
	for v := range acked {
		_, ok := seen[v]
		require.True(t, ok, "acknowledged value %s is not in the committed log", v)
	}
	t.Logf("%d records acknowledged, %d committed", len(acked), len(values))
	dl := buildDumplog(t)
	for _, np := range c.nodes {
		dumplogVerify(t, dl, np.dir)
	}
}

// A follower that was down while retention deleted the leader's old
// segments is behind the leader's log start when it comes back: it gets a
// raft snapshot, restarts its log at the leader's log start and copies the
// rest, ending with the same committed bytes from there on.
func TestClusterSnapshotCatchUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	const topic = "retained"
	c := newTestCluster(t, 3, "-segment-bytes", "4096", "-retention", "1h", "-cleanup-interval", "20ms")
	for id := 1; id <= 3; id++ {
		c.start(id)
	}
	old := func() time.Time { return time.Now().Add(-2 * time.Hour) } // past the retention
	p := startProducer(t, c, topic, old)
	p.waitAcked(t, 50)
	leader := c.waitLeader(topic, 0)
	follower := leader%3 + 1
	c.kill(follower)
	before := p.acked.Load()
	// Enough old records for several segments, which retention deletes.
	deadline := time.Now().Add(clusterTimeout)
	for {
		p.waitAcked(t, before+100)
		before = p.acked.Load()
		start, err := c.offsets(leader, topic, -2)
		require.NoError(t, err)
		if start > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "retention never moved the leader's log start")
	}
	p.stop()
	leaderStart, err := c.offsets(leader, topic, -2)
	require.NoError(t, err)

	c.start(follower)
	c.node(follower).waitLog(t, "installed raft snapshot", 1)
	hw := c.waitCaughtUp(topic, leader)
	require.Greater(t, hw, leaderStart)
	c.stopAll()

	fStart, fData := committedLog(t, c.node(follower), topic, hw)
	lStart, lData := committedLog(t, c.node(leader), topic, hw)
	require.Positive(t, fStart, "the follower's log restarted above 0")
	require.GreaterOrEqual(t, fStart, leaderStart)
	// Compare from the later of the two starts (retention may have run
	// again on either).
	skip := func(data []byte, from, to int64) []byte {
		for from < to {
			bt, rest, err := batch.Parse(data)
			require.NoError(t, err)
			from, data = bt.NextOffset(), rest
		}
		return data
	}
	if fStart > lStart {
		lData = skip(lData, lStart, fStart)
	} else {
		fData = skip(fData, fStart, lStart)
	}
	require.NotEmpty(t, fData)
	require.True(t, bytes.Equal(lData, fData), "the follower's committed log (%d bytes) differs from the leader's (%d bytes)", len(fData), len(lData))
	dl := buildDumplog(t)
	dumplogVerify(t, dl, c.node(follower).dir)
}

// readmeClusterSection returns the broker README's cluster section.
func readmeClusterSection(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	s := string(b)
	const heading = "## A replicated broker: three nodes through raft (`-cluster`)"
	i := strings.Index(s, heading)
	require.GreaterOrEqual(t, i, 0, "README has no cluster section")
	s = s[i+len(heading):]
	if j := strings.Index(s, "\n## "); j >= 0 {
		s = s[:j]
	}
	return s
}

// TestREADMEClusterCommands runs the README's cluster section as written
// but for the ports (free ones) and the data directories (temporary): the
// three `go run ./examples/broker` lines (as child processes of the test
// binary), then the kcat lines against them: the produce with acks=all,
// the consume that must print what was produced, and -L naming the three
// brokers.
func TestREADMEClusterCommands(t *testing.T) {
	needKcat(t)
	var brokers, joins, admins, kcats []string
	for line := range strings.SplitSeq(readmeClusterSection(t), "\n") {
		if !strings.HasPrefix(line, "    ") || strings.TrimSpace(line) == "" {
			continue
		}
		cmd := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(cmd, "go run ./examples/broker -add-voter "), strings.HasPrefix(cmd, "go run ./examples/broker -remove-voter "):
			admins = append(admins, cmd)
		case strings.HasPrefix(cmd, "go run ./examples/broker ") && strings.HasSuffix(cmd, " -join"):
			joins = append(joins, cmd)
		case strings.HasPrefix(cmd, "go run ./examples/broker "):
			brokers = append(brokers, cmd)
		case strings.HasPrefix(cmd, "kcat "):
			kcats = append(kcats, cmd)
		default:
			assert.Failf(t, "README cluster section: a command is not run by any test", "command %q", cmd)
		}
	}
	require.Len(t, brokers, 3)
	require.Len(t, joins, 1)
	require.Len(t, admins, 2)
	require.NotEmpty(t, kcats)

	// The README's addresses become free ports, its directories
	// temporary ones.
	c := newTestCluster(t, 3)
	joiner := c.newJoiner()
	repl := []string{}
	for i, np := range append(slices.Clip(c.nodes), joiner) {
		repl = append(repl,
			fmt.Sprintf("127.0.0.1:%d", 9092+i), np.kafka,
			fmt.Sprintf("127.0.0.1:%d", 19092+i), np.raft,
			fmt.Sprintf("/tmp/partlog-%d", i+1), np.dir)
	}
	r := strings.NewReplacer(repl...)
	for i, line := range brokers {
		fields := strings.Fields(strings.TrimPrefix(r.Replace(line), "go run ./examples/broker"))
		want := []string{"-data", c.nodes[i].dir, "-addr", c.nodes[i].kafka, "-node", strconv.Itoa(i + 1), "-cluster", c.spec}
		require.Equal(t, want, fields, "README line %d starts node %d as the test cluster would", i+1, i+1)
		c.start(i + 1)
	}
	produced := 0
	for _, k := range kcats {
		out := runShell(t, r.Replace(k))
		switch {
		case strings.Contains(k, " -P"):
			produced++
		case strings.Contains(k, " -C") && strings.Contains(k, " -e"):
			assert.Equal(t, strings.Repeat("hello\n", produced), out, "%s", k)
		case strings.Contains(k, " -L"):
			assert.Contains(t, out, "3 brokers", "%s", k)
			assert.Contains(t, out, `topic "orders" with 1 partitions`, "%s", k)
		default:
			assert.Failf(t, "no check for a README command", "command %q", k)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	// The followers of "orders" refuse Produce and Fetch with
	// NOT_LEADER_OR_FOLLOWER; the leader serves them.
	leader := c.waitLeader("orders", 0)
	for _, np := range c.nodes {
		want := int16(0)
		if np.id != leader {
			want = kerr.NotLeaderForPartition.Code
		}
		preq := kmsg.NewPtrProduceRequest()
		preq.Acks, preq.TimeoutMillis = -1, 5000
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = "orders"
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Records = buildBatch(t, "direct", 1, batch.CompressionNone)
		pt.Partitions = append(pt.Partitions, pp)
		preq.Topics = append(preq.Topics, pt)
		resp, err := c.request(ctx, np.id, preq)
		require.NoError(t, err)
		assert.Equal(t, want, resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode, "produce to node %d (leader %d)", np.id, leader)

		freq := kmsg.NewPtrFetchRequest()
		freq.MaxBytes = 1 << 20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "orders"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		freq.Topics = append(freq.Topics, ft)
		resp, err = c.request(ctx, np.id, freq)
		require.NoError(t, err)
		assert.Equal(t, want, resp.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode, "fetch from node %d (leader %d)", np.id, leader)
	}
	// Internal topics are the broker's own on every node: a Produce to
	// them is refused (the cluster's produce path once let
	// __transaction_state through).
	for _, np := range c.nodes {
		for _, internal := range []string{offsetsTopic, txnStateTopic} {
			preq := kmsg.NewPtrProduceRequest()
			preq.Acks, preq.TimeoutMillis = -1, 5000
			pt := kmsg.NewProduceRequestTopic()
			pt.Topic = internal
			pp := kmsg.NewProduceRequestTopicPartition()
			pp.Records = buildBatch(t, "direct", 1, batch.CompressionNone)
			pt.Partitions = append(pt.Partitions, pp)
			preq.Topics = append(preq.Topics, pt)
			resp, err := c.request(ctx, np.id, preq)
			require.NoError(t, err)
			assert.Equal(t, kerr.InvalidTopicException.Code, resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode,
				"produce to %s on node %d", internal, np.id)
		}
	}
	// Topic administration in cluster mode: CreateTopics takes the nodes'
	// -partitions count and the replication factor of all the voters (or
	// -1 for either), and refuses configurations, another count or
	// factor; the topic it creates is replicated (a leader is elected);
	// DeleteTopics is disabled as with delete.topic.enable=false.
	creq := kmsg.NewPtrCreateTopicsRequest()
	creq.Version, creq.TimeoutMillis = 7, 5000
	creq.Topics = []kmsg.CreateTopicsRequestTopic{newTopic("created", -1, 3), newTopic("rf2", 1, 2),
		newTopic("four", 4, -1), newTopic("configured", -1, -1, "retention.ms", "1000")}
	cresp, err := c.request(ctx, 2, creq)
	require.NoError(t, err)
	ccodes := make(map[string]string)
	for _, rt := range cresp.(*kmsg.CreateTopicsResponse).Topics {
		ccodes[rt.Topic] = codeName(rt.ErrorCode)
	}
	assert.Equal(t, map[string]string{"created": "NONE", "rf2": codeName(kerr.InvalidReplicationFactor.Code),
		"four": codeName(kerr.InvalidPartitions.Code), "configured": codeName(kerr.InvalidConfig.Code)}, ccodes)
	c.waitLeader("created", 0)
	node3 := dialRaw(t, c.node(3).kafka) // requests at the version given
	assert.Equal(t, map[string]int16{"created": kerr.TopicDeletionDisabled.Code}, deleteTopics(t, node3, 6, "created"), "DeleteTopics v6 in cluster mode")
	assert.Equal(t, map[string]int16{"created": kerr.InvalidRequest.Code}, deleteTopics(t, node3, 2, "created"), "DeleteTopics v2 in cluster mode")
	_ = node3.c.Close()
	// The group coordinator is the leader of __consumer_offsets-0 and
	// the transaction coordinator the leader of __transaction_state-0:
	// every node names them, by -node id and Kafka address, and only
	// they serve their requests (the others answer NOT_COORDINATOR).
	groupCoord := c.waitCoordinator(0, "billing", 0)
	txnCoord := c.waitCoordinator(1, "copy-job", 0)
	for _, np := range c.nodes {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = "billing"
		req.CoordinatorKeys = []string{"billing"} // v4+
		resp, err := c.request(ctx, np.id, req)
		require.NoError(t, err)
		fc := resp.(*kmsg.FindCoordinatorResponse)
		id, host, port, code := fc.NodeID, fc.Host, fc.Port, fc.ErrorCode
		if fc.Version >= 4 {
			require.Len(t, fc.Coordinators, 1)
			co := fc.Coordinators[0]
			id, host, port, code = co.NodeID, co.Host, co.Port, co.ErrorCode
		}
		require.Zero(t, code)
		assert.Equal(t, int32(groupCoord), id)
		assert.Equal(t, c.node(groupCoord).kafka, net.JoinHostPort(host, strconv.Itoa(int(port))))

		ireq := kmsg.NewPtrInitProducerIDRequest()
		txnID := "copy-job"
		ireq.TransactionalID, ireq.TransactionTimeoutMillis = &txnID, 60000
		want := kerr.NotCoordinator.Code
		if np.id == txnCoord {
			want = 0
		}
		for {
			resp, err = c.request(ctx, np.id, ireq)
			require.NoError(t, err)
			if got := resp.(*kmsg.InitProducerIDResponse).ErrorCode; got != kerr.CoordinatorLoadInProgress.Code {
				break
			}
		}
		assert.Equal(t, want, resp.(*kmsg.InitProducerIDResponse).ErrorCode,
			"transactional InitProducerID on node %d (coordinator %d)", np.id, txnCoord)
	}
	c.nodes = append(c.nodes, joiner)
	membershipREADMECommands(t, c, r, joins[0], admins)
	c.stopAll()
}

// membershipREADMECommands runs the README's membership commands against
// the running cluster c: the fourth node's start with -join, -add-voter
// (then Metadata names four brokers and replicas) and -remove-voter 1
// (then three: 2, 3 and 4).
func membershipREADMECommands(t *testing.T, c *testCluster, r *strings.Replacer, join string, admins []string) {
	np := c.node(4)
	fields := strings.Fields(strings.TrimPrefix(r.Replace(join), "go run ./examples/broker"))
	want := []string{"-data", np.dir, "-addr", np.kafka, "-node", "4", "-cluster", np.spec, "-join"}
	require.Equal(t, want, fields, "README starts node 4 as the test cluster would")
	c.start(4)
	for _, a := range admins {
		out := admin(t, strings.Fields(strings.TrimPrefix(r.Replace(a), "go run ./examples/broker"))...)
		want := []int32{1, 2, 3, 4}
		if strings.Contains(a, "-add-voter") {
			assert.Contains(t, out, "node 4 added")
		} else {
			assert.Contains(t, out, "node 1 removed")
			want = want[1:]
		}
		for _, id := range []int{2, 4} {
			c.waitReplicas(id, "orders", want)
		}
		if !strings.Contains(a, "-add-voter") {
			// A removed leader hands its leadership to a voter.
			c.waitLeader("orders", 1)
		}
	}
}
