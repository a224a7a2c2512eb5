package log

import (
	"errors"
	"fmt"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/legacy"
	"github.com/partlog/partlog/segment"
)

// RecoveryPolicy decides what Open does with invalid data it finds after
// an unclean shutdown. Open calls OnCorruption before it changes anything:
// returning nil lets recovery cut (the segment at ev.Pos, every later
// segment, or, for a checkpoint, ignore the file and recover without it);
// returning an error makes Open fail with that error and leave every .log
// and checkpoint as it was (indexes, derived data, may have been rebuilt).
// Asking first costs a read-only pass over the segments being recovered
// before the pass that validates and cuts; DefaultRecovery, which accepts
// every cut, is recognized and gets a single pass (its OnCorruption is then
// called after the cut). Open logs what it cut through Config.Logger
// either way, so a policy only decides. OnCorruption is called from the
// goroutine running Open.
type RecoveryPolicy interface {
	OnCorruption(ev RecoveryEvent) error
}

// RecoveryEvent describes invalid data Open found.
type RecoveryEvent struct {
	// Dir is the partition directory.
	Dir string
	// File is the path of the file holding the invalid data: a segment's
	// .log, or a checkpoint file (Checkpoint is then true).
	File string
	// Pos is the byte position in File where the invalid data starts
	// (for a .log: the start of the first invalid batch, where the cut
	// would be; for a checkpoint: the start of the bad line).
	Pos int64
	// CutBytes is how many bytes of .log data the cut removes: from Pos to
	// the end of File plus every later segment's .log. 0 for a checkpoint.
	CutBytes int64
	// LaterSegments is how many later segments the cut removes.
	LaterSegments int
	// LastGoodOffset is the last offset kept (-1 when the log keeps no
	// batch, or for a checkpoint).
	LastGoodOffset int64
	// TornTail is true when the invalid data looks like what a crash
	// leaves at the end of the active segment (a short, zeroed or
	// incomplete last batch) rather than damage followed by more data
	// (errors.Is(Err, segment.ErrTornTail) says the same).
	TornTail bool
	// Checkpoint is true when File is a checkpoint that does not parse.
	Checkpoint bool
	// Err is the corruption: a *batch.CorruptionError naming File, Pos and
	// the field; errors.Is(Err, batch.ErrCorrupt) holds.
	Err error
}

// DefaultRecovery is Kafka's recovery policy: cut the log at the first
// invalid batch, remove every later segment, and ignore a checkpoint that
// does not parse (the recovery point then falls back to the start of the
// log, the high watermark to the log start, the log start to the first
// segment's base). Open logs what it cut: file, position, bytes, last good
// offset.
type DefaultRecovery struct{}

// OnCorruption accepts every cut.
func (DefaultRecovery) OnCorruption(RecoveryEvent) error { return nil }

// StrictRecovery refuses to open a partition with invalid data: Open
// returns an error wrapping ErrRecoveryRefused and ev.Err (a
// *batch.CorruptionError naming the file and position; errors.Is
// batch.ErrCorrupt) and changes nothing, so the files can be inspected or
// copied first. With AllowTornTail it still cuts a torn tail of the active
// segment, the normal result of a crash, and refuses only corruption.
type StrictRecovery struct {
	AllowTornTail bool
}

// OnCorruption refuses (see StrictRecovery).
func (s StrictRecovery) OnCorruption(ev RecoveryEvent) error {
	if s.AllowTornTail && ev.TornTail {
		return nil
	}
	return fmt.Errorf("%w: %s at byte %d: %w", ErrRecoveryRefused, ev.File, ev.Pos, ev.Err)
}

// ErrRecoveryRefused is wrapped by the error Open returns when
// StrictRecovery refused to cut invalid data. Kafka has no such mode; a
// broker answers KAFKA_STORAGE_ERROR (56) for a log directory it cannot
// load.
var ErrRecoveryRefused = errors.New("partlog/log: recovery refused")

// recoveryProgressBytes is how often (in bytes scanned) a long recovery
// logs its progress.
const recoveryProgressBytes = 256 << 20

// scanResult is what scanLog found in a .log.
type scanResult struct {
	size  int64 // the file's length (the valid bytes when kept: nothing is cut)
	valid int64 // end of the last valid batch
	next  int64 // offset after the last valid batch (the base when none)
	cause error // nil, or a *batch.CorruptionError at valid
	kept  bool  // cause is legacy data recovery cannot prove torn: refuse, never cut
}

// scanLog validates the .log of seg from the start without changing it:
// segment.Check, the walk that defines damage for segment.Recover too
// (framing, size up to batch.MaxBatchSize, magic and CRC-32C without
// decompression, offsets increasing and inside the segment's relative
// offsets), so the pre-scan that asks the policy and the Recover that
// cuts agree on where the damage is and what it is: a torn tail (nothing
// valid after it), corruption (valid data follows) or legacy data recovery
// cannot prove torn (kept). last says seg is the active segment; a sealed
// one keeps a legacy message that fails its checks. progress (if not nil)
// is called with the bytes scanned, every recoveryProgressBytes and at the
// end; onBatch (if not nil) with every valid RecordBatch v2, in order.
func scanLog(fs vfs.FS, seg *segment.Segment, last bool, progress func(int64), onBatch func(batch.Batch)) (scanResult, error) {
	reported := int64(0)
	rr, err := segment.Check(fs, seg.LogPath(), seg.BaseOffset(), segment.CheckOptions{MaxBatchSize: batch.MaxBatchSize, Sealed: !last},
		func(h segment.BatchInfo, b batch.Batch, _ error) error {
			if progress != nil && h.Pos-reported >= recoveryProgressBytes {
				progress(h.Pos - reported)
				reported = h.Pos
			}
			if onBatch != nil && !legacy.IsMagic(h.Magic) {
				onBatch(b)
			}
			return nil
		})
	if err != nil {
		return scanResult{}, err
	}
	if progress != nil && rr.ValidBytes > reported {
		progress(rr.ValidBytes - reported)
	}
	return scanResult{size: rr.ValidBytes + rr.TruncatedBytes, valid: rr.ValidBytes, next: rr.NextOffset,
		cause: rr.Cause, kept: rr.Kept}, nil
}

// keptCause is the cause for data recovery cannot prove torn (law 12) at
// pos of path, found because of err: a *base.CorruptionError wrapping
// segment.ErrLegacyKept, and err unless err is a torn tail (a kept cause is
// never one). why says what is kept.
func keptCause(path string, pos int64, err error, why string) error {
	format := "%w: %s (%w)"
	if base.IsTornTail(err) {
		format = "%w: %s (%v)"
	}
	return &base.CorruptionError{File: path, Pos: pos, Field: "legacy", Err: fmt.Errorf(format, segment.ErrLegacyKept, why, err)}
}

// recoverSegments recovers list[from:] after an unclean shutdown and
// returns the segments that remain, by the recovery point, the log start
// and the cleaner checkpoints the open read (saved).
// For each segment, in order:
//
//   - With a policy other than DefaultRecovery, scanLog validates the
//     segment without changing it and the policy is asked about its first
//     invalid batch before anything is cut; then segment.Recover validates
//     again, rebuilds the indexes and cuts there.
//   - With DefaultRecovery, which accepts every cut, segment.Recover alone
//     validates, rebuilds and cuts in one pass (half the reading), and a
//     walk over the batch headers collects the leader epochs.
//
// Every segment recovered lies above the recovery point (from holds it):
// with a recovery point, none of them was promised durable, so a crash may
// have cut any of them short or torn its end, sealed or not (a roll leaves
// the flush of the segment it seals to the background). Each is therefore
// classified as the active segment is: invalid bytes that end it are a
// torn tail. At the first segment that loses data, the log is cut there and
// every later segment is removed (data above the recovery point was never
// promised; what remains is a prefix of what was appended): a segment with
// invalid data before its last offset, or a sealed segment whose batches
// end before the next segment's base offset (its unsynced tail was lost,
// or cut at a batch boundary) unless the log start checkpoint lies past
// that gap (the offsets are no reader's) or the next segment is an empty
// last one (settleEmptyTail decides). A sealed segment whose batches reach
// the next segment's base lost nothing: invalid bytes after them are cut
// and the later segments stay. Without a recovery point (a directory Kafka
// wrote) sealed segments are classified as flushed, and the first one
// with invalid data cuts the log.
//
// A cut never removes a later segment that holds a legacy (magic 0/1)
// entry: recovery cannot prove such data torn, so Open refuses under
// every policy (law 12) before anything is cut. Segments that have legacy
// data after them are therefore validated read-only first (scanLog) under
// DefaultRecovery too.
func (o *opening) recoverSegments(list []*segment.Segment, from int) ([]*segment.Segment, error) {
	rp, logStart, haveLogStart := o.saved.rp(), o.saved.logStart, o.saved.haveLogStart
	var total int64
	for _, seg := range list[from:] {
		total += seg.Size()
	}
	o.logger.Info("partlog/log: recovering after an unclean shutdown", "dir", o.dir,
		"fromSegment", list[from].BaseOffset(), "segments", len(list)-from, "bytes", total)
	var done, reported int64
	progress := func(n int64) {
		done += n
		if total >= recoveryProgressBytes && done-reported >= recoveryProgressBytes {
			reported = done
			o.logger.Info("partlog/log: recovery progress", "dir", o.dir, "bytesScanned", done, "bytesTotal", total)
		}
	}
	_, onePass := o.policy.(DefaultRecovery)
	// Batches wholly below the log start name no epoch (observeEpoch).
	epochFloor := int64(-1)
	if haveLogStart {
		epochFloor = logStart
	}
	// Segments before list[legacyAt] have legacy data after them: a cut
	// there would remove it.
	legacyAt, legacyPos, err := lastLegacySegment(o.fs, list, from)
	if err != nil {
		return list, fmt.Errorf("partlog/log: recover: %w", err)
	}
	for i := from; i < len(list); i++ {
		seg := list[i]
		last := i == len(list)-1
		// unsynced: the end of the file is where unsynced writes stopped.
		unsynced := last || rp >= 0
		// complete reports whether batches ending at next hold every
		// offset below the next segment: then a cut loses nothing of the
		// log and removes no later segment.
		complete := func(next int64) bool { return rp >= 0 && !last && next >= list[i+1].BaseOffset() }
		guarded := i < legacyAt
		var res scanResult
		if !onePass || guarded {
			// One pass scans here only to refuse before Recover cuts;
			// it observes epochs and progress after Recover.
			prog, onBatch := progress, func(b batch.Batch) { o.observeEpoch(b, epochFloor) }
			if onePass {
				prog, onBatch = nil, nil
			}
			r, err := scanLog(o.fs, seg, unsynced, prog, onBatch)
			res = r
			if err != nil {
				return list, fmt.Errorf("partlog/log: recover segment %d: %w", seg.BaseOffset(), err)
			}
			if res.kept {
				return list, o.refuseKept(seg, res.cause)
			}
			if res.cause != nil && guarded && !complete(res.next) {
				return list, o.refuseLaterLegacy(seg, res.valid, res.cause, list[legacyAt], legacyPos)
			}
			if res.cause != nil && !onePass {
				if err := o.onInvalid(list, i, res, unsynced, complete(res.next)); err != nil {
					return list, err
				}
			}
		}
		recoverSeg := seg.Recover
		if !unsynced {
			recoverSeg = seg.RecoverSealed
		}
		rr, err := recoverSeg(batch.MaxBatchSize)
		if err != nil {
			return list, fmt.Errorf("partlog/log: recover segment %d: %w", seg.BaseOffset(), err)
		}
		if rr.Kept {
			return list, o.refuseKept(seg, rr.Cause)
		}
		if rr.Cause != nil && guarded && !complete(rr.NextOffset) {
			return list, o.refuseLaterLegacy(seg, rr.ValidBytes, rr.Cause, list[legacyAt], legacyPos)
		}
		if onePass {
			progress(rr.ValidBytes + rr.TruncatedBytes)
			if err := o.observeSegmentEpochs(seg, epochFloor); err != nil {
				return list, fmt.Errorf("partlog/log: recover segment %d: %w", seg.BaseOffset(), err)
			}
			res = scanResult{size: rr.ValidBytes + rr.TruncatedBytes, valid: rr.ValidBytes, next: rr.NextOffset, cause: rr.Cause}
			if res.cause != nil {
				if err := o.onInvalid(list, i, res, unsynced, complete(res.next)); err != nil {
					return list, err
				}
			}
		} else if rr.ValidBytes != res.valid {
			o.logger.Warn("partlog/log: segment recovery kept a different length than the scan",
				"dir", o.dir, "segment", seg.BaseOffset(), "scan", res.valid, "recover", rr.ValidBytes, "cause", rr.Cause)
		}
		if res.cause != nil || rr.Cause != nil {
			if complete(rr.NextOffset) {
				continue // only bytes past its last offset were cut
			}
		} else if !o.endsShort(list, i) {
			continue
		} else {
			if guarded {
				return list, o.refuseLaterLegacy(seg, rr.ValidBytes, shortCause(list, i), list[legacyAt], legacyPos)
			}
			short := scanResult{size: rr.ValidBytes, valid: rr.ValidBytes, next: rr.NextOffset, cause: shortCause(list, i)}
			if err := o.onInvalid(list, i, short, unsynced, false); err != nil {
				return list, err
			}
		}
		// Remove every later segment, newest first (a failure leaves a
		// prefix).
		for j := len(list) - 1; j > i; j-- {
			if err := list[j].MarkDeleted(); err != nil {
				return list, fmt.Errorf("partlog/log: recover: remove segment %d: %w", list[j].BaseOffset(), err)
			}
			if err := list[j].Close(); err != nil {
				o.logger.Warn("partlog/log: releasing a segment failed", "dir", o.dir, "err", err)
			}
			list = list[:j]
		}
		o.dirDirty = true
		break
	}
	o.stats.BytesScanned = done
	return list, nil
}

// endsShort reports whether the sealed segment list[i], recovered above
// the recovery point, ends before the next segment's base: its unsynced
// tail was lost in a crash after the roll that sealed it and before that
// roll's background flush, so the log must end there. Not when there is
// no recovery point, when the log start checkpoint lies at or past the
// next segment's base (the missing offsets are no reader's: retention or a
// restart moved it there), when the cleaner checkpoint reaches
// the next segment's base (a compaction wrote the segment: compactedGap),
// or when the next segment is an empty last one (settleEmptyTail decides
// about it, after the policy was asked in checkDir).
func (o *opening) endsShort(list []*segment.Segment, i int) bool {
	s := o.saved
	if s.rp() < 0 || i == len(list)-1 {
		return false
	}
	next := list[i+1]
	switch {
	case list[i].NextOffset() >= next.BaseOffset():
		return false
	case s.haveLogStart && s.logStart >= next.BaseOffset():
		return false
	case compactedGap(s.cleanerAt, next.BaseOffset()):
		return false
	case i+1 == len(list)-1 && next.Size() == 0:
		return false
	}
	return true
}

// shortCause is the torn tail a sealed segment ending early is (endsShort).
func shortCause(list []*segment.Segment, i int) error {
	seg := list[i]
	return base.TornTailErrorf(seg.LogPath(), seg.Size(), "nextOffset",
		"the batches end at offset %d and the next segment starts at %d: the segment's unsynced tail was lost (a crash after the roll, before its flush)",
		seg.NextOffset(), list[i+1].BaseOffset())
}

// refuseKept is Open's answer to legacy data recovery found invalid but
// cannot prove torn (DESIGN law 12): whatever the policy, nothing is cut
// and Open fails with an error wrapping ErrRecoveryRefused and the
// *base.CorruptionError that names the file and position.
func (o *opening) refuseKept(seg *segment.Segment, cause error) error {
	o.logger.Error("partlog/log: recovery found legacy data it cannot prove torn; refusing to cut it", "dir", o.dir,
		"file", seg.LogPath(), "cause", cause)
	return fmt.Errorf("%w: %s: %w", ErrRecoveryRefused, seg.LogPath(), cause)
}

// lastLegacySegment returns the index in list of the last segment after
// list[from] holding a legacy (magic 0/1) entry, and that entry's position
// (-1, -1 when none), reading the entry headers of the segments from the
// newest back to it.
//
// None of these segments has been recovered yet, and recovery reads each
// whole .log: opening one found its end from its last offset index entry
// (DESIGN law 5), so damage between two entries lies inside its size and
// the walk may stop there, and bytes after the last batch that frames lie
// past its size. Where the walk stops is the recovery's to judge when it
// reaches the segment, not this walk's: a legacy entry found before it
// counts, and so does legacy data after it that recovery would find and
// keep (the walk's verdict over the rest of the file, Kept: a valid legacy
// message follows the damage), reported at the damage's position.
func lastLegacySegment(fs vfs.FS, list []*segment.Segment, from int) (at int, pos int64, err error) {
	for j := len(list) - 1; j > from; j-- {
		seg := list[j]
		pos = -1
		onEntry := func(h segment.BatchInfo, b batch.Batch, _ error) error {
			if legacy.Is(b) {
				pos = h.Pos
				return errStopWalk
			}
			return nil
		}
		opts := segment.CheckOptions{HeadersOnly: true, KeepGoing: true}
		res, err := seg.Check(opts, onEntry)
		if err == nil {
			// The rest of the file, from where the walk stopped: the
			// bytes a recovery of seg judges that its size leaves out.
			opts.From = res.ValidBytes
			res, err = segment.Check(fs, seg.LogPath(), seg.BaseOffset(), opts, onEntry)
		}
		switch {
		case errors.Is(err, errStopWalk):
		case err != nil:
			return -1, -1, fmt.Errorf("segment %d: %w", seg.BaseOffset(), err)
		case res.Kept:
			pos = res.ValidBytes
		}
		if pos >= 0 {
			return j, pos, nil
		}
	}
	return -1, -1, nil
}

// refuseLaterLegacy is Open's answer to invalid data at pos of seg when a
// later segment, later, holds legacy data at laterPos: cutting seg would
// remove later, and recovery cannot prove legacy data torn (law 12). Like
// refuseKept, whatever the policy, nothing is cut.
func (o *opening) refuseLaterLegacy(seg *segment.Segment, pos int64, cause error, later *segment.Segment, laterPos int64) error {
	return o.refuseKept(seg, keptCause(seg.LogPath(), pos, cause,
		fmt.Sprintf("a cut here would remove %s, which holds legacy data recovery cannot prove torn (at byte %d)", later.LogPath(), laterPos)))
}

// onInvalid asks the policy about the invalid data res found in list[i]
// and logs the cut it accepted. unsynced says the end of the segment's
// file is where unsynced writes stopped (the active segment, or any
// segment above the recovery point), so invalid bytes that end it are a
// torn tail; complete says the segment's batches reach the next
// segment's base, so the cut removes no later segment.
func (o *opening) onInvalid(list []*segment.Segment, i int, res scanResult, unsynced, complete bool) error {
	seg := list[i]
	cut := res.size - res.valid
	later := 0
	if !complete {
		later = len(list) - i - 1
		for _, s := range list[i+1:] {
			cut += s.Size()
		}
	}
	lastGood := res.next - 1
	if res.next == seg.BaseOffset() {
		lastGood = -1
		if i > 0 {
			lastGood = list[i-1].NextOffset() - 1
		}
	}
	ev := RecoveryEvent{Dir: o.dir, File: seg.LogPath(), Pos: res.valid, CutBytes: cut,
		LaterSegments: later, LastGoodOffset: lastGood,
		TornTail: unsynced && base.IsTornTail(res.cause), Err: res.cause}
	if err := o.policy.OnCorruption(ev); err != nil {
		return err
	}
	o.stats.BytesCut += ev.CutBytes
	o.stats.SegmentsRemoved += ev.LaterSegments
	kind := "corruption"
	if ev.TornTail {
		kind = "torn tail"
	}
	o.logger.Warn("partlog/log: recovery cut the log", "dir", o.dir, "kind", kind,
		"file", ev.File, "position", ev.Pos, "cutBytes", ev.CutBytes, "laterSegments", ev.LaterSegments,
		"lastGoodOffset", ev.LastGoodOffset, "cause", ev.Err)
	return nil
}

// observeSegmentEpochs adds the leader epochs of seg's batches to the
// cache (observeEpoch), reading only their headers. seg was just
// recovered: every entry of it checked, so damage here is a bug (an
// assertion error naming it).
func (o *opening) observeSegmentEpochs(seg *segment.Segment, logStart int64) error {
	err := walkHeaders(seg, func(_ int64, h []byte, legacy bool) (bool, error) {
		if !legacy {
			o.observeEpoch(batch.Batch(h), logStart)
		}
		return true, nil
	})
	if base.IsCorruption(err) {
		return base.AssertionFailedf("partlog/log: recovered segment %s (%d bytes) does not walk: %v", seg, seg.Size(), err)
	}
	return err
}

// observeEpoch adds the leader epoch of a recovered batch (its header is
// enough) to the cache, unless every offset of the batch lies below
// logStart (the log start checkpoint, or -1 when there is none). Such a
// batch stays in its segment until retention removes the segment, but it
// is no reader's and names no epoch of the log: after TruncateTo down to
// the log start a lower epoch may follow it, and observing its higher one
// would make the cache claim it for the batches above
// (TestRecoveryIgnoresEpochsBelowLogStart). A batch holding the log start
// counts; Open then moves its entry up to the log start.
func (o *opening) observeEpoch(h batch.Batch, logStart int64) {
	if h.BaseOffset()+int64(h.LastOffsetDelta()) < logStart {
		return
	}
	o.epochs.Observe(h.PartitionLeaderEpoch(), h.BaseOffset())
}

// walkHeaders calls fn with the header of every entry of seg in order: a
// RecordBatch v2's batch.HeaderSize bytes (legacy false), or the first
// bytes of a legacy magic 0/1 message (legacy true; no v2 field applies).
// h aliases the mapping or a buffer and is valid during the call only. fn
// returns false to stop. It is seg.Check with HeadersOnly and KeepGoing,
// the walk that defines damage, reading framing and header fields only (no
// CRC; offsets not checked against each other: the segment may be one
// Kafka wrote, which recovery has not walked).
//
// Every entry fn gets passed decodeHeader's checks (a known magic, a
// length of at least its header, a lastOffsetDelta >= 0, offsets whose
// last + 1 fits an int64). Only a segment recovery walked is proven to
// frame to its end: opening a segment finds its end from its last offset
// index entry (DESIGN law 5), so damage between two entries stays inside
// its size, and a header there may fail its checks or frame as no entry.
// The walk then stops with that damage, a *batch.CorruptionError naming
// the .log and the position (errors.Is batch.ErrCorrupt), as a read of the
// same bytes reports it (law 8). A fault on the mapping, or a file cut
// under the walk, is an error wrapping ErrFault.
func walkHeaders(seg *segment.Segment, fn func(pos int64, h []byte, legacy bool) (bool, error)) error {
	res, err := seg.Check(segment.CheckOptions{HeadersOnly: true, KeepGoing: true}, func(h segment.BatchInfo, b batch.Batch, bad error) error {
		if bad != nil {
			return bad // framed, but a header field is damage
		}
		more, err := fn(h.Pos, b, legacy.Is(b))
		if err == nil && !more {
			err = errStopWalk
		}
		return err
	})
	switch {
	case errors.Is(err, errStopWalk):
		return nil
	case err != nil:
		return err
	}
	return res.Cause // nil, or where the entries stop framing
}

// errStopWalk is what a walkHeaders callback returns to end the walk early.
var errStopWalk = errors.New("partlog/log: walk stopped")
