// Command broker is a single-node Kafka broker built on partlog: it speaks the
// Kafka wire protocol on a loopback address and stores every topic-partition
// as a partlog Partition, in Apache Kafka's own directory layout and file
// formats.
//
//	go run ./examples/broker -addr 127.0.0.1:9092 -data /tmp/partlog-broker
//
// Point any Kafka client at it (kcat -b 127.0.0.1:9092, kafka-console-consumer
// --bootstrap-server 127.0.0.1:9092, franz-go's kgo.SeedBrokers). Topics are
// created on first use (Metadata with auto-creation, or Produce) with
// -partitions partitions each, in directories named "<topic>-<partition>"
// under -data, exactly as a Kafka broker names them; examples/dumplog prints
// them, and so can Kafka's kafka-dump-log.sh (same format).
//
// # What it implements
//
// The broker is one node (node id 0) that leads every partition. It answers:
//
//	API               versions  notes
//	ApiVersions       0-4       unsupported versions get a v0 UNSUPPORTED_VERSION answer
//	Metadata          0-12      auto-creates topics (v4+: when the request allows it)
//	Produce           0-9       one RecordBatch v2 per partition, via Partition.AppendBatchInfo
//	                            (v0-2: a legacy message set is converted to one first, as
//	                            Kafka 3.9 does); acks=-1 syncs the partition before
//	                            answering, acks=0 gets no answer
//	Fetch             0-12      whole batches from Partition.ReadFrom, sent with sendfile(2)
//	                            (a partition without records gets empty records, never null);
//	                            MaxBytes, PartitionMaxBytes, at least one batch,
//	                            MinBytes/MaxWaitMillis; no fetch sessions (session id 0);
//	                            isolation_level 1 (read_committed): see Transactions;
//	                            v0-3: converted down to legacy messages (magic 0 for v0-1,
//	                            magic 1 for v2-3; a compressed batch as one wrapper with
//	                            its codec; zstd: UNSUPPORTED_COMPRESSION_TYPE), as Kafka 3.9 does
//	ListOffsets       0-8       -2 earliest (the whole log's start, see Tiered storage),
//	                            -4 earliest local (v8), -1 latest, -3 max timestamp, or by timestamp
//	                            (read_committed: latest is the last stable offset); v0: the
//	                            old-style offsets list (max_num_offsets)
//	FindCoordinator   0-4       this node, for groups and transactional ids
//	OffsetCommit      0-8       stored in the __consumer_offsets-0 partition (Kafka's schema)
//	OffsetFetch       0-7       from the in-memory map rebuilt from __consumer_offsets at start
//	JoinGroup         0-9       consumer groups with any number of members; the leader assigns
//	SyncGroup         0-5
//	Heartbeat         0-4
//	LeaveGroup        0-5
//	DescribeGroups    0-5       state, protocol, members (client id, host; metadata when Stable)
//	ListGroups        0-5       states filter (v4+), types filter (v5+: every group is classic)
//	DeleteGroups      0-2       an empty group's offsets and metadata tombstoned;
//	                            offsets expire as offsets.retention.minutes (-offsets-retention),
//	                            in a Stable consumer group those of unsubscribed topics (KIP-211)
//	CreateTopics      0-7       partition count, replication factor 1, validate_only; the
//	                            cleanup configurations per topic (cleanup.policy, retention.ms,
//	                            ...), INVALID_CONFIG for others
//	DeleteTopics      0-6       the partitions removed with log.Dir.DeletePartition, the
//	                            groups' offsets of the topic tombstoned
//	InitProducerID    0-4       idempotent producers get an id, never reused (see Idempotent
//	                            producers); a transactional id goes to the transaction
//	                            coordinator (see Transactions)
//	AddPartitionsToTxn 0-3
//	AddOffsetsToTxn   0-3
//	EndTxn            0-3
//	TxnOffsetCommit   0-3
//	AddRaftVoter      0-1       cluster mode only: see Cluster mode
//	RemoveRaftVoter   0
//
// A request whose header or body does not decode, or whose API or version is not
// in the table (other than ApiVersions), makes the broker close the
// connection, as Kafka does. Bad data inside a well-formed request gets the
// Kafka error code for the partition it concerns: CORRUPT_MESSAGE for a batch
// that fails validation, INVALID_RECORD for a well-formed batch Kafka would
// refuse, MESSAGE_TOO_LARGE, OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION,
// INVALID_TOPIC_EXCEPTION, INVALID_REQUIRED_ACKS; nothing is written then.
//
// # Idempotent producers
//
// Produce answers a batch with a producer id as a Kafka 3.x/4.x leader does,
// from the checks of Partition.AppendBatchInfo: a retry of one of the
// producer's last five batches gets NONE with the original base offset and
// writes nothing (acks=-1 still syncs the partition, since the original may
// not be durable yet); a sequence gap, a stale sequence or a new epoch not
// starting at 0 gets OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch
// INVALID_PRODUCER_EPOCH; a non-transactional batch while the producer's
// transaction is open INVALID_TXN_STATE. A producer the partition does not
// know (new, expired, or its records deleted) is accepted at any sequence:
// since KIP-360 (Kafka 2.5) brokers no longer answer UNKNOWN_PRODUCER_ID
// on the produce path. The producer state survives restarts and crashes
// (the partitions' .snapshot files and their logs).
//
// InitProducerID hands out ids in blocks of 1000, as Kafka's
// ProducerIdManager does: before the first id of a block is returned, the
// block's end is written atomically (temporary file, fsync, rename,
// directory fsync) to partlog-broker-producer-ids in the data directory
// ("0\n<next id>\n"). A restart continues at the recorded end, skipping the
// rest of the last block, so no id is handed out twice; without the file
// (a directory an older broker wrote) it starts above every producer id the
// partitions know. A damaged file stops the broker from starting; a block
// that cannot be reserved gets COORDINATOR_LOAD_IN_PROGRESS, which clients
// retry.
//
// # Transactions
//
// The broker is the transaction coordinator of every transactional id, as
// Kafka's TransactionCoordinator (txncoord.go). Each id's state (producer
// id and epoch, timeout, status, the partitions of the open transaction,
// start and update times) is a record in the partition
// __transaction_state-0, created on start, in Kafka's TransactionLog schema
// (key version 0: the transactional id; value version 0; version 1 is read
// too), appended and synced before the request that changed it is
// answered, and replayed on start; the partition is compacted like
// __consumer_offsets.
//
// InitProducerID with a transactional id hands out a producer id at epoch
// 0 the first time, then bumps the epoch each time (a new producer id when
// the epoch is exhausted), which fences the previous instance: its
// requests get PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before KIP-588's
// versions). An open transaction of the id is aborted first, with the new
// epoch, so the old instance is fenced in every partition it wrote to.
// AddPartitionsToTxn and AddOffsetsToTxn (the group's offsets partition,
// __consumer_offsets-0) add partitions and start the transaction; Produce
// then writes transactional batches. TxnOffsetCommit (v3+: the member's
// generation is checked as for OffsetCommit) writes the offsets durably to
// __consumer_offsets-0 as a transactional batch of the producer; they stay
// invisible (OffsetFetch with require_stable gets UNSTABLE_OFFSET_COMMIT)
// until the transaction commits, and then replace the committed offset
// unless a plain OffsetCommit wrote a later one meanwhile. EndTxn writes PrepareCommit (or
// PrepareAbort), then a COMMIT (ABORT) marker with Partition.AppendMarker
// to every partition of the transaction, syncing each, then CompleteCommit
// (CompleteAbort), and answers; Kafka answers after the Prepare record and
// writes the markers behind the answer, so here a slow disk delays EndTxn
// instead of the producer's next AddPartitionsToTxn. A broker that stopped
// between Prepare and Complete writes the markers on start (again where
// they may already be: a marker for a producer with no open transaction
// only adds a control batch). A transaction open longer than its timeout
// (transaction.timeout.ms of the producer, at most 15 minutes) is aborted
// by a check every 10 seconds, with the epoch bumped, as Kafka fences a
// timed-out producer; the producer may still ask InitProducerID (v3+) with
// the epoch it had. The same check aborts hanging transactions: one open
// in a partition (Partition.OpenTransactions) for longer than the longest
// timeout allowed that no transactional id's open transaction covers (a
// batch that arrived after its EndTxn, or was sent without
// AddPartitionsToTxn), which would otherwise hold the partition's
// read_committed consumers forever; its ABORT marker carries the
// producer's epoch in that partition. In a data directory taken over from
// Kafka every __transaction_state-N is replayed (partition 0, where this
// broker writes, last).
//
// A Fetch at isolation_level 1 (read_committed) reads with
// Partition.ReadCommitted: nothing at or past the last stable offset (the
// first offset of the oldest transaction still open or whose marker is
// not below the high watermark, else the high watermark),
// and the aborted transactions overlapping what it returns, which the
// consumer skips; every Fetch answer carries the last stable offset.
// ListOffsets at read_committed answers the last stable offset for
// "latest" and finds no record at or past it for a timestamp.
//
// # Committed offsets
//
// OffsetCommit appends one record per committed partition to the partition
// __consumer_offsets-0 (created on start), and syncs it before answering.
// Records use Kafka's own schema, so Kafka's tools can decode them:
//
//	key   (version 1): int16 1, string group, string topic, int32 partition
//	value (version 3): int16 3, int64 offset, int32 leaderEpoch,
//	                   string metadata, int64 commitTimestamp
//
// (strings are int16 length + bytes). The latest record for a key wins; a
// null value deletes the commit. On start the broker replays the partition to
// rebuild its map of committed offsets; versions 0-3 of the value are read.
// In a data directory taken over from Kafka, every __consumer_offsets-N is
// replayed (partition 0, where this broker writes, last).
// The partition is compacted in the background (see Cleanup): commits
// superseded by a later one for the same key are removed once the dirty ratio
// passes min.cleanable.dirty.ratio (0.5), as Kafka does, so it does not grow
// without bound. Offsets are never renumbered.
//
// # Cleanup
//
// Every -cleanup-interval the broker applies partlog's cleanup policies
// (package compaction) beside the traffic: key compaction to
// __consumer_offsets and __transaction_state (their segments roll at 100
// MiB, Kafka's offsets.topic.segment.bytes and
// transaction.state.log.segment.bytes, so the compactor gets sealed
// segments), and
// -cleanup-policy to every other topic: "delete" (retention by -retention,
// Kafka's 7 days by default, whole sealed segments only), "compact", or both.
// The data directory is a Kafka log directory (plog.Dir): Kafka's checkpoints
// at its root, the clean-shutdown marker and .lock; when a partition is
// opened, what a crash left of a compaction is finished or undone.
//
// # Tiered storage
//
// With -remote-dir (a directory, such as a network file system's mount)
// or -remote-s3-endpoint (an S3 bucket, through log/s3remote) the data
// directory is tiered (plog.DirConfig.Remote, tiering.go): every
// -remote-interval the sealed segments of the user topics are copied to
// the store, and copied segments past -local-retention-ms or
// -local-retention-bytes are deleted locally; copies past -retention are
// deleted from the store. Fetch below the local log start is served from
// the copies (Partition.ReadFrom), so a consumer reads a topic from offset
// 0 after local retention deleted its first segments. As in Kafka, the log
// start offset of Fetch, Produce and ListOffsets earliest (-2) answers is
// the whole log's, remote copies included; ListOffsets earliest local (-4,
// v8) answers the local one. A topic created with
// remote.storage.enable=false, or with its own retention.ms or
// retention.bytes, stays local; the internal topics are never tiered, and
// neither cluster mode nor a compacting -cleanup-policy tiers.
//
// # Connections and topics
//
// As Kafka's broker: a connection on which nothing arrives for -idle-timeout
// (connections.max.idle.ms, 10 minutes) is closed, also in the middle of a
// request; a request larger than -max-request-bytes (socket.request.max.bytes,
// 100 MiB) closes the connection; request bytes are buffered as they arrive
// (never allocated from the announced size), each connection's first 64 KiB
// freely and the rest from a budget all connections share,
// -queued-max-request-bytes (queued.max.request.bytes; 256 MiB here, where
// Kafka's default is unbounded): a connection whose request does not fit
// waits for memory and is closed when none frees within the idle timeout; a
// connection beyond -max-connections (max.connections) is closed at once;
// accept errors (EMFILE, ...) are retried with a backoff from 5 ms to 1 s.
// Each cut-off connection is logged with the reason.
//
// Topics are created on first use unless -auto-create-topics=false, at most
// -max-auto-create (16) per request; the others get
// UNKNOWN_TOPIC_OR_PARTITION and are created when the client asks again.
// Every partition's active segment preallocates its two indexes to
// -segment-index-bytes (1 MiB; Kafka's segment.index.bytes is 10 MiB, but
// Kafka's preallocated files are sparse while partlog reserves their disk
// blocks, so an idle partition costs 2 MiB of disk rather than 20 MiB).
//
// # Cluster mode
//
// With -node and -cluster (id=kafka-address/raft-address for every node,
// comma-separated) the broker is one node of a cluster, and every
// partition of every topic is a raft group of all nodes
// (go.etcd.io/raft/v3). The raft log is the partition's own log: one batch
// per raft entry, the raft term in the batches' partitionLeaderEpoch, the
// commit index as high watermark. Metadata names each partition's raft
// leader, the other nodes answer NOT_LEADER_OR_FOLLOWER to Produce, Fetch
// and ListOffsets; acks=-1 is answered once the batch is committed (synced
// on a majority). Retention truncates the raft log with the partition; a
// node behind the leader's log start gets a snapshot (with the leader's
// producer state) and restarts its log there. The group coordinator is the
// leader of __consumer_offsets-0 and the transaction coordinator the
// leader of __transaction_state-0 (coordstate.go): their state is
// rebuilt from the replicated partition by each new leader, their writes
// are answered after the raft commit, and transaction markers are written
// through each partition's raft leader. Membership changes go through raft
// (membership.go): a new node starts with -join and copies the partitions;
// AddRaftVoter and RemoveRaftVoter (KIP-853's requests, API keys 80 and
// 81), sent to any node by the same command in client mode (-add-voter
// id=kafka-addr/raft-addr, -remove-voter id, -bootstrap addr), make a node
// a voter of every partition, or not, one raft configuration change
// (ConfChangeV2) per partition, answered once the asked node applied it
// everywhere. A storage read error raft meets in a partition takes that
// partition offline on the node (KAFKA_STORAGE_ERROR), not the node.
// -cleanup-policy compact compacts each replica below its raft snapshot
// point, moved first to where the round cleans (raftcompact.go);
// snapshots carry the compacted records. __consumer_offsets and
// __transaction_state are always compacted that way (never expired by
// retention), whatever -cleanup-policy says. See docs/replication.md.
//
// # Limits
//
// No ACLs, SASL or TLS, no fetch sessions, no topic deletion or admin
// APIs (but AddRaftVoter and RemoveRaftVoter in cluster mode).
// Transactional ids never expire (transactional.id.expiration.ms), and
// KIP-890's server-side checks (Produce v11+, EndTxn v5+) are not offered.
// One mutex serializes the transaction coordinator, its disk writes
// included. It listens on loopback only unless -allow-remote is
// given: it has no authentication at all.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.Addr, "addr", "127.0.0.1:9092", "address to listen on (loopback only unless -allow-remote)")
	flag.StringVar(&cfg.DataDir, "data", "", "directory holding one sub-directory per topic-partition (required)")
	flag.IntVar(&cfg.Partitions, "partitions", 1, "number of partitions of an auto-created topic")
	flag.BoolVar(&cfg.AllowRemote, "allow-remote", false, "allow a non-loopback listen address (the broker has no authentication)")
	flag.StringVar(&cfg.Advertise, "advertise", "", "host:port clients should connect to (default: the listen address)")
	flag.Int64Var(&cfg.SegmentBytes, "segment-bytes", 0, "segment.bytes of every partition (default Kafka's 1 GiB)")
	flag.StringVar(&cfg.CleanupPolicy, "cleanup-policy", "delete", "cleanup.policy of the topics: delete, compact or compact,delete")
	flag.DurationVar(&cfg.Retention, "retention", 7*24*time.Hour, "retention.ms of the topics (negative: unlimited)")
	flag.DurationVar(&cfg.CleanupInterval, "cleanup-interval", time.Minute, "how often retention and compaction run (negative: never)")
	flag.DurationVar(&cfg.IdleTimeout, "idle-timeout", defaultIdleTimeout, "connections.max.idle.ms: close a connection on which nothing arrived for this long (negative: never)")
	maxReq := flag.Int("max-request-bytes", defaultMaxRequestBytes, "socket.request.max.bytes: the largest request a client may send")
	flag.Int64Var(&cfg.QueuedMaxRequestBytes, "queued-max-request-bytes", defaultQueuedMaxRequestBytes, "queued.max.request.bytes: request bytes all connections may buffer together (beyond 64 KiB each)")
	flag.IntVar(&cfg.MaxConnections, "max-connections", defaultMaxConnections, "max.connections: connections beyond it are closed at once")
	autoCreate := flag.Bool("auto-create-topics", true, "auto.create.topics.enable: create topics on first use (Metadata, Produce)")
	flag.IntVar(&cfg.MaxAutoCreatePerRequest, "max-auto-create", defaultMaxAutoCreatePerRequest, "topics one request may create")
	groupVersion := flag.Int("group-metadata-version", defaultGroupValueVersion, "GroupMetadataValue version of the group records in __consumer_offsets: 3 as Kafka 2.3+ writes, 2 as 2.1-2.2, 1 as 0.10.1-2.0 (what tools such as Burrow 1.2.1 read)")
	flag.DurationVar(&cfg.OffsetsRetention, "offsets-retention", defaultOffsetsRetention, "offsets.retention.minutes: delete an empty group's committed offsets this long after it became empty (negative: never)")
	flag.IntVar(&cfg.SegmentIndexBytes, "segment-index-bytes", defaultSegmentIndexBytes, "segment.index.bytes: size of each active segment's two preallocated indexes")
	var rf remoteFlags // tiering.go
	flag.StringVar(&rf.dir, "remote-dir", "", "tiered storage in this directory (a mounted network file system, say): sealed segments are copied there and read back below the local log start")
	flag.StringVar(&rf.s3Endpoint, "remote-s3-endpoint", "", "tiered storage in an S3 bucket: the store's host:port")
	flag.StringVar(&rf.s3Bucket, "remote-s3-bucket", "partlog", "-remote-s3-endpoint's bucket (created when missing)")
	flag.StringVar(&rf.s3Prefix, "remote-s3-prefix", "", "-remote-s3-endpoint's prefix of every object key")
	flag.StringVar(&rf.s3Region, "remote-s3-region", "", "-remote-s3-endpoint's region (default us-east-1)")
	flag.BoolVar(&rf.s3Secure, "remote-s3-secure", false, "-remote-s3-endpoint speaks HTTPS")
	flag.StringVar(&rf.s3AccessKey, "remote-s3-access-key", os.Getenv("AWS_ACCESS_KEY_ID"), "-remote-s3-endpoint's access key id (default $AWS_ACCESS_KEY_ID)")
	flag.StringVar(&rf.s3SecretKey, "remote-s3-secret-key", "", "-remote-s3-endpoint's secret key (default $AWS_SECRET_ACCESS_KEY, which keeps it out of the process list)")
	flag.Int64Var(&cfg.LocalRetentionMs, "local-retention-ms", 0, "local.retention.ms of the tiered topics: copied segments whose newest record is older are deleted locally (0: no bound)")
	flag.Int64Var(&cfg.LocalRetentionBytes, "local-retention-bytes", 0, "local.retention.bytes of the tiered topics: copied segments are deleted locally while the rest holds at least this much (0: no bound)")
	flag.DurationVar(&cfg.RemoteInterval, "remote-interval", 30*time.Second, "remote.log.manager.task.interval.ms: how often each tiered partition is copied and its retention applied")
	nodeID := flag.Uint64("node", 0, "cluster mode: this node's id in -cluster")
	clusterSpec := flag.String("cluster", "", "cluster mode: id=kafka-addr/raft-addr,... for every node (replicates through raft)")
	flag.BoolVar(&cfg.Join, "join", false, "cluster mode: this node is new; it copies the partitions until -add-voter adds it")
	addVoter := flag.String("add-voter", "", "client mode: ask the cluster node at -bootstrap to add node id=kafka-addr/raft-addr to every partition")
	removeVoter := flag.Uint64("remove-voter", 0, "client mode: ask the cluster node at -bootstrap to remove node id from every partition")
	bootstrap := flag.String("bootstrap", "127.0.0.1:9092", "client mode: the Kafka address of a cluster node")
	verbose := flag.Bool("v", false, "log every request")
	flag.Parse()
	if *addVoter != "" || *removeVoter != 0 {
		if *addVoter != "" && *removeVoter != 0 {
			fmt.Fprintln(os.Stderr, "broker: -add-voter and -remove-voter are one change each")
			os.Exit(2)
		}
		if err := runAdmin(context.Background(), *bootstrap, *addVoter, *removeVoter, os.Stdout); err != nil { // membership.go
			fmt.Fprintln(os.Stderr, "broker:", err)
			os.Exit(1)
		}
		return
	}
	cfg.DisableAutoCreate = !*autoCreate
	if *maxReq < 8 || *maxReq > math.MaxInt32 {
		fmt.Fprintln(os.Stderr, "broker: -max-request-bytes must be in [8, 2147483647]")
		os.Exit(2)
	}
	cfg.MaxRequestBytes = int32(*maxReq)
	if *groupVersion < 1 || *groupVersion > maxGroupValueVersion {
		fmt.Fprintf(os.Stderr, "broker: -group-metadata-version %d: want 1-%d\n", *groupVersion, maxGroupValueVersion)
		os.Exit(2)
	}
	cfg.GroupMetadataVersion = int16(*groupVersion)
	if cfg.DataDir == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: broker -data DIR [-addr 127.0.0.1:9092] [-partitions N] [-allow-remote]")
		os.Exit(2)
	}
	if *clusterSpec != "" {
		nodes, err := parseCluster(*clusterSpec)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		cfg.NodeID, cfg.Cluster = *nodeID, nodes
	}
	if rf.s3SecretKey == "" {
		rf.s3SecretKey = os.Getenv("AWS_SECRET_ACCESS_KEY")
	}
	remote, err := rf.storage()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg.RemoteStorage = remote
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ensureBucket(ctx, remote, cfg.Logger)
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "broker:", err)
		os.Exit(1)
	}
}
