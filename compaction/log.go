package compaction

import (
	"context"

	plog "github.com/partlog/partlog/log"
)

// Partition is what the policies run on: a partition that carries out
// their plans on its own files. *log.Partition implements it; the
// policies never touch a file themselves.
type Partition interface {
	// Dir is the partition directory (for reports and the Runner's
	// failure marks).
	Dir() string
	// Compact runs one round of a key-compaction policy (see
	// log.Partition.Compact).
	Compact(ctx context.Context, c plog.Cleaner) (plog.CleanResult, error)
	// DeleteExpired applies a retention policy (see
	// log.Partition.DeleteExpired).
	DeleteExpired(ctx context.Context, r plog.RetentionPolicy) (plog.CleanResult, error)
}

var _ Partition = (*plog.Partition)(nil)
