package checkpoint

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/base"
)

// MaxTopicLength is Kafka's limit on a topic name's length.
const MaxTopicLength = 249

// ValidTopic reports whether topic is a legal Kafka topic name: 1 to 249
// characters from [a-zA-Z0-9._-], and neither "." nor "..".
func ValidTopic(topic string) bool {
	if topic == "" || len(topic) > MaxTopicLength || topic == "." || topic == ".." {
		return false
	}
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// FormatTopic reports whether topic can be written in an offset checkpoint
// line: non-empty, with no space, tab, newline or other control character.
func FormatTopic(topic string) bool {
	if topic == "" {
		return false
	}
	for i := 0; i < len(topic); i++ {
		if c := topic[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// PartitionOffset is one entry of Kafka's offset checkpoints:
// "topic partition offset".
type PartitionOffset struct {
	// Topic is the topic name; it must satisfy FormatTopic (Kafka's own
	// files hold names that also satisfy ValidTopic).
	Topic string
	// Partition is the partition number, >= 0.
	Partition int32
	// Offset is the checkpointed offset, >= 0.
	Offset int64
}

// OffsetFormat is the format of recovery-point-offset-checkpoint,
// replication-offset-checkpoint, log-start-offset-checkpoint and
// cleaner-offset-checkpoint: version 0, "topic partition offset" lines.
// Reading rejects negative partitions and offsets. The topic only has to fit
// the format (non-empty, no space or control character; see FormatTopic):
// Kafka's stricter naming rule (ValidTopic) is not required, so a partlog
// partition directory with any name can keep its checkpoints.
var OffsetFormat = Format[PartitionOffset]{
	Version: CurrentVersion,
	Fields:  3,
	Append: func(dst []byte, e PartitionOffset) []byte {
		dst = append(dst, e.Topic...)
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, int64(e.Partition), 10)
		dst = append(dst, ' ')
		return strconv.AppendInt(dst, e.Offset, 10)
	},
	Parse: func(f []string) (PartitionOffset, error) {
		if !FormatTopic(f[0]) {
			return PartitionOffset{}, &FieldError{Field: "topic", Err: fmt.Errorf("invalid topic %q", f[0])}
		}
		p, err := ParseInt("partition", f[1], 32)
		if err != nil {
			return PartitionOffset{}, err
		}
		if p < 0 {
			return PartitionOffset{}, &FieldError{Field: "partition", Err: fmt.Errorf("negative: %d", p)}
		}
		off, err := ParseInt("offset", f[2], 64)
		if err != nil {
			return PartitionOffset{}, err
		}
		if off < 0 {
			return PartitionOffset{}, &FieldError{Field: "offset", Err: fmt.Errorf("negative: %d", off)}
		}
		return PartitionOffset{Topic: f[0], Partition: int32(p), Offset: off}, nil
	},
}

// ErrInvalidEntry is returned by writers for an entry that would not read
// back: an invalid topic, a negative partition or offset, a duplicate
// partition, epochs out of order.
var ErrInvalidEntry = errors.New("partlog/checkpoint: invalid entry")

type topicPartition struct {
	topic     string
	partition int32
}

// ReadOffsets reads an offset checkpoint file. Besides the format, it
// rejects a partition listed twice. The entries keep the file's order.
func ReadOffsets(fs vfs.FS, path string) ([]PartitionOffset, error) {
	b, err := readAll(fs, path)
	if err != nil {
		return nil, err
	}
	entries, err := Parse(path, b, OffsetFormat)
	if err != nil {
		return nil, err
	}
	if err := checkOffsets(entries); err != nil {
		return nil, base.CorruptionErrorf(path, -1, "entry", "%v", err)
	}
	return entries, nil
}

func checkOffsets(entries []PartitionOffset) error {
	seen := make(map[topicPartition]bool, len(entries))
	for i, e := range entries {
		tp := topicPartition{e.Topic, e.Partition}
		if seen[tp] {
			return fmt.Errorf("entry[%d]: partition %s-%d listed twice", i, e.Topic, e.Partition)
		}
		seen[tp] = true
	}
	return nil
}

// WriteOffsets atomically writes an offset checkpoint file with entries, in
// their order.
func WriteOffsets(fs vfs.FS, path string, entries []PartitionOffset) error {
	for i, e := range entries {
		if !FormatTopic(e.Topic) || e.Partition < 0 || e.Offset < 0 {
			return fmt.Errorf("%w: entry[%d] %+v", ErrInvalidEntry, i, e)
		}
	}
	if err := checkOffsets(entries); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidEntry, err)
	}
	return Write(fs, path, OffsetFormat, entries)
}

// ReadOffset reads the offset of topic-partition from an offset checkpoint
// file (partlog keeps one file per partition with its one entry). found is
// false when the file is valid but has no entry for it (Kafka's per-log-dir
// files list only some partitions).
func ReadOffset(fs vfs.FS, path, topic string, partition int32) (offset int64, found bool, err error) {
	entries, err := ReadOffsets(fs, path)
	if err != nil {
		return 0, false, err
	}
	for _, e := range entries {
		if e.Topic == topic && e.Partition == partition {
			return e.Offset, true, nil
		}
	}
	return 0, false, nil
}

// WriteOffset atomically writes an offset checkpoint file holding the one
// entry "topic partition offset".
func WriteOffset(fs vfs.FS, path, topic string, partition int32, offset int64) error {
	return WriteOffsets(fs, path, []PartitionOffset{{Topic: topic, Partition: partition, Offset: offset}})
}

// ParseDirName splits a partition directory's base name "topic-partition"
// (Kafka's naming, e.g. "myTopic-0" or "__consumer_offsets-17") at its last
// "-". ok is false when the name is not of that form.
func ParseDirName(name string) (topic string, partition int32, ok bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return "", 0, false
	}
	p, err := ParseInt("partition", name[i+1:], 32)
	if err != nil || p < 0 || !ValidTopic(name[:i]) {
		return "", 0, false
	}
	return name[:i], int32(p), true
}

// EntryName returns the topic and partition that name a partition's entry
// in its per-partition checkpoint files: those of the directory's base name
// when it is "topic-partition" (ParseDirName), else the whole base name,
// spaces and control characters replaced by '_' so that it is a valid
// topic field, and partition 0.
func EntryName(dir string) (topic string, partition int32) {
	name := filepath.Base(dir)
	if topic, partition, ok := ParseDirName(name); ok {
		return topic, partition
	}
	return strings.Map(func(r rune) rune {
		if r <= ' ' || r == 0x7f {
			return '_'
		}
		return r
	}, name), 0
}

// DirName returns the partition directory name "topic-partition".
func DirName(topic string, partition int32) string {
	return topic + "-" + strconv.FormatInt(int64(partition), 10)
}

// EpochEntry is one entry of leader-epoch-checkpoint: the first offset
// written under a leader epoch.
type EpochEntry struct {
	// Epoch is the leader epoch, >= 0.
	Epoch int32
	// StartOffset is the first offset of the epoch, >= 0.
	StartOffset int64
}

// EpochFormat is the format of leader-epoch-checkpoint: version 0,
// "epoch startOffset" lines.
var EpochFormat = Format[EpochEntry]{
	Version: CurrentVersion,
	Fields:  2,
	Append: func(dst []byte, e EpochEntry) []byte {
		dst = strconv.AppendInt(dst, int64(e.Epoch), 10)
		dst = append(dst, ' ')
		return strconv.AppendInt(dst, e.StartOffset, 10)
	},
	Parse: func(f []string) (EpochEntry, error) {
		ep, err := ParseInt("epoch", f[0], 32)
		if err != nil {
			return EpochEntry{}, err
		}
		if ep < 0 {
			return EpochEntry{}, &FieldError{Field: "epoch", Err: fmt.Errorf("negative: %d", ep)}
		}
		off, err := ParseInt("startOffset", f[1], 64)
		if err != nil {
			return EpochEntry{}, err
		}
		if off < 0 {
			return EpochEntry{}, &FieldError{Field: "startOffset", Err: fmt.Errorf("negative: %d", off)}
		}
		return EpochEntry{Epoch: int32(ep), StartOffset: off}, nil
	},
}

// checkEpochs requires strictly increasing epochs and non-decreasing start
// offsets, the order Kafka's leader epoch cache keeps.
func checkEpochs(entries []EpochEntry) error {
	for i := 1; i < len(entries); i++ {
		prev, e := entries[i-1], entries[i]
		if e.Epoch <= prev.Epoch {
			return fmt.Errorf("entry[%d]: epoch %d after epoch %d", i, e.Epoch, prev.Epoch)
		}
		if e.StartOffset < prev.StartOffset {
			return fmt.Errorf("entry[%d]: start offset %d after %d", i, e.StartOffset, prev.StartOffset)
		}
	}
	return nil
}

// ReadLeaderEpochs reads a leader-epoch-checkpoint file. Besides the
// format, it checks that epochs increase and start offsets do not
// decrease.
func ReadLeaderEpochs(fs vfs.FS, path string) ([]EpochEntry, error) {
	b, err := readAll(fs, path)
	if err != nil {
		return nil, err
	}
	entries, err := Parse(path, b, EpochFormat)
	if err != nil {
		return nil, err
	}
	if err := checkEpochs(entries); err != nil {
		return nil, base.CorruptionErrorf(path, -1, "entry", "%v", err)
	}
	return entries, nil
}

// WriteLeaderEpochs atomically writes a leader-epoch-checkpoint file.
func WriteLeaderEpochs(fs vfs.FS, path string, entries []EpochEntry) error {
	for i, e := range entries {
		if e.Epoch < 0 || e.StartOffset < 0 {
			return fmt.Errorf("%w: entry[%d] %+v", ErrInvalidEntry, i, e)
		}
	}
	if err := checkEpochs(entries); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidEntry, err)
	}
	return Write(fs, path, EpochFormat, entries)
}
