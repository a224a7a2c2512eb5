package raftlog

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/log"
)

// Errors a proposal may end with. Each is wrapped with what happened.
var (
	// ErrNotLeader: this replica does not lead its group (or has not
	// committed the first entry of its term yet, or the term changed
	// under a proposal made for one term). Send the proposal to the
	// leader Replica.Leader names.
	ErrNotLeader = errors.New("raftlog: not the leader")
	// ErrReplaced: the proposal's entry was appended, then replaced by
	// another leader's entry before it committed; it is not in the log.
	ErrReplaced = errors.New("raftlog: entry replaced by another leader")
	// ErrStopped: the replica stopped (Node.Close, or a storage failure
	// took the partition offline on this node) before the proposal was
	// answered. It may or may not commit.
	ErrStopped = errors.New("raftlog: replica stopped")
	// ErrOutcomeUnknown: the proposal's entry was appended in an earlier
	// term than the snapshot this replica installed from the leader, and
	// that snapshot covers its index: the entry may or may not be in the
	// log. Retry with the same producer id and sequence, which is
	// idempotent.
	ErrOutcomeUnknown = errors.New("raftlog: outcome unknown after a snapshot")
)

// Acks says when a proposal is answered.
type Acks int8

const (
	// AcksAll answers once the entry is committed: a quorum of the
	// group holds it durably, and it survives any minority of failures.
	// This is Kafka's acks=all.
	AcksAll Acks = iota
	// AcksLeader answers once the leader has appended the batch to its
	// own partition (not yet synced nor replicated): a leader change may
	// still drop it. This is Kafka's acks=1.
	AcksLeader
)

// ProposeOptions are the options of one proposal.
type ProposeOptions struct {
	// Acks says when the proposal is answered (AcksAll by default).
	Acks Acks
	// InTerm, when not 0, is the only raft term the proposal may be
	// appended in (ErrNotLeader otherwise): a write computed from state
	// read in that term is not made by a later leader.
	InTerm uint64
}

// Result is the answer to a proposal.
type Result struct {
	// Base is the offset of the batch's first record in the partition
	// (for a duplicate of an idempotent producer's batch, the
	// original's).
	Base int64
	// Err is nil when the proposal is acknowledged as its Acks asked.
	// Otherwise it wraps ErrNotLeader, ErrReplaced, ErrStopped,
	// ErrOutcomeUnknown, the partition's append error (log's sentinels:
	// a producer sequence out of order, a fenced epoch, ...) or a storage
	// error.
	Err error
}

// proposal is one batch (or transaction marker) waiting for its replica's
// loop, and then for its answer.
type proposal struct {
	records []byte
	marker  *batch.TxnMarker
	opts    ProposeOptions
	res     chan Result // buffered: the loop never blocks on it

	// Set by the loop for AcksAll while the entry waits for its commit.
	index, term uint64
	base        int64
}

// reply answers a proposal.
func (p *proposal) reply(base int64, err error) {
	p.res <- Result{Base: base, Err: err}
}

// prewrite is a batch the leader appended to its partition before raft
// handed the entry back to persist: its position, for persist to skip.
type prewrite struct {
	pos  entryPos
	next int64
	conf bool // a configuration change's batch (proposeConf)
}

// replicaCore is the state machine of one replica: a RawNode over a
// Storage and the partition, stepped by one goroutine (the Node's loop, or
// the simulation test). Nothing in it is safe for concurrent use except
// the atomics the Replica reads.
type replicaCore struct {
	self   uint64
	group  GroupID
	part   *log.Partition
	st     *Storage
	rn     *raft.RawNode
	logger *slog.Logger
	send   func(ms []*pb.Message)
	// onConf is told of every membership change applied (may be nil).
	onConf func(cc *pb.ConfChangeV2, cs *pb.ConfState)

	conf   atomic.Pointer[pb.ConfState]
	lead   atomic.Uint64
	term   atomic.Uint64
	ready  atomic.Uint64 // see Replica.ReadyTerm
	failed atomic.Pointer[error]

	prewritten  map[uint64]prewrite
	prewriteEnd int64
	// unpersisted counts the entries this leader proposed since raft's
	// last Ready: the next proposal's index is the last persisted index +
	// unpersisted + 1.
	unpersisted uint64
	// confBarrier is the index up to which entries must be applied
	// before this leader proposes a membership change (one at a time).
	confBarrier uint64
	waiters     []*proposal
	epoch       int32  // the leader epoch set on the partition
	termStart   uint64 // the index of the leader's first entry of its term
}

// raftTuning is the raft configuration of a replica.
type raftTuning struct {
	electionTicks, heartbeatTicks int
	maxMsgBytes                   uint64
	maxInflight                   int
}

// newReplicaCore opens the RawNode of a replica over st.
func newReplicaCore(self uint64, group GroupID, part *log.Partition, st *Storage, tun raftTuning, logger *slog.Logger) (*replicaCore, error) {
	r := &replicaCore{
		self: self, group: group, part: part, st: st, logger: logger,
		prewritten: make(map[uint64]prewrite),
		epoch:      -1,
	}
	st.logger = logger
	rn, err := raft.NewRawNode(&raft.Config{
		ID:              self,
		ElectionTick:    tun.electionTicks,
		HeartbeatTick:   tun.heartbeatTicks,
		Storage:         st,
		Applied:         st.applied,
		MaxSizePerMsg:   tun.maxMsgBytes,
		MaxInflightMsgs: tun.maxInflight,
		CheckQuorum:     true,
		PreVote:         true,
		// A leader that applies its own removal steps down; without it
		// raft keeps it leading and heartbeating the remaining voters,
		// which then never campaign.
		StepDownOnRemoval: true,
		Logger:            raftLogger{logger},
	})
	if err != nil {
		return nil, fmt.Errorf("raft node of %s: %w", group, err)
	}
	r.rn = rn
	r.conf.Store(st.cs)
	r.term.Store(st.hs.GetTerm())
	return r, nil
}

// isFailed reports whether the replica stopped on a storage failure.
func (r *replicaCore) isFailed() bool { return r.failed.Load() != nil }

// fail stops the replica with err: the partition is offline on this node.
func (r *replicaCore) fail(err error) {
	r.failed.Store(&err)
	r.lead.Store(0)
	r.failWaiters(0, fmt.Errorf("%w: %w", ErrStopped, err))
}

// turn runs f (a tick, messages or proposals) and then handles raft's
// Ready until none is left, with guard; an error stops the replica.
func (r *replicaCore) turn(f func()) error {
	if r.isFailed() {
		return *r.failed.Load()
	}
	err := r.guard(func() error {
		f()
		for r.rn.HasReady() {
			if err := r.handleReady(); err != nil {
				return fmt.Errorf("its log cannot be written: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		r.logger.Error("raft replica stopped: partition offline on this node", "err", err)
		r.fail(err)
	}
	return err
}

// guard runs f, which drives the RawNode, and turns raft's panic on a
// storage read error into an error. Raft's contract is that
// Storage.Entries fails only with ErrCompacted or ErrUnavailable; on any
// other error it panics. When the storage recorded such a read error
// (Storage.readErr) the panic is that one, and the replica stops with it
// instead of the process: the RawNode is not used again. Any other panic
// is raft's own invariant failing and goes on.
func (r *replicaCore) guard(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			if r.st.readErr == nil {
				panic(v)
			}
			err = fmt.Errorf("raft could not read its entries: %w", r.st.readErr)
		}
	}()
	return f()
}

// step hands a peer's message to raft. A forwarded proposal (only
// membership changes are forwarded: data goes to the leader's Propose)
// is proposed by this node's own path when it leads, so that the index of
// every entry it proposes is counted.
func (r *replicaCore) step(m *pb.Message) {
	if m.GetType() == pb.MsgProp && r.rn.BasicStatus().RaftState == raft.StateLeader {
		for _, e := range m.GetEntries() {
			if e.GetType() != pb.EntryConfChangeV2 {
				continue
			}
			cc := &pb.ConfChangeV2{}
			if err := proto.Unmarshal(e.GetData(), cc); err != nil {
				r.logger.Warn("forwarded configuration change does not decode", "from", m.GetFrom(), "err", err)
				continue
			}
			r.proposeConf(cc)
		}
		return
	}
	if err := r.rn.Step(m); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) {
		r.logger.Debug("raft step", "type", m.GetType().String(), "from", m.GetFrom(), "err", err)
	}
}

// leaderCheck returns why this replica may not propose now, or nil.
func (r *replicaCore) leaderCheck(inTerm uint64) error {
	bs := r.rn.BasicStatus()
	switch {
	case r.isFailed():
		return fmt.Errorf("%w: %w", ErrStopped, *r.failed.Load())
	case bs.RaftState != raft.StateLeader:
		return fmt.Errorf("%w: leader is node %d", ErrNotLeader, bs.Lead)
	case int64(bs.GetTerm()) != int64(r.epoch):
		return fmt.Errorf("%w: leader election in progress (term %d)", ErrNotLeader, bs.GetTerm())
	case inTerm != 0 && inTerm != bs.GetTerm():
		return fmt.Errorf("%w: the term is %d, the proposal was made for %d", ErrNotLeader, bs.GetTerm(), inTerm)
	}
	return nil
}

// cutToExpected truncates batches left past the last entry or prewrite
// (proposals raft dropped).
func (r *replicaCore) cutToExpected() (int64, error) {
	expected := r.st.end
	if len(r.prewritten) > 0 {
		expected = r.prewriteEnd
	}
	if r.part.LogEndOffset() != expected {
		if err := r.part.TruncateTo(expected); err != nil {
			return 0, err
		}
	}
	return expected, nil
}

// propose handles a proposal on the leader: the batch is appended to the
// partition with AppendBatchInfo (validation, idempotence, offsets, the
// leader epoch = the raft term), and the stored batch becomes the raft
// entry's data. AcksLeader is answered now; AcksAll once the entry
// commits.
func (r *replicaCore) propose(p *proposal) {
	if err := r.leaderCheck(p.opts.InTerm); err != nil {
		p.reply(-1, err)
		return
	}
	term := r.rn.BasicStatus().GetTerm()
	if _, err := r.cutToExpected(); err != nil {
		p.reply(-1, err)
		return
	}
	var info log.AppendInfo
	var err error
	if p.marker != nil {
		info.Base, err = r.part.AppendMarker(*p.marker)
		info.LastOffset = info.Base
	} else {
		info, err = r.part.AppendBatchInfo(p.records)
	}
	if err != nil {
		p.reply(-1, fmt.Errorf("append to %s: %w", r.group, err))
		return
	}
	if info.Duplicate {
		idx, t := r.findEntry(info.Base)
		if p.opts.Acks != AcksAll || idx == 0 || r.committed(idx, t) {
			p.reply(info.Base, nil)
			return
		}
		p.index, p.term, p.base = idx, t, info.Base
		r.waiters = append(r.waiters, p)
		return
	}
	rs, err := r.part.ReadFromFollower(info.Base, 0)
	if err != nil {
		_ = r.part.TruncateTo(info.Base)
		p.reply(-1, err)
		return
	}
	bt, _, err := batch.Parse(rs.Bytes())
	var data []byte
	if err == nil {
		data = append([]byte(nil), bt...)
	}
	_ = rs.Close()
	if err != nil {
		_ = r.part.TruncateTo(info.Base)
		p.reply(-1, err)
		return
	}
	idx := r.st.lastIndex() + r.unpersisted + 1
	if err := r.rn.Propose(data); err != nil {
		_ = r.part.TruncateTo(info.Base)
		p.reply(-1, fmt.Errorf("%w: %w", ErrNotLeader, err))
		return
	}
	r.unpersisted++
	next := info.LastOffset + 1
	r.prewritten[idx] = prewrite{pos: entryPos{base: info.Base, term: term}, next: next}
	r.prewriteEnd = next
	if p.opts.Acks != AcksAll {
		p.reply(info.Base, nil)
		return
	}
	p.index, p.term, p.base = idx, term, info.Base
	r.waiters = append(r.waiters, p)
}

// findEntry returns the index and term of the entry holding offset, in
// the log or among the prewritten batches (0, 0: none).
func (r *replicaCore) findEntry(offset int64) (uint64, uint64) {
	if i := r.st.indexOf(offset); i != 0 {
		return i, r.st.pos(i).term
	}
	for i, pw := range r.prewritten {
		if pw.pos.base <= offset && offset < pw.next {
			return i, pw.pos.term
		}
	}
	return 0, 0
}

// committed reports whether entry index of the given term is committed.
func (r *replicaCore) committed(index, term uint64) bool {
	if index > r.st.hs.GetCommit() {
		return false
	}
	t, err := r.st.Term(index)
	return err != nil || t == term // compacted entries were committed
}

// handleReady persists what raft hands over (snapshot, entries synced,
// then the hard state), then sends its messages, then moves the high
// watermark to the commit index and applies membership changes.
func (r *replicaCore) handleReady() error {
	if !r.rn.HasReady() {
		return nil
	}
	rd := r.rn.Ready()
	if rd.SoftState != nil {
		r.lead.Store(rd.SoftState.Lead)
	}
	if !raft.IsEmptySnap(rd.Snapshot) {
		clear(r.prewritten)
		if err := r.st.applySnapshot(rd.Snapshot); err != nil {
			return err
		}
		r.snapshotWaiters(rd.Snapshot.GetMetadata().GetIndex(), rd.Snapshot.GetMetadata().GetTerm())
		r.conf.Store(r.st.cs)
		r.logger.Info("installed raft snapshot", "index", r.st.snapIndex, "snapshotOffset", r.st.snapOffset, "logStart", r.st.logStart)
	}
	if len(rd.Entries) > 0 {
		for _, e := range rd.Entries {
			if err := r.persist(e); err != nil {
				return err
			}
		}
		if err := r.part.Sync(); err != nil {
			return err
		}
	}
	r.unpersisted = 0 // raft hands every unstable entry in its Ready
	if rd.HardState != nil && !raft.IsEmptyHardState(rd.HardState) {
		if err := r.st.setHardState(rd.HardState); err != nil {
			return err
		}
	}
	if len(rd.Messages) > 0 {
		r.send(rd.Messages)
		for _, m := range rd.Messages {
			if m.GetType() == pb.MsgSnap {
				// The snapshot travels whole in the message.
				r.rn.ReportSnapshot(m.GetTo(), raft.SnapshotFinish)
			}
		}
	}
	if n := len(rd.CommittedEntries); n > 0 {
		last := rd.CommittedEntries[n-1].GetIndex()
		if last > r.st.lastIndex() {
			return fmt.Errorf("%w: committed entry %d beyond the last entry %d", ErrState, last, r.st.lastIndex())
		}
		if err := r.st.setCommitted(last); err != nil {
			return err
		}
		if err := r.applyConfChanges(rd.CommittedEntries); err != nil {
			return err
		}
		r.resolveWaiters(last)
	}
	bs := r.rn.BasicStatus()
	r.term.Store(bs.GetTerm())
	if bs.RaftState == raft.StateLeader && int64(r.epoch) != int64(bs.GetTerm()) && r.st.lastIndex() > r.st.snapIndex && r.st.pos(r.st.lastIndex()).term == bs.GetTerm() {
		// The leader's empty entry (the first of its term) is in the
		// log: stamp the term on the batches appended from now on.
		if err := r.part.SetLeaderEpoch(int32(bs.GetTerm())); err != nil {
			return err
		}
		r.epoch = int32(bs.GetTerm())
		r.confBarrier = r.st.lastIndex()
		r.termStart = r.st.lastIndex()
		r.logger.Info("leading", "term", bs.GetTerm(), "logEndOffset", r.part.LogEndOffset())
	}
	if bs.RaftState != raft.StateLeader {
		r.epoch = -1
		clear(r.prewritten)
		r.ready.Store(0)
	} else if int64(r.epoch) == int64(bs.GetTerm()) && r.st.hs.GetCommit() >= r.termStart {
		r.ready.Store(bs.GetTerm())
	}
	r.rn.Advance(rd)
	return nil
}

// persist writes entry e at its index: an entry at or below the last one
// replaces the conflicting suffix (cut with TruncateTo); a batch the
// leader already wrote for this entry is kept; an empty entry becomes a
// noop control batch; a normal entry's data is the batch, appended as is
// (AppendAssigned).
func (r *replicaCore) persist(e *pb.Entry) error {
	st := r.st
	idx := e.GetIndex()
	if idx <= st.snapIndex {
		return nil
	}
	if t := e.GetType(); t != pb.EntryNormal && t != pb.EntryConfChangeV2 {
		return fmt.Errorf("%w: entry %d has type %s (only ConfChangeV2 changes the membership)", ErrState, idx, t)
	}
	if idx <= st.lastIndex() {
		off := st.pos(idx).base
		if err := r.part.TruncateTo(off); err != nil {
			return err
		}
		st.ents = st.ents[:idx-st.snapIndex-1]
		st.end = off
		r.failWaiters(idx, fmt.Errorf("%w: index %d", ErrReplaced, idx))
	}
	if idx != st.lastIndex()+1 {
		return fmt.Errorf("%w: entry %d after the last entry %d", ErrState, idx, st.lastIndex())
	}
	term := e.GetTerm()
	if pw, ok := r.prewritten[idx]; ok {
		delete(r.prewritten, idx)
		if pw.pos.base == st.end && pw.pos.term == term && pw.conf == (e.GetType() == pb.EntryConfChangeV2) && r.part.LogEndOffset() >= pw.next {
			st.ents = append(st.ents, pw.pos)
			st.end = pw.next
			return nil
		}
	}
	if r.part.LogEndOffset() > st.end {
		// Batches written ahead for proposals raft dropped. (Below
		// st.end: a snapshot was installed; this entry starts after its
		// offset, past a gap.)
		clear(r.prewritten)
		if err := r.part.TruncateTo(st.end); err != nil {
			return err
		}
	}
	data := e.GetData()
	if e.GetType() == pb.EntryConfChangeV2 {
		b, err := raftConfChangeBatch(st.end, term, data)
		if err != nil {
			return err
		}
		data = b
	} else if len(data) == 0 {
		b, err := raftNoopBatch(st.end, term)
		if err != nil {
			return err
		}
		data = b
	} else if bt, rest, err := batch.Parse(data); err != nil || len(rest) != 0 || bt.BaseOffset() != st.end || uint64(max(bt.PartitionLeaderEpoch(), 0)) != term {
		return fmt.Errorf("%w: entry %d (term %d) is not one batch at offset %d of that epoch (%v)", ErrState, idx, term, st.end, err)
	}
	end, err := r.part.AppendAssigned(data)
	if err != nil {
		return err
	}
	st.ents = append(st.ents, entryPos{base: st.end, term: term})
	st.end = end
	return nil
}

// resolveWaiters answers the AcksAll proposals whose entries are
// committed (index <= commit): with their base offset when the committed
// entry is theirs (same term), ErrReplaced when another leader's entry
// took the index.
func (r *replicaCore) resolveWaiters(commit uint64) {
	kept := r.waiters[:0]
	for _, w := range r.waiters {
		switch {
		case w.index > commit:
			kept = append(kept, w)
		case r.committed(w.index, w.term):
			w.reply(w.base, nil)
		default:
			w.reply(-1, fmt.Errorf("%w: index %d", ErrReplaced, w.index))
		}
	}
	clear(r.waiters[len(kept):])
	r.waiters = kept
}

// snapshotWaiters answers the waiting proposals whose entries an
// installed snapshot at index and term covers. The leader's log holds
// term's entry at index, and terms only grow along a log: a waiter's entry
// of that term at or below index was appended before it by the one leader
// of that term, so is in the leader's log too (committed); a waiter at
// index of another term, or below it of a later term, is not. One of an
// earlier term below index may be either. A waiter past index stays: the
// leader's log may hold it, and resolveWaiters decides when its index
// commits.
func (r *replicaCore) snapshotWaiters(index, term uint64) {
	kept := r.waiters[:0]
	for _, w := range r.waiters {
		switch {
		case w.index > index:
			kept = append(kept, w)
		case w.term == term:
			w.reply(w.base, nil)
		case w.index == index || w.term > term:
			w.reply(-1, fmt.Errorf("%w: index %d, below a snapshot at index %d of term %d", ErrReplaced, w.index, index, term))
		default:
			w.reply(-1, fmt.Errorf("%w: index %d of term %d, below a snapshot at index %d of term %d", ErrOutcomeUnknown, w.index, w.term, index, term))
		}
	}
	clear(r.waiters[len(kept):])
	r.waiters = kept
}

// failWaiters answers the waiting proposals at or after index with err.
func (r *replicaCore) failWaiters(index uint64, err error) {
	kept := r.waiters[:0]
	for _, w := range r.waiters {
		if w.index >= index {
			w.reply(-1, err)
		} else {
			kept = append(kept, w)
		}
	}
	clear(r.waiters[len(kept):])
	r.waiters = kept
}

// retain applies retention up to offset (a segment base at or below the
// high watermark; others are ignored): Storage.compact moves the snapshot
// point there first. Only a segment base has a producer snapshot, which
// the raft snapshots sent from the point carry.
func (r *replicaCore) retain(offset int64) error {
	if offset <= r.part.LogStartOffset() || offset > r.part.HighWatermark() {
		return nil
	}
	if !slices.ContainsFunc(r.part.SegmentInfos(), func(s log.SegmentInfo) bool { return s.BaseOffset == offset }) {
		return nil
	}
	return r.st.compact(offset)
}

// proposeConf proposes a membership change. The leader writes the
// change's batch at the end of its log first, as it writes a proposed
// batch, so the batches proposed after it get the offsets after it; a
// follower forwards the change to the leader through raft. A change is
// dropped (the caller proposes it again until it is applied) when there is
// no leader, or while the leader may still have an earlier change
// unapplied (one change at a time).
func (r *replicaCore) proposeConf(cc *pb.ConfChangeV2) {
	bs := r.rn.BasicStatus()
	if r.isFailed() {
		return
	}
	if bs.RaftState != raft.StateLeader {
		if bs.Lead != raft.None {
			if err := r.rn.ProposeConfChange(cc); err != nil {
				r.logger.Debug("membership change not forwarded", "err", err)
			}
		}
		return
	}
	if int64(bs.GetTerm()) != int64(r.epoch) || r.st.applied < r.confBarrier {
		return
	}
	if len(cc.GetChanges()) != 1 || cc.GetTransition() != pb.ConfChangeTransitionAuto {
		// Raft would enter a joint configuration (or refuse an empty
		// change): the state file holds none, and raft's own change
		// leaving it is not applied here, so raft would stay joint and
		// propose that change again after every one applied.
		r.logger.Warn("membership change refused: not one change", "change", ConfChangeString(cc))
		return
	}
	switch cc.GetChanges()[0].GetType() {
	case pb.ConfChangeAddNode, pb.ConfChangeRemoveNode, pb.ConfChangeAddLearnerNode, pb.ConfChangeUpdateNode:
	default:
		// Raft panics applying it, on every replica and again at each
		// restart.
		r.logger.Warn("membership change refused: unknown type", "change", ConfChangeString(cc))
		return
	}
	if !keepsVoter(r.st.cs, cc) {
		// Raft panics applying it, on every replica and again at each
		// restart.
		r.logger.Warn("membership change refused: it leaves no voter", "change", ConfChangeString(cc))
		return
	}
	data, err := proto.Marshal(cc)
	if err != nil {
		r.logger.Error("membership change does not encode", "err", err)
		return
	}
	expected, err := r.cutToExpected()
	if err != nil {
		r.logger.Error("membership change", "err", err)
		return
	}
	b, err := raftConfChangeBatch(expected, bs.GetTerm(), data)
	if err != nil {
		r.logger.Error("membership change", "err", err)
		return
	}
	next, err := r.part.AppendAssigned(b)
	if err != nil {
		r.logger.Error("membership change not written", "err", err)
		return
	}
	idx := r.st.lastIndex() + r.unpersisted + 1
	if err := r.rn.ProposeConfChange(cc); err != nil {
		_ = r.part.TruncateTo(expected)
		r.logger.Debug("membership change not proposed", "err", err)
		return
	}
	r.unpersisted++
	r.prewritten[idx] = prewrite{pos: entryPos{base: expected, term: bs.GetTerm()}, next: next, conf: true}
	r.prewriteEnd = next
	r.confBarrier = idx
	r.logger.Info("proposed membership change", "index", idx, "change", ConfChangeString(cc))
}

// keepsVoter reports whether cc, applied to the membership cs, leaves at
// least one voter.
func keepsVoter(cs *pb.ConfState, cc *pb.ConfChangeV2) bool {
	voters := make(map[uint64]bool)
	for _, id := range cs.GetVoters() {
		voters[id] = true
	}
	for _, ch := range cc.GetChanges() {
		switch id := ch.GetNodeId(); {
		case id == 0: // raft ignores such a change
		case ch.GetType() == pb.ConfChangeAddNode:
			voters[id] = true
		case ch.GetType() == pb.ConfChangeRemoveNode, ch.GetType() == pb.ConfChangeAddLearnerNode:
			delete(voters, id)
		}
	}
	return len(voters) > 0
}

// applyConfChanges applies the membership changes among committed entries
// that are not applied yet (a restart hands raft the entries after the
// last applied index recorded in the state file again): raft's tracker
// takes each, the new membership is written to the state file, and
// onConf is told. Then every committed entry counts as applied.
func (r *replicaCore) applyConfChanges(ents []*pb.Entry) error {
	for _, e := range ents {
		if e.GetIndex() <= r.st.applied || e.GetType() != pb.EntryConfChangeV2 {
			continue
		}
		cc := &pb.ConfChangeV2{}
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			return fmt.Errorf("%w: configuration change entry %d does not decode: %v", ErrState, e.GetIndex(), err)
		}
		if len(cc.GetChanges()) == 0 && len(cc.GetContext()) == 0 {
			continue // raft's automatic leave of a joint configuration
		}
		cs := r.rn.ApplyConfChange(cc)
		if err := r.st.setConf(cs, e.GetIndex()); err != nil {
			return err
		}
		r.conf.Store(r.st.cs)
		if r.onConf != nil {
			r.onConf(cc, cs)
		}
		r.logger.Info("membership changed", "index", e.GetIndex(), "change", ConfChangeString(cc),
			"voters", cs.GetVoters(), "learners", cs.GetLearners())
		if bs := r.rn.BasicStatus(); bs.RaftState == raft.StateLeader && !slices.Contains(cs.GetVoters(), r.self) && len(cs.GetVoters()) > 0 {
			// A leader that removed itself steps down when the change
			// is applied; if it still leads here, hand the leadership
			// to a voter at once.
			r.rn.TransferLeader(cs.GetVoters()[0])
		}
	}
	if n := len(ents); n > 0 {
		r.st.applied = max(r.st.applied, ents[n-1].GetIndex())
	}
	return nil
}

// ConfChangeString describes a membership change for a log line: "type
// node" pairs, comma-separated.
func ConfChangeString(cc *pb.ConfChangeV2) string {
	var out []byte
	for i, ch := range cc.GetChanges() {
		if i > 0 {
			out = append(out, ", "...)
		}
		out = fmt.Appendf(out, "%s %d", ch.GetType(), ch.GetNodeId())
	}
	return string(out)
}

// raftLogger sends raft's log lines to slog (debug, except warnings and
// errors).
type raftLogger struct{ l *slog.Logger }

func (l raftLogger) Debug(v ...any)                 { l.l.Debug(fmt.Sprint(v...)) }
func (l raftLogger) Debugf(format string, v ...any) { l.l.Debug(fmt.Sprintf(format, v...)) }
func (l raftLogger) Error(v ...any)                 { l.l.Error(fmt.Sprint(v...)) }
func (l raftLogger) Errorf(format string, v ...any) { l.l.Error(fmt.Sprintf(format, v...)) }
func (l raftLogger) Info(v ...any)                  { l.l.Debug(fmt.Sprint(v...)) }
func (l raftLogger) Infof(format string, v ...any)  { l.l.Debug(fmt.Sprintf(format, v...)) }
func (l raftLogger) Warning(v ...any)               { l.l.Warn(fmt.Sprint(v...)) }
func (l raftLogger) Warningf(format string, v ...any) {
	l.l.Warn(fmt.Sprintf(format, v...))
}
func (l raftLogger) Fatal(v ...any)                 { panic(fmt.Sprint(v...)) }
func (l raftLogger) Fatalf(format string, v ...any) { panic(fmt.Sprintf(format, v...)) }
func (l raftLogger) Panic(v ...any)                 { panic(fmt.Sprint(v...)) }
func (l raftLogger) Panicf(format string, v ...any) { panic(fmt.Sprintf(format, v...)) }
