// Package raftlog replicates a partition: it makes a log.Partition the log
// of an etcd raft group (go.etcd.io/raft/v3), so that several nodes hold
// the same records and a batch acknowledged to a producer survives the
// loss of any minority of them. There is no second copy of the data: every
// raft entry is one batch of the partition, and the partition's high
// watermark is the raft commit point.
//
// A program opens its partitions as usual (with
// log.Config.DisableAutoHighWatermark and StampLeaderEpoch), creates one
// Node per process with a Transport of its own that carries raft messages
// to the other nodes (and hands the ones it receives to Node.Receive), and
// starts a Replica per partition with the same group name and membership
// on every node. It proposes batches to the replica that leads
// (Replica.Propose, Replica.Submit), and reads any node's partition below
// its high watermark as it reads any partition.
//
// Storage is raft.Storage over the partition, for a program that drives
// raft itself; Node runs the raft loop for it: ticks, proposals, and each
// Ready handled in the order raft requires (a snapshot installed, the
// entries appended and synced, the hard state written, and only then the
// messages sent and the high watermark moved). A snapshot carries the
// producer state at its point, and the compacted records below it for a
// key-compacted partition, so idempotent producers and transactions stay
// exact on a follower that catches up from one.
//
// docs/replication.md in the repository says what the acknowledgements,
// the high watermark, membership changes and snapshots mean for a user,
// and what the package does not do. This package is a module of its own:
// a program that imports only the partlog library never gets etcd raft.
package raftlog
