package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

// Raft timing: a tick every raftTick, a heartbeat every tick, an election
// after 10 to 20 ticks without hearing from a leader.
const (
	raftTick          = 50 * time.Millisecond
	raftElectionTicks = 10
	raftMaxMsgBytes   = 1 << 20
	raftMaxInflight   = 256
	// raftDrain is how many queued proposals or messages one loop turn
	// takes before it handles raft's Ready (one fsync for all of them).
	raftDrain = 256
)

// proposal is one produced batch waiting for its replica's loop, and then
// for its answer.
type proposal struct {
	records []byte
	acks    int16
	res     chan proposeResult // buffered: the loop never blocks on it
	// marker, when set, is a transaction marker to write instead of
	// records (AppendMarker on the leader; coordstate.go).
	marker *batch.TxnMarker
	// inTerm, when not 0, is the only raft term the proposal may be
	// appended in: the coordinators' writes (coordstate.go) are made from
	// state loaded in that term.
	inTerm uint64

	// Set by the loop for acks=-1 while the entry waits for its commit.
	index, term uint64
	base        int64
}

// proposeResult is the answer to a proposal: the batch's base offset, or
// a Kafka error code with the error.
type proposeResult struct {
	base int64
	code int16
	err  error
}

// prewrite is a batch the leader appended to its partition before raft
// handed the entry back to persist: its position, for persist to skip.
type prewrite struct {
	pos  entryPos
	next int64
	conf bool // a configuration change's batch (proposeConf)
}

// replica is one partition's raft group member: a RawNode driven by one
// goroutine (run) that owns the raft state, the raftStorage and every
// write to the partition. Handlers talk to it through channels and read
// its leader and term from atomics.
type replica struct {
	c         *cluster
	topic     string
	partition int32
	part      *plog.Partition
	st        *raftStorage
	rn        *raft.RawNode
	log       *slog.Logger

	propc chan *proposal
	recvc chan *pb.Message
	confc chan *pb.ConfChangeV2 // membership changes to propose (admin.go)
	done  chan struct{}

	// conf is the membership this node applied last (voters, learners).
	conf atomic.Pointer[pb.ConfState]

	lead   atomic.Uint64 // raft id of the leader this node knows, 0: none
	term   atomic.Uint64
	failed atomic.Bool
	// ready is the term this node leads in once the first entry of that
	// term is committed (so the log up to the high watermark holds every
	// entry of earlier terms that will ever commit), else 0.
	ready atomic.Uint64

	// Loop-only state.
	prewritten  map[uint64]prewrite
	prewriteEnd int64 // offset after the last prewritten batch
	// unpersisted counts the entries this leader proposed since raft's
	// last Ready (data and configuration changes): the next proposal's
	// index is the last persisted index + unpersisted + 1.
	unpersisted uint64
	// confBarrier is the index up to which entries must be applied
	// before this leader proposes a membership change: raft refuses one
	// while an earlier change may be unapplied (replacing it with an
	// empty entry), and the replica must not have written its batch
	// then.
	confBarrier uint64
	waiters     []*proposal
	epoch       int32  // the leader epoch set on the partition
	termStart   uint64 // the index of the leader's first entry of its term
	nextCleanup time.Time
}

// newReplica opens the raft state of a partition and its RawNode.
func newReplica(c *cluster, topic string, partition int32, part *plog.Partition) (*replica, error) {
	st, err := openRaftStorageConf(c.fs, raftStatePath(c.dataDir, topic, partition), part, c.bootConf())
	if err != nil {
		return nil, err
	}
	r := &replica{
		c: c, topic: topic, partition: partition, part: part, st: st,
		log:        c.log.With("topic", topic, "partition", partition),
		propc:      make(chan *proposal, 1024),
		recvc:      make(chan *pb.Message, 4096),
		confc:      make(chan *pb.ConfChangeV2, 16),
		done:       make(chan struct{}),
		prewritten: make(map[uint64]prewrite),
		epoch:      -1,
	}
	st.log = r.log
	rn, err := raft.NewRawNode(&raft.Config{
		ID:              c.self,
		ElectionTick:    raftElectionTicks,
		HeartbeatTick:   1,
		Storage:         st,
		Applied:         st.applied,
		MaxSizePerMsg:   raftMaxMsgBytes,
		MaxInflightMsgs: raftMaxInflight,
		CheckQuorum:     true,
		PreVote:         true,
		// A leader that applies its own removal steps down. Without it
		// raft keeps it leading and heartbeating the remaining voters,
		// which then never campaign: if its hand-over below fails (the
		// voter it picks has not applied the change yet and refuses to
		// campaign), the partition has no usable leader for good.
		StepDownOnRemoval: true,
		Logger:            raftLogger{r.log},
	})
	if err != nil {
		return nil, fmt.Errorf("raft node of %s-%d: %w", topic, partition, err)
	}
	r.rn = rn
	r.conf.Store(st.cs)
	if c.wrapRead != nil {
		st.read = c.wrapRead(topic, partition, st.read)
	}
	r.term.Store(st.hs.GetTerm())
	return r, nil
}

// run drives the replica until ctx ends: ticks, messages from peers and
// proposals, each turn followed by raft's Ready (persist, send, commit).
// A persistence failure, or a read error raft met in the partition (see
// guard), stops the replica: the partition is then offline on this node
// (Produce gets KAFKA_STORAGE_ERROR, Fetch and ListOffsets
// NOT_LEADER_OR_FOLLOWER, Metadata names it as an offline replica) while
// its other nodes elect a leader among themselves, and every other
// partition of the node keeps serving.
func (r *replica) run(ctx context.Context) {
	defer close(r.done)
	t := time.NewTicker(raftTick)
	defer t.Stop()
	defer r.failWaiters(0, kerr.NotLeaderForPartition.Code, errors.New("broker: shutting down"))
	for {
		var turn func()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			turn = func() {
				r.rn.Tick()
				r.maybeCleanup()
			}
		case m := <-r.recvc:
			turn = func() {
				r.step(m)
				for i := 0; i < raftDrain; i++ {
					select {
					case m := <-r.recvc:
						r.step(m)
						continue
					default:
					}
					break
				}
			}
		case cc := <-r.confc:
			turn = func() { r.proposeConf(cc) }
		case p := <-r.propc:
			turn = func() {
				r.propose(p)
				for i := 0; i < raftDrain; i++ {
					select {
					case p := <-r.propc:
						r.propose(p)
						continue
					default:
					}
					break
				}
			}
		}
		err := r.guard(func() error {
			turn()
			// Advance may leave more to do at once (the leader's own
			// acknowledgement of what it just persisted can commit
			// entries).
			for r.rn.HasReady() {
				if err := r.handleReady(); err != nil {
					return fmt.Errorf("its log cannot be written: %w", err)
				}
			}
			return nil
		})
		if err != nil {
			r.log.Error("raft replica stopped: partition offline on this node", "err", err)
			r.failed.Store(true)
			r.lead.Store(0)
			return
		}
	}
}

// guard runs f, which drives the RawNode, and turns raft's panic on a
// storage read error into an error. Raft's contract is that
// Storage.Entries fails only with ErrCompacted or ErrUnavailable; on any
// other error it panics with it (or logs it through Panicf). When the
// replica's storage recorded such a read error (raftStorage.readErr) the
// panic is that one, and the replica stops with it instead of the
// process: the RawNode is not used again, since the panic may have left
// it half way through a step. Any other panic is raft's own invariant
// failing and goes on.
func (r *replica) guard(f func() error) (err error) {
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

// step hands a peer's message to raft. A proposal a follower forwarded
// (only membership changes are ever forwarded: produces go to the leader
// through Kafka) is proposed by this node's own path when it leads, so
// that the index of every entry it proposes is counted.
func (r *replica) step(m *pb.Message) {
	if m.GetType() == pb.MsgProp && r.rn.BasicStatus().RaftState == raft.StateLeader {
		for _, e := range m.GetEntries() {
			if e.GetType() != pb.EntryConfChangeV2 {
				continue
			}
			cc := &pb.ConfChangeV2{}
			if err := proto.Unmarshal(e.GetData(), cc); err != nil {
				r.log.Warn("forwarded configuration change does not decode", "from", m.GetFrom(), "err", err)
				continue
			}
			r.proposeConf(cc)
		}
		return
	}
	if err := r.rn.Step(m); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) {
		r.log.Debug("raft step", "type", m.GetType().String(), "from", m.GetFrom(), "err", err)
	}
}

// reply answers a proposal.
func (p *proposal) reply(base int64, code int16, err error) {
	p.res <- proposeResult{base: base, code: code, err: err}
}

// propose handles a produce on the leader: the batch is appended to the
// partition with AppendBatchInfo (validation, idempotence, offsets, the
// leader epoch = the raft term), and the stored batch becomes the raft
// entry's data. acks=1 is answered now; acks=-1 once the entry commits.
func (r *replica) propose(p *proposal) {
	bs := r.rn.BasicStatus()
	if bs.RaftState != raft.StateLeader || r.failed.Load() {
		p.reply(-1, kerr.NotLeaderForPartition.Code, errors.New("broker: not the leader"))
		return
	}
	if int64(bs.GetTerm()) != int64(r.epoch) {
		// The leader's empty entry has not been persisted yet.
		p.reply(-1, kerr.NotLeaderForPartition.Code, errors.New("broker: leader election in progress"))
		return
	}
	if p.inTerm != 0 && p.inTerm != bs.GetTerm() {
		p.reply(-1, kerr.NotLeaderForPartition.Code, errors.New("broker: the term changed"))
		return
	}
	expected := r.st.end
	if len(r.prewritten) > 0 {
		expected = r.prewriteEnd
	}
	if r.part.LogEndOffset() != expected {
		if err := r.part.TruncateTo(expected); err != nil {
			p.reply(-1, kerr.KafkaStorageError.Code, err)
			return
		}
	}
	var info plog.AppendInfo
	var err error
	if p.marker != nil {
		info.Base, err = r.part.AppendMarker(*p.marker)
		info.LastOffset = info.Base
	} else {
		info, err = r.part.AppendBatchInfo(p.records)
	}
	if err != nil {
		p.reply(-1, appendErrorCode(err, p.records), err)
		return
	}
	if info.Duplicate {
		idx, term := r.findEntry(info.Base)
		if p.acks != -1 || idx == 0 || r.committed(idx, term) {
			p.reply(info.Base, 0, nil)
			return
		}
		p.index, p.term, p.base = idx, term, info.Base
		r.waiters = append(r.waiters, p)
		return
	}
	rs, err := r.part.ReadFromFollower(info.Base, 0)
	if err != nil {
		_ = r.part.TruncateTo(info.Base)
		p.reply(-1, kerr.KafkaStorageError.Code, err)
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
		p.reply(-1, kerr.KafkaStorageError.Code, err)
		return
	}
	idx := r.st.lastIndex() + r.unpersisted + 1
	if err := r.rn.Propose(data); err != nil {
		_ = r.part.TruncateTo(info.Base)
		p.reply(-1, kerr.NotLeaderForPartition.Code, err)
		return
	}
	r.unpersisted++
	next := info.LastOffset + 1
	r.prewritten[idx] = prewrite{pos: entryPos{base: info.Base, term: bs.GetTerm()}, next: next}
	r.prewriteEnd = next
	if p.acks != -1 {
		p.reply(info.Base, 0, nil)
		return
	}
	p.index, p.term, p.base = idx, bs.GetTerm(), info.Base
	r.waiters = append(r.waiters, p)
}

// findEntry returns the index and term of the entry holding offset, in
// the log or among the prewritten batches (0, 0: none).
func (r *replica) findEntry(offset int64) (uint64, uint64) {
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
func (r *replica) committed(index, term uint64) bool {
	if index > r.st.hs.GetCommit() {
		return false
	}
	t, err := r.st.Term(index)
	return err != nil || t == term // compacted entries were committed
}

// handleReady persists what raft hands over, then sends its messages, then
// moves the high watermark to the commit index.
func (r *replica) handleReady() error {
	if !r.rn.HasReady() {
		return nil
	}
	rd := r.rn.Ready()
	if rd.SoftState != nil {
		r.lead.Store(rd.SoftState.Lead)
	}
	if !raft.IsEmptySnap(rd.Snapshot) {
		r.dropPrewrites()
		r.failWaiters(0, kerr.NotLeaderForPartition.Code, errors.New("broker: replaced by a snapshot"))
		if err := r.st.applySnapshot(rd.Snapshot); err != nil {
			return err
		}
		r.conf.Store(r.st.cs)
		r.log.Info("installed raft snapshot", "index", r.st.snapIndex, "snapshotOffset", r.st.snapOffset, "logStart", r.st.logStart)
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
	for _, m := range rd.Messages {
		r.c.send(r.topic, r.partition, m)
		if m.GetType() == pb.MsgSnap {
			// The snapshot is its point only: it travels whole in the
			// message.
			r.rn.ReportSnapshot(m.GetTo(), raft.SnapshotFinish)
		}
	}
	if n := len(rd.CommittedEntries); n > 0 {
		last := rd.CommittedEntries[n-1].GetIndex()
		if last > r.st.lastIndex() {
			return fmt.Errorf("%w: committed entry %d beyond the last entry %d", errRaftState, last, r.st.lastIndex())
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
		// log: stamp the term on the batches produced from now on.
		if err := r.part.SetLeaderEpoch(int32(bs.GetTerm())); err != nil {
			return err
		}
		r.epoch = int32(bs.GetTerm())
		r.confBarrier = r.st.lastIndex()
		r.termStart = r.st.lastIndex()
		r.log.Info("leading", "term", bs.GetTerm(), "logEndOffset", r.part.LogEndOffset())
	}
	if bs.RaftState != raft.StateLeader {
		r.epoch = -1
		r.dropPrewrites()
		r.ready.Store(0)
	} else if int64(r.epoch) == int64(bs.GetTerm()) && r.st.hs.GetCommit() >= r.termStart {
		r.ready.Store(bs.GetTerm())
	}
	r.rn.Advance(rd)
	return nil
}

// dropPrewrites forgets batches written ahead of raft (they are cut at the
// next persist or proposal).
func (r *replica) dropPrewrites() {
	clear(r.prewritten)
}

// persist writes entry e at its index: an entry at or below the last one
// replaces the conflicting suffix (cut with TruncateTo); a batch the
// leader already wrote for this entry is kept; an empty entry becomes a
// raftNoopBatch; a normal entry's data is the batch, appended as is
// (AppendAssigned).
func (r *replica) persist(e *pb.Entry) error {
	st := r.st
	idx := e.GetIndex()
	if idx <= st.snapIndex {
		return nil
	}
	if t := e.GetType(); t != pb.EntryNormal && t != pb.EntryConfChangeV2 {
		return fmt.Errorf("%w: entry %d has type %s (only ConfChangeV2 changes the membership)", errRaftState, idx, t)
	}
	if idx <= st.lastIndex() {
		off := st.pos(idx).base
		if err := r.part.TruncateTo(off); err != nil {
			return err
		}
		st.ents = st.ents[:idx-st.snapIndex-1]
		st.end = off
		r.failWaiters(idx, kerr.NotLeaderForPartition.Code, errors.New("broker: entry replaced by a new leader"))
	}
	if idx != st.lastIndex()+1 {
		return fmt.Errorf("%w: entry %d after the last entry %d", errRaftState, idx, st.lastIndex())
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
		r.dropPrewrites()
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
		return fmt.Errorf("%w: entry %d (term %d) is not one batch at offset %d of that epoch (%v)", errRaftState, idx, term, st.end, err)
	}
	end, err := r.part.AppendAssigned(data)
	if err != nil {
		return err
	}
	st.ents = append(st.ents, entryPos{base: st.end, term: term})
	st.end = end
	return nil
}

// resolveWaiters answers the acks=-1 proposals whose entries are
// committed (index <= commit): with their base offset when the committed
// entry is theirs (same term), NOT_LEADER_OR_FOLLOWER when another
// leader's entry took the index.
func (r *replica) resolveWaiters(commit uint64) {
	kept := r.waiters[:0]
	for _, w := range r.waiters {
		switch {
		case w.index > commit:
			kept = append(kept, w)
		case r.committed(w.index, w.term):
			w.reply(w.base, 0, nil)
		default:
			w.reply(-1, kerr.NotLeaderForPartition.Code, errors.New("broker: entry replaced by a new leader"))
		}
	}
	clear(r.waiters[len(kept):])
	r.waiters = kept
}

// failWaiters answers the waiting proposals at or after index with code.
func (r *replica) failWaiters(index uint64, code int16, err error) {
	kept := r.waiters[:0]
	for _, w := range r.waiters {
		if w.index >= index {
			w.reply(-1, code, err)
		} else {
			kept = append(kept, w)
		}
	}
	clear(r.waiters[len(kept):])
	r.waiters = kept
}

// maybeCleanup applies retention (cleanup.policy=delete) to the replica's
// log every cleanup interval: the oldest sealed segments whose newest
// record is older than the retention are dropped, but only up to the
// commit index, and the raft log is truncated with them (raftStorage.compact:
// the snapshot point moves first). Each replica decides for its own log,
// as raft nodes compact independently; a follower that then lags behind
// the leader's log start is sent a snapshot.
//
// With cleanup policy compact, a key compaction round follows
// (compactKeys, raftcompact.go).
func (r *replica) maybeCleanup() {
	c := r.c
	if c.cleanupInterval < 0 {
		return
	}
	now := time.Now()
	if now.Before(r.nextCleanup) {
		return
	}
	r.nextCleanup = now.Add(c.cleanupInterval)
	if c.retain && c.retention >= 0 && !isInternalTopic(r.topic) {
		r.retain(now)
	}
	r.compactKeys()
}

// retain applies retention once (see maybeCleanup).
func (r *replica) retain(now time.Time) {
	c := r.c
	infos := r.part.SegmentInfos()
	cut := int64(-1)
	limit := now.Add(-c.retention).UnixMilli()
	for i := 0; i+1 < len(infos); i++ {
		if infos[i].Active || infos[i].MaxTimestamp < 0 || infos[i].MaxTimestamp >= limit {
			break
		}
		cut = infos[i+1].BaseOffset
	}
	if cut <= r.part.LogStartOffset() || cut > r.part.HighWatermark() {
		return
	}
	if err := r.st.compact(cut); err != nil {
		r.log.Error("retention", "err", err)
		return
	}
	r.log.Info("retention truncated the raft log", "logStartOffset", r.part.LogStartOffset(), "snapshotIndex", r.st.snapIndex)
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

// proposeConf proposes a membership change. The leader writes the
// change's batch (raftConfChangeBatch) at the end of its log first, as it
// writes a produced batch (propose), so the batches proposed after it get
// the offsets after it; a follower forwards the change to the leader
// through raft. A change is dropped (the admin request proposes it again
// until it is applied) when there is no leader, or while the leader may
// still have an earlier change unapplied (one change at a time).
func (r *replica) proposeConf(cc *pb.ConfChangeV2) {
	bs := r.rn.BasicStatus()
	if r.failed.Load() {
		return
	}
	if bs.RaftState != raft.StateLeader {
		if bs.Lead != raft.None {
			if err := r.rn.ProposeConfChange(cc); err != nil {
				r.log.Debug("membership change not forwarded", "err", err)
			}
		}
		return
	}
	if int64(bs.GetTerm()) != int64(r.epoch) || r.st.applied < r.confBarrier {
		return
	}
	data, err := proto.Marshal(cc)
	if err != nil {
		r.log.Error("membership change does not encode", "err", err)
		return
	}
	expected := r.st.end
	if len(r.prewritten) > 0 {
		expected = r.prewriteEnd
	}
	if r.part.LogEndOffset() != expected {
		if err := r.part.TruncateTo(expected); err != nil {
			r.log.Error("membership change", "err", err)
			return
		}
	}
	b, err := raftConfChangeBatch(expected, bs.GetTerm(), data)
	if err != nil {
		r.log.Error("membership change", "err", err)
		return
	}
	next, err := r.part.AppendAssigned(b)
	if err != nil {
		r.log.Error("membership change not written", "err", err)
		return
	}
	idx := r.st.lastIndex() + r.unpersisted + 1
	if err := r.rn.ProposeConfChange(cc); err != nil {
		_ = r.part.TruncateTo(expected)
		r.log.Debug("membership change not proposed", "err", err)
		return
	}
	r.unpersisted++
	r.prewritten[idx] = prewrite{pos: entryPos{base: expected, term: bs.GetTerm()}, next: next, conf: true}
	r.prewriteEnd = next
	r.confBarrier = idx
	r.log.Info("proposed membership change", "index", idx, "change", confChangeString(cc))
}

// applyConfChanges applies the membership changes among committed entries
// that are not applied yet (a restart hands raft the entries after the
// last applied index recorded in the state file again): raft's tracker
// takes each, the new membership is written to the state file, and the
// node addresses a change carries are learnt (cluster.learn). Then every
// committed entry counts as applied.
func (r *replica) applyConfChanges(ents []*pb.Entry) error {
	for _, e := range ents {
		if e.GetIndex() <= r.st.applied || e.GetType() != pb.EntryConfChangeV2 {
			continue
		}
		cc := &pb.ConfChangeV2{}
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			return fmt.Errorf("%w: configuration change entry %d does not decode: %v", errRaftState, e.GetIndex(), err)
		}
		if len(cc.GetChanges()) == 0 && len(cc.GetContext()) == 0 {
			continue // never proposed here: raft's automatic leave of a joint configuration
		}
		r.c.learn(cc)
		cs := r.rn.ApplyConfChange(cc)
		if err := r.st.setConf(cs, e.GetIndex()); err != nil {
			return err
		}
		r.conf.Store(r.st.cs)
		r.c.membershipApplied(cc)
		r.log.Info("membership changed", "index", e.GetIndex(), "change", confChangeString(cc),
			"voters", cs.GetVoters(), "learners", cs.GetLearners())
		if bs := r.rn.BasicStatus(); bs.RaftState == raft.StateLeader && !slices.Contains(cs.GetVoters(), r.c.self) && len(cs.GetVoters()) > 0 {
			// A leader that removed itself steps down when the change
			// is applied (StepDownOnRemoval); if it still leads here,
			// hand the leadership to a voter at once rather than
			// waiting for an election timeout.
			r.rn.TransferLeader(cs.GetVoters()[0])
		}
	}
	if n := len(ents); n > 0 {
		r.st.applied = max(r.st.applied, ents[n-1].GetIndex())
	}
	return nil
}

// confChangeString describes a membership change for the log.
func confChangeString(cc *pb.ConfChangeV2) string {
	var out []string
	for _, ch := range cc.GetChanges() {
		out = append(out, fmt.Sprintf("%s %d", ch.GetType(), ch.GetNodeId()))
	}
	return strings.Join(out, ", ")
}
