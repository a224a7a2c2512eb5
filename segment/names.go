package segment

import (
	"fmt"
	"strconv"
	"strings"
)

// File name suffixes of a Kafka partition directory. Frozen: they are
// Kafka's.
const (
	// LogSuffix names the file holding the segment's record batches.
	LogSuffix = ".log"
	// IndexSuffix names the sparse offset index.
	IndexSuffix = ".index"
	// TimeIndexSuffix names the sparse time index.
	TimeIndexSuffix = ".timeindex"
	// TxnIndexSuffix names the aborted-transaction index (AbortedTxns;
	// the log package decides what goes in it).
	TxnIndexSuffix = ".txnindex"
	// SnapshotSuffix names a producer-state snapshot (log package).
	SnapshotSuffix = ".snapshot"
	// DeletedSuffix is appended to every file of a segment that is being
	// deleted (MarkDeleted); such files are removed at the last Unref, or
	// at the next start-up.
	DeletedSuffix = ".deleted"
	// CleanedSuffix is appended to the files of a segment that compaction
	// is writing.
	CleanedSuffix = ".cleaned"
	// SwapSuffix is appended to the files of a compacted segment that is
	// about to replace the segments it was made from.
	SwapSuffix = ".swap"
)

// fileNameDigits is the width of the zero-padded base offset in a file name.
const fileNameDigits = 20

// FileName returns the name of a segment file: the base offset zero-padded
// to 20 digits followed by suffix, e.g. FileName(42, LogSuffix) is
// "00000000000000000042.log".
func FileName(base int64, suffix string) string {
	return fmt.Sprintf("%0*d%s", fileNameDigits, base, suffix)
}

// ParseFileName parses a file name written by FileName, possibly carrying
// one of the temporary suffixes after the kind suffix
// ("00000000000000000042.log.deleted"). It returns the base offset and the
// whole suffix (".log.deleted"); ok is false for any other name.
func ParseFileName(name string) (base int64, suffix string, ok bool) {
	if len(name) <= fileNameDigits || name[fileNameDigits] != '.' {
		return 0, "", false
	}
	digits := name[:fileNameDigits]
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, "", false
		}
	}
	base, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, "", false
	}
	suffix = name[fileNameDigits:]
	kind, temp, _ := strings.Cut(suffix[1:], ".")
	switch "." + kind {
	case LogSuffix, IndexSuffix, TimeIndexSuffix, TxnIndexSuffix, SnapshotSuffix:
	default:
		return 0, "", false
	}
	switch temp {
	case "", DeletedSuffix[1:], CleanedSuffix[1:], SwapSuffix[1:]:
	default:
		return 0, "", false
	}
	if temp != "" && strings.Count(suffix, ".") != 2 {
		return 0, "", false
	}
	return base, suffix, true
}
