package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/raftlog"
)

// raftStateDir is the directory, under -data, holding one raft state file
// per replicated partition ("<topic>-<partition>.state", raftlog's
// StateDir) and the cluster's members file. It is not a valid
// "<topic>-<partition>" name, so the partlog Dir leaves it alone.
const raftStateDir = "partlog-raft"

// readFunc is how a replica reads its partition (cfg.wrapRaftRead wraps
// it in tests).
type readFunc = raftlog.ReadFunc

// raftTick is the replicas' raft tick: a heartbeat every tick, an
// election after 10 to 20 ticks without hearing from a leader.
const raftTick = 50 * time.Millisecond

// proposal is one produced batch (or a coordinator's write) waiting for
// its replica, and then for its answer.
type proposal struct {
	records []byte
	acks    int16
	res     chan proposeResult // buffered: never blocks its sender
	// marker, when set, is a transaction marker to write instead of
	// records (coordstate.go).
	marker *batch.TxnMarker
	// inTerm, when not 0, is the only raft term the proposal may be
	// appended in: the coordinators' writes (coordstate.go) are made from
	// state loaded in that term.
	inTerm uint64
}

// proposeResult is the answer to a proposal: the batch's base offset, or
// a Kafka error code with the error.
type proposeResult struct {
	base int64
	code int16
	err  error
}

// reply answers a proposal.
func (p *proposal) reply(base int64, code int16, err error) {
	p.res <- proposeResult{base: base, code: code, err: err}
}

// Readers of a replica's state (Load, as the atomics they replace).
type (
	loadID   func() uint64
	loadBool func() bool
	loadConf func() *pb.ConfState
)

// Load returns the value.
func (f loadID) Load() uint64 { return f() }

// Load returns the value.
func (f loadBool) Load() bool { return f() }

// Load returns the value.
func (f loadConf) Load() *pb.ConfState { return f() }

// replica is one partition's member of its raft group: raftlog's Replica
// (which owns the partition's writes and the raft loop), with the
// broker's side: Kafka's error codes, the produce and membership queues
// the handlers use, and the partition's retention and key compaction
// every cleanup interval.
type replica struct {
	c         *cluster
	topic     string
	partition int32
	part      *plog.Partition
	rr        *raftlog.Replica
	log       *slog.Logger

	propc chan *proposal
	confc chan *pb.ConfChangeV2 // membership changes to propose (membership.go)
	done  chan struct{}

	// lead is the raft id of the leader this node knows (0: none); term
	// its raft term; failed whether a storage error took the partition
	// offline here; ready the term this node leads in once the first
	// entry of that term is committed, else 0; conf the membership it
	// applied last.
	lead   loadID
	term   loadID
	ready  loadID
	failed loadBool
	conf   loadConf
}

// newReplica wraps the started raftlog replica of a partition.
func newReplica(c *cluster, topic string, partition int32, part *plog.Partition, rr *raftlog.Replica) *replica {
	return &replica{
		c: c, topic: topic, partition: partition, part: part, rr: rr,
		log:    c.log.With("topic", topic, "partition", partition),
		propc:  make(chan *proposal, 1024),
		confc:  make(chan *pb.ConfChangeV2, 16),
		done:   make(chan struct{}),
		lead:   func() uint64 { return rr.Leader() },
		term:   func() uint64 { return rr.Term() },
		ready:  func() uint64 { return rr.ReadyTerm() },
		failed: func() bool { return rr.Err() != nil },
		conf: func() *pb.ConfState {
			m := rr.Membership()
			return &pb.ConfState{Voters: m.Voters, Learners: m.Learners}
		},
	}
}

// run hands the queued proposals and membership changes to the raftlog
// replica, in order, and applies the cleanup policy every cleanup
// interval, until ctx ends or the raftlog replica stops (a storage error
// took the partition offline on this node: Produce then gets
// KAFKA_STORAGE_ERROR, Metadata names this node as an offline replica,
// while the other nodes elect a leader among themselves). Each proposal's answer is awaited on a
// goroutine of its own, so acks=1 answers do not wait behind acks=-1
// ones.
func (r *replica) run(ctx context.Context) {
	defer close(r.done)
	var first, tick <-chan time.Time
	if r.c.cleanupInterval > 0 {
		t := time.NewTicker(r.c.cleanupInterval)
		defer t.Stop()
		tick = t.C
		first = time.After(raftTick) // then every interval
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.rr.Stopped():
			return
		case p := <-r.propc:
			r.propose(ctx, p)
		case cc := <-r.confc:
			r.rr.ProposeConfChange(cc)
		case <-first:
			r.cleanup(ctx)
		case <-tick:
			r.cleanup(ctx)
		}
	}
}

// propose submits p and answers it once raftlog does.
func (r *replica) propose(ctx context.Context, p *proposal) {
	opts := raftlog.ProposeOptions{Acks: raftlog.AcksLeader, InTerm: p.inTerm}
	if p.acks == -1 {
		opts.Acks = raftlog.AcksAll
	}
	res, err := r.rr.Submit(ctx, raftlog.Proposal{Records: p.records, Marker: p.marker, Options: opts})
	if err != nil {
		p.reply(-1, kerr.NotLeaderForPartition.Code, err)
		return
	}
	r.c.wg.Go(func() {
		select {
		case a := <-res:
			if a.Err != nil {
				p.reply(-1, proposeErrorCode(a.Err, p.records), a.Err)
				return
			}
			p.reply(a.Base, 0, nil)
		case <-ctx.Done():
			p.reply(-1, kerr.NotLeaderForPartition.Code, errors.New("broker: shutting down"))
		}
	})
}

// proposeErrorCode is the Kafka error code of a failed proposal: a
// leadership change (an outcome it left unknown too) or a stopped replica
// is NOT_LEADER_OR_FOLLOWER (the client finds the leader again); the
// partition's refusal of the batch, or a storage error, is the code a
// one-node produce gets (appendErrorCode).
func proposeErrorCode(err error, records []byte) int16 {
	if errors.Is(err, raftlog.ErrNotLeader) || errors.Is(err, raftlog.ErrReplaced) || errors.Is(err, raftlog.ErrStopped) || errors.Is(err, raftlog.ErrOutcomeUnknown) {
		return kerr.NotLeaderForPartition.Code
	}
	return appendErrorCode(err, records)
}

// cleanup applies retention (cleanup.policy=delete) to the replica's log:
// the oldest sealed segments whose newest record is older than the
// retention are dropped, but only up to the high watermark, and the raft
// log is truncated with them (raftlog's Retain: the snapshot point moves
// first). Each replica decides for its own log, as raft nodes compact
// independently; a follower that then lags behind the leader's log start
// is sent a snapshot. With cleanup policy compact, a key compaction round
// follows (compactKeys, raftcompact.go). The internal topics are never
// expired.
func (r *replica) cleanup(ctx context.Context) {
	c := r.c
	if c.retain && c.retention >= 0 && !isInternalTopic(r.topic) {
		r.retainOnce(ctx, time.Now())
	}
	r.compactKeys(ctx)
}

// retainOnce applies retention once (see cleanup).
func (r *replica) retainOnce(ctx context.Context, now time.Time) {
	infos := r.part.SegmentInfos()
	cut := int64(-1)
	limit := now.Add(-r.c.retention).UnixMilli()
	for i := 0; i+1 < len(infos); i++ {
		if infos[i].Active || infos[i].MaxTimestamp < 0 || infos[i].MaxTimestamp >= limit {
			break
		}
		cut = infos[i+1].BaseOffset
	}
	if cut <= r.part.LogStartOffset() || cut > r.part.HighWatermark() {
		return
	}
	if err := r.rr.Retain(ctx, cut); err != nil {
		r.log.Error("retention", "err", err)
		return
	}
	r.log.Info("retention truncated the raft log", "logStartOffset", r.part.LogStartOffset())
}
