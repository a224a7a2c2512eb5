package raftlog

import (
	"bytes"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index/vfs/vfstest"
	"github.com/partlog/partlog/log"
)

// The simulation: three replicas of one partition stepped by one goroutine
// in simulated time, over an in-process network that drops, delays (so
// reorders) and partitions messages, with nodes crashed (their MemFS cut to
// what a machine crash leaves: vfstest's CrashClone) and restarted, and
// retention truncating the raft logs (so snapshots go to lagging
// followers). Idempotent producers propose batches with AcksAll and retry
// the same batch until it is acknowledged. It checks that every
// acknowledged batch is at its acknowledged offset on every node, that the
// committed logs agree byte for byte (checked during the run and at the
// end), and that the producer state agrees at the end.
//
// Every fault, delay, proposal and crash comes from the seed; raft's
// election timeouts come from its own random source, so a seed replays the
// same faults but not always the same elections.
//
// go test -run TestSimulation -raftlog.seed=N runs seed N alone
// (RAFTLOG_SEED=N too); -raftlog.seeds=K runs seeds 1..K (200 by default,
// 20 with -short).
var (
	simSeed  = flag.Int64("raftlog.seed", 0, "run only this simulation seed (also RAFTLOG_SEED)")
	simSeeds = flag.Int("raftlog.seeds", 200, "run simulation seeds 1 to this")
)

// simSteps is the length of one seed's run, in ticks, before the network
// heals; simHealSteps bounds the run after it.
const (
	simSteps     = 1500
	simHealSteps = 600
	simNodes     = 3
	simProducers = 3
)

// simMsg is a message in flight.
type simMsg struct {
	at int
	m  *pb.Message
}

// simNode is one node of the simulation: its filesystem and, while it is
// up, its partition and replica.
type simNode struct {
	id   uint64
	mem  *vfstest.MemFS
	part *log.Partition
	core *replicaCore
	down int // steps left until restart (when core is nil)
}

// simProducer is an idempotent producer with one batch in flight.
type simProducer struct {
	id      int64
	seq     int32
	records int
	// pending is the attempt waiting for its answer (nil: none), sent at
	// step sent.
	pending *proposal
	sent    int
}

// sim is one seed's world.
type sim struct {
	t        *testing.T
	rng      *rand.Rand
	now      int
	nodes    []*simNode
	net      []simMsg
	isolated uint64 // a node cut off from the others until isolatedTo
	isoTo    int
	dropPct  int
	prods    []*simProducer
	// acked maps "pid/seq" to the base offset acknowledged.
	acked map[string]int64
	stats struct{ crashes, snapshots, retains, acks int }
}

const (
	simDir   = "/data/g"
	simState = "/data/g.state"
)

// open opens node n's partition and replica from its filesystem.
func (s *sim) open(n *simNode) {
	s.t.Helper()
	part, err := log.Open(simDir, log.Config{FS: n.mem, DisableAutoHighWatermark: true, StampLeaderEpoch: true, SegmentBytes: 2048, SegmentIndexBytes: 1024,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(s.t, err, "node %d reopens", n.id)
	st, err := OpenStorage(n.mem, simState, part, &pb.ConfState{Voters: []uint64{1, 2, 3}})
	require.NoError(s.t, err, "node %d reopens its raft state", n.id)
	core, err := newReplicaCore(n.id, "g", part, st, raftTuning{electionTicks: 10, heartbeatTicks: 1, maxMsgBytes: 16 << 10, maxInflight: 64}, slog.New(slog.DiscardHandler))
	require.NoError(s.t, err)
	core.send = func(ms []*pb.Message) {
		for _, m := range ms {
			if m.GetType() == pb.MsgSnap {
				s.stats.snapshots++
			}
			s.net = append(s.net, simMsg{at: s.now + 1 + s.rng.IntN(4), m: proto.Clone(m).(*pb.Message)})
		}
	}
	n.part, n.core = part, core
}

// crash stops node n as a machine crash would: its filesystem keeps the
// synced state and a random share of the rest.
func (s *sim) crash(n *simNode) {
	n.mem = n.mem.CrashClone(vfstest.CrashOptions{UnsyncedDataPercent: s.rng.IntN(101), TornPercent: 50, Seed: s.rng.Uint64()})
	n.core.failWaiters(0, ErrStopped)
	_ = n.part.Close() // on the old filesystem, which is dropped
	n.part, n.core = nil, nil
	n.down = 5 + s.rng.IntN(100)
	s.stats.crashes++
}

// connected reports whether a message from a to b gets through now.
func (s *sim) connected(a, b uint64) bool {
	return s.isolated == 0 || s.now >= s.isoTo || (a != s.isolated && b != s.isolated)
}

// turn runs f on node n's replica; a storage failure fails the test.
func (s *sim) turn(n *simNode, f func()) {
	s.t.Helper()
	require.NoError(s.t, n.core.turn(f), "node %d", n.id)
}

// deliver hands the messages due now to their nodes, in random order.
func (s *sim) deliver() {
	var due []simMsg
	kept := s.net[:0]
	for _, m := range s.net {
		if m.at <= s.now {
			due = append(due, m)
		} else {
			kept = append(kept, m)
		}
	}
	s.net = kept
	s.rng.Shuffle(len(due), func(i, j int) { due[i], due[j] = due[j], due[i] })
	for _, d := range due {
		to := s.nodes[d.m.GetTo()-1]
		if to.core == nil || !s.connected(d.m.GetFrom(), d.m.GetTo()) || s.rng.IntN(100) < s.dropPct {
			continue
		}
		s.turn(to, func() { to.core.step(d.m) })
	}
}

// leader returns a node that leads and may propose, or a random live node.
func (s *sim) leader() *simNode {
	var live []*simNode
	for _, n := range s.nodes {
		if n.core == nil {
			continue
		}
		if n.core.leaderCheck(0) == nil {
			return n
		}
		live = append(live, n)
	}
	if len(live) == 0 {
		return nil
	}
	return live[s.rng.IntN(len(live))]
}

// produce sends each idle producer's next batch (or the retry of its last
// one) to the node that leads, and collects answers.
func (s *sim) produce() {
	for _, p := range s.prods {
		if p.pending != nil {
			select {
			case res := <-p.pending.res:
				p.pending = nil
				if res.Err == nil {
					s.ack(p, res.Base)
					p.seq += int32(p.records)
					p.records = 0
				}
			default:
				if s.now-p.sent > 60 {
					p.pending = nil // no answer (the node crashed): retry
				}
			}
		}
		if p.pending != nil || s.rng.IntN(3) != 0 {
			continue
		}
		n := s.leader()
		if n == nil {
			continue
		}
		if p.records == 0 {
			p.records = 1 + s.rng.IntN(3)
		}
		pr := &proposal{records: s.batch(p), opts: ProposeOptions{Acks: AcksAll}, res: make(chan Result, 1)}
		p.pending, p.sent = pr, s.now
		s.turn(n, func() { n.core.propose(pr) })
	}
}

// ack records an acknowledged batch; a batch acknowledged twice (a retry
// found as a duplicate) must have the same offset.
func (s *sim) ack(p *simProducer, base int64) {
	key := fmt.Sprintf("%d/%d", p.id, p.seq)
	if old, ok := s.acked[key]; ok {
		require.Equal(s.t, old, base, "batch %s acknowledged at two offsets", key)
		return
	}
	s.acked[key] = base
	s.stats.acks++
}

// batch builds producer p's current batch.
func (s *sim) batch(p *simProducer) []byte {
	bld := batch.NewBuilder(batch.BuilderOptions{Producer: &batch.Producer{ID: p.id, Epoch: 0, BaseSequence: p.seq}})
	for i := range p.records {
		require.NoError(s.t, bld.Add(batch.Record{Value: fmt.Appendf(nil, "p%d-s%d-%d", p.id, p.seq, i), Timestamp: 1000}))
	}
	b, err := bld.Build()
	require.NoError(s.t, err)
	return b
}

// batches returns node n's batches from offset from up to offset to.
func batches(t *testing.T, p *log.Partition, from, to int64) []batch.Batch {
	t.Helper()
	var out []batch.Batch
	for off := from; off < to; {
		r, err := p.ReadFromFollower(off, 1<<20)
		require.NoError(t, err)
		b := r.Bytes()
		if len(b) == 0 {
			_ = r.Close()
			break
		}
		for len(b) > 0 && off < to {
			bt, rest, err := batch.Parse(b)
			require.NoError(t, err)
			if bt.BaseOffset() >= to {
				off = to
				break
			}
			out = append(out, append(batch.Batch(nil), bt...))
			off = bt.NextOffset()
			b = rest
		}
		_ = r.Close()
	}
	return out
}

// checkPrefix checks that the committed logs of the live nodes agree
// where they overlap.
func (s *sim) checkPrefix() {
	s.t.Helper()
	var live []*simNode
	from, to := int64(0), int64(-1)
	for _, n := range s.nodes {
		if n.core == nil {
			continue
		}
		live = append(live, n)
		from = max(from, n.part.LogStartOffset())
		if hw := n.part.HighWatermark(); to < 0 || hw < to {
			to = hw
		}
	}
	if len(live) < 2 || from >= to {
		return
	}
	want := batches(s.t, live[0].part, from, to)
	for _, n := range live[1:] {
		got := batches(s.t, n.part, from, to)
		require.Equal(s.t, len(want), len(got), "node %d and node %d: committed batches in [%d, %d) at step %d", live[0].id, n.id, from, to, s.now)
		for i := range want {
			require.True(s.t, bytes.Equal(want[i], got[i]), "node %d and node %d differ at offset %d (committed below %d) at step %d", live[0].id, n.id, want[i].BaseOffset(), to, s.now)
		}
	}
}

// step advances the world by one tick.
func (s *sim) step(faults bool) {
	s.now++
	for _, n := range s.nodes {
		if n.core == nil {
			if n.down--; n.down <= 0 {
				s.open(n)
			}
			continue
		}
		s.turn(n, n.core.rn.Tick)
	}
	s.deliver()
	if !faults {
		return
	}
	s.produce()
	switch r := s.rng.IntN(1000); {
	case r < 6: // a crash
		if n := s.nodes[s.rng.IntN(simNodes)]; n.core != nil {
			s.crash(n)
		}
	case r < 12: // a partition
		if s.now >= s.isoTo {
			s.isolated, s.isoTo = uint64(1+s.rng.IntN(simNodes)), s.now+10+s.rng.IntN(40)
		}
	case r < 30: // retention on one node (often the leader, whose log start decides who gets a snapshot)
		n := s.nodes[s.rng.IntN(simNodes)]
		if s.rng.IntN(2) == 0 {
			n = s.leader()
		}
		if n == nil || n.core == nil {
			break
		}
		infos := n.part.SegmentInfos()
		if len(infos) > 2 {
			cut := infos[len(infos)-1-s.rng.IntN(2)].BaseOffset // the newest bases
			s.turn(n, func() { require.NoError(s.t, n.core.retain(cut)) })
			s.stats.retains++
		}
	}
}

// runSim runs one seed.
func runSim(t *testing.T, seed uint64) {
	s := &sim{t: t, rng: rand.New(rand.NewPCG(seed, 0x5eed)), acked: make(map[string]int64)}
	s.dropPct = s.rng.IntN(15)
	for i := range simNodes {
		n := &simNode{id: uint64(i + 1), mem: vfstest.NewMem()}
		// The directories exist, durably, before the node starts (an
		// embedder creates and syncs them once).
		require.NoError(t, n.mem.MkdirAll(simDir, 0o755))
		n.mem.SyncAll()
		s.nodes = append(s.nodes, n)
		s.open(n)
	}
	defer func() {
		for _, n := range s.nodes {
			if n.part != nil {
				_ = n.part.Close()
			}
		}
	}()
	for i := range simProducers {
		s.prods = append(s.prods, &simProducer{id: int64(100 + i)})
	}
	for s.now < simSteps {
		s.step(true)
		if s.now%50 == 0 {
			s.checkPrefix()
		}
	}
	// Heal: no drops, no partition, every node up; wait until every node
	// committed the same log, and the producers' last answers are in.
	s.dropPct, s.isolated = 0, 0
	for range simHealSteps {
		s.step(false)
		s.produceAnswers()
		if s.converged() {
			break
		}
	}
	require.True(t, s.converged(), "seed %d: the nodes did not converge in %d steps after healing", seed, simHealSteps)
	s.checkPrefix()
	for key, base := range s.acked {
		var pid int64
		var seq int32
		_, err := fmt.Sscanf(key, "%d/%d", &pid, &seq)
		require.NoError(t, err)
		for _, n := range s.nodes {
			if base < n.part.LogStartOffset() {
				continue // retention deleted it
			}
			bs := batches(t, n.part, base, base+1)
			require.Len(t, bs, 1, "seed %d: acknowledged batch %s at %d missing on node %d", seed, key, base, n.id)
			require.Equal(t, base, bs[0].BaseOffset(), "seed %d: node %d, batch %s", seed, n.id, key)
			require.Equal(t, pid, bs[0].ProducerID(), "seed %d: node %d holds another batch at %d than %s", seed, n.id, base, key)
			require.Equal(t, seq, bs[0].BaseSequence(), "seed %d: node %d holds another batch at %d than %s", seed, n.id, base, key)
		}
	}
	want, err := s.nodes[0].part.Producers()
	require.NoError(t, err)
	for _, n := range s.nodes[1:] {
		got, err := n.part.Producers()
		require.NoError(t, err)
		require.Equal(t, want, got, "seed %d: producer state of node %d and node 1", seed, n.id)
	}
	t.Logf("seed %d: %d acknowledged batches, %d crashes, %d retention rounds, %d snapshots sent, log end %d",
		seed, s.stats.acks, s.stats.crashes, s.stats.retains, s.stats.snapshots, s.nodes[0].part.LogEndOffset())
}

// produceAnswers collects the answers of the proposals still pending.
func (s *sim) produceAnswers() {
	for _, p := range s.prods {
		if p.pending == nil {
			continue
		}
		select {
		case res := <-p.pending.res:
			p.pending = nil
			if res.Err == nil {
				s.ack(p, res.Base)
			}
		default:
		}
	}
}

// converged reports whether every node is up, one leads and may propose,
// and every node's high watermark is the leader's log end.
func (s *sim) converged() bool {
	ldr := s.leader()
	if ldr == nil || ldr.core.leaderCheck(0) != nil {
		return false
	}
	end := ldr.part.LogEndOffset()
	for _, n := range s.nodes {
		if n.core == nil || n.part.HighWatermark() != end || n.part.LogEndOffset() != end {
			return false
		}
	}
	return true
}

// TestSimulation runs the simulation for seeds 1 to -raftlog.seeds (or the
// one seed -raftlog.seed or RAFTLOG_SEED names).
func TestSimulation(t *testing.T) {
	seeds := make([]uint64, 0, *simSeeds)
	if v := os.Getenv("RAFTLOG_SEED"); v != "" && *simSeed == 0 {
		n, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err, "RAFTLOG_SEED")
		*simSeed = n
	}
	switch {
	case *simSeed != 0:
		seeds = append(seeds, uint64(*simSeed))
	case testing.Short():
		for i := range min(*simSeeds, 20) {
			seeds = append(seeds, uint64(i+1))
		}
	default:
		for i := range *simSeeds {
			seeds = append(seeds, uint64(i+1))
		}
	}
	start := time.Now()
	for _, seed := range slices.Clip(seeds) {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			t.Parallel()
			runSim(t, seed)
		})
	}
	t.Cleanup(func() { t.Logf("%d seeds in %v", len(seeds), time.Since(start).Round(time.Millisecond)) })
}
