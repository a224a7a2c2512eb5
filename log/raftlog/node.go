package raftlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/log"
)

// GroupID names one replica group: one partition replicated on several
// nodes. The same name on every node; it is also the name of the group's
// state file in Config.StateDir, so it must be a valid file name (the
// partition's directory name, "<topic>-<partition>", is a good choice).
type GroupID string

// Transport carries raft messages between the nodes. The user provides
// it (examples/broker has one over TCP); the receiving side hands every
// message to its Node's Receive.
type Transport interface {
	// Send sends msgs of group to their nodes (each message's To). It
	// is called from a replica's loop after the entries and hard state
	// that precede the messages are durable, and must not block for
	// long: queue, and drop what cannot be sent (raft retries). A
	// message may be as large as Config.MaxMsgBytes, or a snapshot as
	// MaxSnapshotRecords plus the producer state.
	Send(group GroupID, msgs []*pb.Message)
}

// Config configures a Node.
type Config struct {
	// ID is this node's raft id (not 0), the same in every group.
	ID uint64
	// Transport sends this node's messages.
	Transport Transport
	// StateDir is the directory of the groups' state files, one
	// "<group>.state" each (and a transient "<group>.state.install"
	// while a snapshot is installed). It must exist.
	StateDir string
	// FS is the filesystem of the state files (vfs.Default by default).
	// Use the partitions' own.
	FS vfs.FS
	// Tick is the raft tick (50ms by default). A leader heartbeats
	// every tick; a follower campaigns after ElectionTicks to twice as
	// many without hearing from one.
	Tick time.Duration
	// ElectionTicks is raft's election timeout in ticks (10 by default).
	ElectionTicks int
	// MaxMsgBytes bounds the entries of one append message (1 MiB by
	// default).
	MaxMsgBytes uint64
	// OnConfChange, when set, is called from a replica's loop with every
	// membership change it applies and the membership after it (for
	// example, to learn a new node's address from cc's Context).
	OnConfChange func(group GroupID, cc *pb.ConfChangeV2, cs *pb.ConfState)
	// Logger receives the replicas' log lines (discarded when nil).
	Logger *slog.Logger
	// WrapRead, when set, wraps the reads each replica's Storage makes
	// of its partition (a fault-injection test makes them fail: the
	// replica then stops, and its partition is offline on this node).
	WrapRead func(group GroupID, read ReadFunc) ReadFunc
}

// ErrConfig is wrapped by NewNode's and Start's errors about their
// arguments.
var ErrConfig = errors.New("raftlog: invalid configuration")

// Node runs the replicas of one node: a goroutine per replica group,
// each owning its raft state, its Storage and every write to its
// partition. Its methods are safe for concurrent use.
type Node struct {
	cfg Config
	tun raftTuning

	mu       sync.Mutex
	replicas map[GroupID]*Replica
	closed   bool
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// NewNode returns a node with no replica yet.
func NewNode(cfg Config) (*Node, error) {
	if cfg.ID == 0 || cfg.Transport == nil || cfg.StateDir == "" {
		return nil, fmt.Errorf("%w: ID, Transport and StateDir are required", ErrConfig)
	}
	if cfg.FS == nil {
		cfg.FS = vfs.Default
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 50 * time.Millisecond
	}
	if cfg.ElectionTicks <= 0 {
		cfg.ElectionTicks = 10
	}
	if cfg.MaxMsgBytes == 0 {
		cfg.MaxMsgBytes = 1 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Node{
		cfg: cfg, tun: raftTuning{electionTicks: cfg.ElectionTicks, heartbeatTicks: 1, maxMsgBytes: cfg.MaxMsgBytes, maxInflight: 256},
		replicas: make(map[GroupID]*Replica), ctx: ctx, cancel: cancel,
	}, nil
}

// Membership is a group's members: the voters, whose majority commits an
// entry, and the learners, which get the log but do not vote.
type Membership struct {
	Voters, Learners []uint64
}

// Start makes part the log of this node's replica of group and starts
// it. boot is the group's initial membership, used only when the group's
// state file holds none: a new group, started with the same voters on
// every node (this node's among them). A node joining a group that runs
// already starts as one of boot's learners, with the group's voters as
// boot's voters, and becomes a voter when the group applies the change
// that adds it. A partition that
// held batches before it was replicated keeps them as its first entries.
// The partition is the replica's from now on: write to it only through
// the replica, and read it up to its high watermark (the commit point).
func (n *Node) Start(group GroupID, part *log.Partition, boot Membership) (*Replica, error) {
	if group == "" || filepath.Base(string(group)) != string(group) {
		return nil, fmt.Errorf("%w: group %q is not a file name", ErrConfig, group)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, fmt.Errorf("%w: group %s", ErrStopped, group)
	}
	if _, ok := n.replicas[group]; ok {
		return nil, fmt.Errorf("%w: group %s started twice", ErrConfig, group)
	}
	st, err := OpenStorage(n.cfg.FS, filepath.Join(n.cfg.StateDir, string(group)+".state"), part, &pb.ConfState{Voters: boot.Voters, Learners: boot.Learners})
	if err != nil {
		return nil, err
	}
	core, err := newReplicaCore(n.cfg.ID, group, part, st, n.tun, n.cfg.Logger.With("group", string(group)))
	if err != nil {
		return nil, err
	}
	if n.cfg.WrapRead != nil {
		st.read = n.cfg.WrapRead(group, st.read)
	}
	core.send = func(ms []*pb.Message) { n.cfg.Transport.Send(group, ms) }
	if f := n.cfg.OnConfChange; f != nil {
		core.onConf = func(cc *pb.ConfChangeV2, cs *pb.ConfState) { f(group, cc, cs) }
	}
	r := &Replica{
		core:  core,
		propc: make(chan *proposal, 1024),
		recvc: make(chan *pb.Message, 4096),
		confc: make(chan *pb.ConfChangeV2, 16),
		doc:   make(chan job, 4),
		done:  make(chan struct{}),
		stop:  make(chan struct{}),
		quit:  make(chan struct{}),
	}
	n.replicas[group] = r
	n.wg.Go(func() { r.run(n.ctx, n.cfg.Tick) })
	return r, nil
}

// Replica returns this node's replica of group, or nil.
func (n *Node) Replica(group GroupID) *Replica {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.replicas[group]
}

// Receive hands a message from another node to this node's replica of
// group. It never blocks: a message for a group not started here, or one
// arriving while the replica's queue is full, is dropped (raft retries).
func (n *Node) Receive(group GroupID, m *pb.Message) {
	r := n.Replica(group)
	if r == nil {
		return
	}
	select {
	case r.recvc <- m:
	default:
	}
}

// Close stops every replica and waits for their loops to end. Proposals
// not answered yet get ErrStopped. The partitions stay open: the caller
// closes them.
func (n *Node) Close() error {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	n.cancel()
	n.wg.Wait()
	return nil
}

// Replica is one node's member of a replica group. Its methods are safe
// for concurrent use; they talk to the replica's loop.
type Replica struct {
	core  *replicaCore
	propc chan *proposal
	recvc chan *pb.Message
	confc chan *pb.ConfChangeV2
	doc   chan job
	done  chan struct{} // closed when run returns
	stop  chan struct{} // closed when the replica stops (Stopped)
	once  sync.Once

	// quit is closed when run is ending: a Submit blocked on a full
	// propc gives up. subMu is read-held by every Submit while it may
	// send on propc; run takes it to set shut, after which no
	// proposal enters propc, and then answers the ones queued.
	quit  chan struct{}
	subMu sync.RWMutex
	shut  bool
}

// job is work run on the replica's loop (Retain, Compact), with its
// answer.
type job struct {
	f   func() error
	res chan error // buffered
}

// drain is how many queued proposals or messages one loop turn takes
// before it handles raft's Ready (one fsync for all of them).
const drain = 256

// run drives the replica until ctx ends: ticks, messages and proposals,
// each turn followed by raft's Ready handling. A storage failure stops the
// replica (Err says why): the partition is then offline on this node while
// the group's other nodes go on.
func (r *Replica) run(ctx context.Context, tick time.Duration) {
	defer close(r.done)
	defer r.refuseQueued()
	defer r.once.Do(func() { close(r.stop) })
	c := r.core
	t := time.NewTicker(tick)
	defer t.Stop()
	defer c.failWaiters(0, ErrStopped)
	for {
		var f func()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f = c.rn.Tick
		case m := <-r.recvc:
			f = func() {
				c.step(m)
				for range drain {
					select {
					case m := <-r.recvc:
						c.step(m)
						continue
					default:
					}
					break
				}
			}
		case cc := <-r.confc:
			f = func() { c.proposeConf(cc) }
		case p := <-r.propc:
			f = func() {
				c.propose(p)
				for range drain {
					select {
					case p := <-r.propc:
						c.propose(p)
						continue
					default:
					}
					break
				}
			}
		case j := <-r.doc:
			f = func() { j.res <- j.f() }
		}
		if err := c.turn(f); err != nil {
			r.once.Do(func() { close(r.stop) })
			r.failed(ctx, err)
			return
		}
	}
}

// refuseQueued ends proposing to a replica whose loop is ending: Submit
// refuses from now on, and every proposal and job queued but not taken by
// the loop is answered ErrStopped.
func (r *Replica) refuseQueued() {
	close(r.quit)
	r.subMu.Lock()
	r.shut = true
	r.subMu.Unlock()
	for {
		select {
		case p := <-r.propc:
			p.reply(-1, ErrStopped)
		case j := <-r.doc:
			j.res <- ErrStopped
		default:
			return
		}
	}
}

// failed answers what comes to a replica that stopped on err, until ctx
// ends.
func (r *Replica) failed(ctx context.Context, err error) {
	err = fmt.Errorf("%w: %w", ErrStopped, err)
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-r.propc:
			p.reply(-1, err)
		case j := <-r.doc:
			j.res <- err
		case <-r.recvc:
		case <-r.confc:
		}
	}
}

// Proposal is one batch, or one transaction marker, to propose.
type Proposal struct {
	// Records is one RecordBatch v2 batch as a producer sends it.
	Records []byte
	// Marker, when set, is a transaction marker to write instead, as
	// Partition.AppendMarker writes it.
	Marker *batch.TxnMarker
	// Options says when the proposal is answered, and in which term it
	// may be appended.
	Options ProposeOptions
}

// Submit queues p and returns the channel its one Result will come on,
// without waiting for it: proposals submitted one after the other are
// appended in that order (an idempotent producer's batches must be). It
// fails only when ctx ends, or the replica stopped, before p is queued.
// A queued proposal is always answered: ErrStopped when the replica's
// loop ends (Node.Close) before taking it.
func (r *Replica) Submit(ctx context.Context, p Proposal) (<-chan Result, error) {
	pr := &proposal{records: p.Records, marker: p.Marker, opts: p.Options, res: make(chan Result, 1)}
	r.subMu.RLock()
	defer r.subMu.RUnlock()
	if r.shut {
		return nil, ErrStopped
	}
	// A proposal sent here is in propc before shut is set, so the loop
	// or refuseQueued answers it.
	select {
	case r.propc <- pr:
		return pr.res, nil
	case <-r.quit:
		return nil, ErrStopped
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Propose proposes records, one RecordBatch v2 batch as a producer sends
// it, and waits for its answer: the leader appends it to its partition
// (assigning offsets, checking the producer's sequence and epoch, as
// Partition.AppendBatch does) and replicates it. On a replica that does
// not lead, it fails with ErrNotLeader at once. ctx ends the wait, not
// the proposal.
func (r *Replica) Propose(ctx context.Context, records []byte, opts ProposeOptions) (int64, error) {
	return r.wait(ctx, Proposal{Records: records, Options: opts})
}

// ProposeMarker proposes a transaction marker (commit or abort of a
// producer's transaction), written as Partition.AppendMarker writes it.
func (r *Replica) ProposeMarker(ctx context.Context, m batch.TxnMarker, opts ProposeOptions) (int64, error) {
	return r.wait(ctx, Proposal{Marker: &m, Options: opts})
}

// wait submits p and waits for its answer.
func (r *Replica) wait(ctx context.Context, p Proposal) (int64, error) {
	res, err := r.Submit(ctx, p)
	if err != nil {
		return -1, err
	}
	select {
	case a := <-res:
		return a.Base, a.Err
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

// ProposeConfChange asks the group to change its membership. It does not
// wait: the leader proposes it (a follower forwards it), one change at a
// time; a change proposed while there is no leader or while an earlier
// change is not applied is dropped. Propose it again until Membership
// shows it. A change that is not exactly one change of a type raft knows
// with raft's automatic transition (several would make a joint
// configuration), or that would leave the group without a voter, is
// dropped too. A new node starts its replica with the group's new
// membership as peers and gets the log from the leader (a snapshot when
// the log was truncated).
func (r *Replica) ProposeConfChange(cc *pb.ConfChangeV2) {
	select {
	case r.confc <- cc:
	default:
	}
}

// Membership returns the voters and learners this replica applied last.
func (r *Replica) Membership() Membership {
	cs := r.core.conf.Load()
	return Membership{Voters: cs.GetVoters(), Learners: cs.GetLearners()}
}

// Leader returns the raft id of the group's leader as this replica knows
// it (0: none known).
func (r *Replica) Leader() uint64 { return r.core.lead.Load() }

// Term returns the raft term this replica is in; it is also the leader
// epoch of the batches its leader appends in that term.
func (r *Replica) Term() uint64 { return r.core.term.Load() }

// ReadyTerm returns the term this replica leads in once the first entry
// of that term is committed (its high watermark then covers every entry of
// earlier terms that will ever commit), else 0.
func (r *Replica) ReadyTerm() uint64 { return r.core.ready.Load() }

// Partition returns the replica's partition. Read it; write to it only
// through the replica.
func (r *Replica) Partition() *log.Partition { return r.core.part }

// Stopped returns a channel closed once the replica stopped: a storage
// error took its partition offline on this node (Err says which), or its
// Node closed.
func (r *Replica) Stopped() <-chan struct{} { return r.stop }

// Err returns the storage error that stopped the replica, or nil.
func (r *Replica) Err() error {
	if e := r.core.failed.Load(); e != nil {
		return *e
	}
	return nil
}

// do runs f on the replica's loop and waits for it.
func (r *Replica) do(ctx context.Context, f func() error) error {
	res := make(chan error, 1)
	select {
	case r.doc <- job{f: f, res: res}:
	case <-r.done:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-res:
		return err
	case <-r.done:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Retain deletes the records before offset (a segment base at or below
// the high watermark; others are ignored), moving raft's snapshot point
// there first: the raft log is truncated with them. Each replica applies
// its own retention; a follower that then lags behind the leader's log
// start gets a snapshot.
func (r *Replica) Retain(ctx context.Context, offset int64) error {
	return r.do(ctx, func() error { return r.core.retain(offset) })
}

// Compact runs one key compaction round on the replica's partition with
// c's plan capped at a segment base the snapshot point can move to (the
// records compacted must no longer be raft entries; see Cleaner). Every
// replica compacts its own committed records with the same rules.
//
// When ctx ends first, Compact returns its error at once and the round,
// already queued, may still run: its result then goes nowhere.
func (r *Replica) Compact(ctx context.Context, c log.Cleaner) (log.CleanResult, error) {
	out := make(chan log.CleanResult, 1) // the loop's only write: Compact may have returned
	err := r.do(ctx, func() error {
		res, err := r.core.part.Compact(ctx, Cleaner{Cleaner: c, st: r.core.st})
		out <- res
		return err
	})
	select {
	case res := <-out:
		return res, err
	default:
		return log.CleanResult{}, err
	}
}
