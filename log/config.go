package log

import (
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/segment"
)

// Kafka's defaults for the topic configs a Partition honours.
const (
	// defaultSegmentBytes is segment.bytes: 1 GiB.
	defaultSegmentBytes = 1 << 30
	// defaultSegmentIndexBytes is segment.index.bytes: 10 MiB.
	defaultSegmentIndexBytes = 10 << 20
	// defaultIndexIntervalBytes is index.interval.bytes: 4096.
	defaultIndexIntervalBytes = 4096
	// defaultSegmentTime is segment.ms: 7 days.
	defaultSegmentTime = 7 * 24 * time.Hour
	// defaultMaxMessageBytes is max.message.bytes: 1 MiB + 12 bytes of log
	// overhead = 1,048,588.
	defaultMaxMessageBytes = 1<<20 + batch.LogOverhead
	// defaultMessageTimestampAfterMax is message.timestamp.after.max.ms:
	// 1 hour, Kafka 4's default (Kafka 3.6 to 3.9 had no limit).
	defaultMessageTimestampAfterMax = time.Hour
)

// NoTimestampLimit, as Config.MessageTimestampBeforeMax or
// Config.MessageTimestampAfterMax, accepts a record timestamp however far
// it is from the clock: Kafka's Long.MaxValue, the default of
// message.timestamp.before.max.ms. A negative value means the same.
const NoTimestampLimit time.Duration = math.MaxInt64

// Config configures a Partition. The zero value is Kafka's defaults; every
// zero field means "the default", which Open fills in. Field names follow
// Kafka's topic configs, named beside each field.
type Config struct {
	// SegmentBytes is segment.bytes: the size at which the active segment
	// is rolled (a new one starts when the next batch would not fit).
	// Default 1 GiB; at most math.MaxInt32 (batch positions are int32 in
	// the offset index) and at least batch.HeaderSize.
	SegmentBytes int64

	// SegmentIndexBytes is segment.index.bytes: the preallocated size of
	// each segment's .index and .timeindex; a full index rolls the
	// segment. Default 10 MiB (1,310,720 offset entries); at most
	// index.MaxFileBytes (math.MaxInt32, the largest index file).
	SegmentIndexBytes int

	// IndexIntervalBytes is index.interval.bytes: an offset index entry
	// (and a time index entry) is added once more than this many bytes were
	// appended since the last one. Default 4096. Kafka allows 0 ("index
	// every batch"); here 0 means the default, so pass 1 for that.
	IndexIntervalBytes int

	// SegmentTime is segment.ms: the active segment is rolled once the
	// incoming batch's max timestamp is this much later than the segment's
	// first batch's (wall clock since the segment was created when it has
	// no timestamps). Default 7 days. A negative value never rolls by time
	// (an extension; Kafka requires at least 1 ms).
	SegmentTime time.Duration

	// SegmentJitter is segment.jitter.ms: each segment's time limit is
	// SegmentTime minus a random jitter in [0, min(SegmentJitter,
	// SegmentTime)), drawn when the segment becomes active, so partitions
	// created together do not all roll at once. Default 0.
	SegmentJitter time.Duration

	// MaxMessageBytes is max.message.bytes: the largest batch AppendBatch
	// accepts, in bytes including the 12-byte log overhead. Default
	// 1,048,588. AppendAssigned does not apply it (as Kafka's follower
	// path), only SegmentBytes.
	MaxMessageBytes int

	// StampLeaderEpoch makes AppendBatch write the partition leader epoch
	// (LeaderEpoch, then whatever SetLeaderEpoch set) into each batch's
	// partitionLeaderEpoch field, as a Kafka leader does. Off, AppendBatch
	// writes -1 (batch.NoPartitionLeaderEpoch) there, whatever the
	// producer sent, so that no producer's value reaches the leader epoch
	// cache. AppendAssigned never rewrites it.
	StampLeaderEpoch bool

	// LeaderEpoch is the initial leader epoch stamped when
	// StampLeaderEpoch is set. Default 0.
	LeaderEpoch int32

	// LogAppendTime is message.timestamp.type=LogAppendTime: AppendBatch
	// stamps every batch with the append time (Now, in milliseconds): it
	// sets the batch's timestamp-type bit and maxTimestamp to that time
	// (recomputing the CRC), and every record then reads as that time, as
	// on a Kafka topic so configured. Off (the default, CreateTime), the
	// records keep the producer's timestamps, and maxTimestamp is set to
	// the largest of them when the producer's value is wrong. Either way a
	// producer batch with the LogAppendTime bit already set is refused
	// (ErrInvalidBatchTimestamp), as Kafka refuses it. AppendAssigned
	// stores batches as given.
	LogAppendTime bool

	// MessageTimestampBeforeMax is message.timestamp.before.max.ms (KIP-937,
	// Kafka 3.6+): on a CreateTime partition, AppendBatch refuses a batch
	// with a record timestamp more than this much before Now
	// (ErrInvalidBatchTimestamp). Records without a timestamp (-1) are
	// exempt. Default (0) and any negative value: NoTimestampLimit, Kafka's
	// default. Kafka counts milliseconds and allows 0; here the smallest
	// limit is 1 ms (0 means the default).
	MessageTimestampBeforeMax time.Duration

	// MessageTimestampAfterMax is message.timestamp.after.max.ms (KIP-937):
	// AppendBatch refuses a batch with a record timestamp more than this
	// much after Now. Default 1 hour (as
	// in Kafka 4); NoTimestampLimit or any negative value: no limit (Kafka
	// 3.6 to 3.9's default).
	MessageTimestampAfterMax time.Duration

	// DisableAutoHighWatermark stops the partition from advancing its high
	// watermark to the log end offset after every append (the single-node
	// default). An embedder that replicates sets it and calls
	// SetHighWatermark when followers have caught up; ReadFrom then returns
	// nothing at or past that mark, and followers read with
	// ReadFromFollower. After Open the high watermark starts at the offset
	// the replication-offset-checkpoint file holds (Sync and Close write
	// it), clamped to [log start, log end], or at the log start offset
	// without one.
	DisableAutoHighWatermark bool

	// DisableMmap makes segments read with ReadAt instead of a read-only
	// mapping (Records.Bytes then copies into a buffer the Records owns).
	DisableMmap bool

	// FlushMessages is flush.messages: the partition fsyncs its data once
	// this many records were appended since the last flush. 0 (the
	// default, Kafka's Long.MaxValue) never flushes because of a count;
	// Kafka then relies on replication and flushes only on roll, Sync and
	// Close.
	//
	// 1 is the per-append durability policy: AppendBatch and
	// AppendAssigned return only after an fdatasync of the .log covers the
	// batch (group commit: concurrent appenders share one fdatasync), and
	// the automatic high watermark only covers synced batches. N > 1 makes
	// the append that crosses N records run a full flush before it
	// returns (the appends before it are not waited for: they were
	// acknowledged unsynced). See the package documentation, "Durability".
	FlushMessages int64

	// WriteBehind lets an append return before its batch is written to
	// the .log. AppendBatch and AppendBuilder copy a batch that needs no
	// roll into the partition's write buffer and return; the buffer is
	// written with one write once it holds 16 KiB, whenever a call needs
	// the log as appended (a read, Wait, LogEndOffset, HighWatermark,
	// Sync, a roll, TruncateTo, Close...), and at the latest WriteBehind
	// after the first batch it buffered (the buffer is then released). A
	// batch of 16 KiB or more is written by its own append, as without
	// WriteBehind, and so is a batch that starts a segment or a leader
	// epoch or needs a roll (after the buffer). A stream of small appends
	// then costs a memory copy each instead of a system call, as long as
	// no other goroutine observes the log meanwhile: a consumer tailing
	// it (ReadFrom, Wait, HighWatermark...) writes the buffer at each look.
	//
	// It gives up one guarantee. Without it every acknowledged append has
	// reached the operating system before it returns, so a crash of the
	// process (kill -9) loses nothing a crash of the machine would not.
	// With it a crash of the process loses what the buffer holds (less
	// than 16 KiB, buffered at most WriteBehind ago), and a failed write
	// of the buffer (a full disk, an I/O error) fails the partition
	// (ErrFailed) with acknowledged batches in it. An idempotent producer
	// whose acknowledged batches a crash took then gets
	// ErrOutOfOrderSequence for its next one, as after a Kafka leader
	// lost them. The log is
	// still a prefix of what was appended, and Sync still makes every
	// acknowledged batch durable. A goroutine already waiting in Wait,
	// WaitFollower or Poll when an append returns sees its batch when the
	// buffer is written.
	//
	// AppendAssigned and AppendMarker write at once, and WriteBehind has
	// no effect under FlushMessages 1 (an append waits for its fdatasync
	// anyway). 0 (the default): off. Negative: ErrInvalidConfig. Not a
	// Kafka setting (a Kafka producer buffers in the client, linger.ms).
	WriteBehind time.Duration

	// FlushInterval is flush.ms: a background goroutine flushes the
	// partition this often (it stops on Close). 0 (the default, Kafka's
	// Long.MaxValue) never flushes because of time.
	FlushInterval time.Duration

	// Recovery decides what Open does with invalid data it finds while
	// recovering after an unclean shutdown (a torn tail, a corrupt batch,
	// a malformed checkpoint). Default: DefaultRecovery, which cuts the
	// log at the first invalid batch, as Kafka does, and logs what it cut.
	// StrictRecovery refuses to open instead.
	Recovery RecoveryPolicy

	// Logger receives the partition's rare events (rolls, recovery,
	// deletions). Default: the warnings and errors (what recovery cut,
	// damaged files, failures) go to slog.Default() as it is when Open
	// runs, which a program that never set one prints to standard error;
	// Info and below go nowhere. slog.New(slog.DiscardHandler) silences
	// the partition; Stats().Recovery says what Open's recovery did either
	// way.
	Logger *slog.Logger

	// FS is the filesystem every file goes through (package index/vfs,
	// the interface every package of partlog takes). Default (nil): the
	// operating system's. Tests pass an in-memory filesystem or a fault
	// injector.
	FS vfs.FS

	// Now is the wall clock, used for time-based rolls of segments without
	// timestamps, for LogAppendTime, for the timestamp limits of AppendBatch
	// and for producer expiry. Default time.Now; tests pass a
	// fake clock.
	Now func() time.Time

	// ProducerIDExpiration is producer.id.expiration.ms: a producer whose
	// last batch's max timestamp is this much older than Now, and that has
	// no open transaction, is forgotten from that moment (its retries are
	// then no longer recognised, and it may start again at any sequence),
	// as Kafka's expiry timer would have done. Default 1 day; below 1 ms
	// is ErrInvalidConfig, as Kafka's setting counts whole milliseconds.
	ProducerIDExpiration time.Duration
	// MaxOpenSegments bounds the sealed segments of a Partition opened
	// alone that keep their files open while no one reads them: the least
	// recently used are closed, and reopened when read (see "Open files
	// and mappings" in the package documentation); so is the last segment
	// until the first write after Open. Each open segment holds up to three
	// descriptors and three mappings. 0 (the default) keeps
	// every segment open, as Kafka does. A Dir ignores it and shares
	// DirConfig.MaxOpenSegments among its partitions. Not a Kafka setting.
	MaxOpenSegments int
	// TruncateWait bounds how long TruncateTo waits for readers that hold
	// Records on the segment it cuts (every writer waits for the
	// truncation meanwhile, and so do new reads of that segment); when it
	// elapses TruncateTo changes nothing and returns ErrTruncationBlocked.
	// Default 30 seconds. Not a Kafka setting.
	TruncateWait time.Duration

	// manualRollFlush leaves the flush a roll schedules in the background
	// to the caller (flushRolled): tests set it (export_test.go) to walk
	// the filesystem operations in a fixed order.
	manualRollFlush bool

	// wallClock is set by ensureDefaults when it made Now time.Now: the
	// clock a batch.Builder stamps records with (stampTimes).
	wallClock bool
}

// ensureDefaults replaces every zero field with Kafka's default and returns
// c, so that `cfg.ensureDefaults()` is all a caller needs.
func (c *Config) ensureDefaults() *Config {
	if c.SegmentBytes == 0 {
		c.SegmentBytes = defaultSegmentBytes
	}
	if c.SegmentIndexBytes == 0 {
		c.SegmentIndexBytes = defaultSegmentIndexBytes
	}
	if c.IndexIntervalBytes == 0 {
		c.IndexIntervalBytes = defaultIndexIntervalBytes
	}
	if c.SegmentTime == 0 {
		c.SegmentTime = defaultSegmentTime
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = defaultMaxMessageBytes
	}
	if c.MessageTimestampBeforeMax == 0 {
		c.MessageTimestampBeforeMax = NoTimestampLimit
	}
	if c.MessageTimestampAfterMax == 0 {
		c.MessageTimestampAfterMax = defaultMessageTimestampAfterMax
	}
	if c.Logger == nil {
		c.Logger = defaultLogger()
	}
	if c.Recovery == nil {
		c.Recovery = DefaultRecovery{}
	}
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.Now == nil {
		c.Now, c.wallClock = time.Now, true
	}
	if c.ProducerIDExpiration == 0 {
		c.ProducerIDExpiration = defaultProducerIDExpiration
	}
	if c.TruncateWait == 0 {
		c.TruncateWait = defaultTruncateWait
	}
	return c
}

// validate reports a configuration Kafka (or the format) would refuse.
// REQUIRES: ensureDefaults was called.
func (c *Config) validate() error {
	switch {
	case c.SegmentBytes < batch.HeaderSize || c.SegmentBytes > math.MaxInt32:
		return fmt.Errorf("%w: segment.bytes %d outside [%d, %d]", ErrInvalidConfig, c.SegmentBytes, batch.HeaderSize, math.MaxInt32)
	case c.SegmentIndexBytes < 2*segmentTimeEntrySize:
		return fmt.Errorf("%w: segment.index.bytes %d is smaller than two index entries", ErrInvalidConfig, c.SegmentIndexBytes)
	case int64(c.SegmentIndexBytes) > index.MaxFileBytes:
		return fmt.Errorf("%w: segment.index.bytes %d is larger than an index file can be (%d)", ErrInvalidConfig, c.SegmentIndexBytes, int64(index.MaxFileBytes))
	case c.IndexIntervalBytes < 0:
		return fmt.Errorf("%w: index.interval.bytes %d is negative", ErrInvalidConfig, c.IndexIntervalBytes)
	case c.SegmentJitter < 0:
		return fmt.Errorf("%w: segment.jitter.ms %v is negative", ErrInvalidConfig, c.SegmentJitter)
	case c.MaxMessageBytes < 0:
		return fmt.Errorf("%w: max.message.bytes %d is negative", ErrInvalidConfig, c.MaxMessageBytes)
	case c.FlushMessages < 0:
		return fmt.Errorf("%w: flush.messages %d is negative", ErrInvalidConfig, c.FlushMessages)
	case c.FlushInterval < 0:
		return fmt.Errorf("%w: flush.ms %v is negative", ErrInvalidConfig, c.FlushInterval)
	case c.WriteBehind < 0:
		return fmt.Errorf("%w: WriteBehind %v is negative", ErrInvalidConfig, c.WriteBehind)
	case c.ProducerIDExpiration < 0:
		return fmt.Errorf("%w: producer.id.expiration.ms %v is negative", ErrInvalidConfig, c.ProducerIDExpiration)
	case c.ProducerIDExpiration < time.Millisecond:
		// Kafka's setting counts milliseconds, at least 1; less would be
		// 0 ms, which expires every producer at once.
		return fmt.Errorf("%w: producer.id.expiration.ms %v is below 1 ms", ErrInvalidConfig, c.ProducerIDExpiration)
	case c.TruncateWait < 0:
		return fmt.Errorf("%w: TruncateWait %v is negative", ErrInvalidConfig, c.TruncateWait)
	case c.MaxOpenSegments < 0:
		return fmt.Errorf("%w: MaxOpenSegments %d is negative", ErrInvalidConfig, c.MaxOpenSegments)
	}
	return nil
}

// segmentTimeEntrySize is the size of the larger index entry (a time index
// entry: i64 timestamp + i32 relative offset).
const segmentTimeEntrySize = 12

// segmentConfig is the segment layer's view of c, with a Budget of its
// own when MaxOpenSegments is set (a Dir replaces it with its shared one).
func (c *Config) segmentConfig() segment.Config {
	sc := segment.Config{
		IndexIntervalBytes: c.IndexIntervalBytes,
		MaxIndexBytes:      c.SegmentIndexBytes,
		MaxSegmentBytes:    c.SegmentBytes,
		DisableMmap:        c.DisableMmap,
		Logger:             c.Logger,
		Now:                c.Now,
	}
	if c.MaxOpenSegments > 0 {
		sc.Budget = segment.NewBudget(c.MaxOpenSegments)
	}
	return sc
}
