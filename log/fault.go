package log

import (
	"errors"
	"fmt"
	"slices"

	"github.com/partlog/partlog/internal/mmap"
	"github.com/partlog/partlog/internal/segment"
)

// ErrFault marks an I/O error met while reading a memory-mapped file of
// the partition (a .log or an index): a media error on the page (EIO), or
// a file cut behind the partition's back. Where Go would die of SIGBUS,
// partlog's own reads of mapped memory return an error wrapping ErrFault,
// and a *segment.FaultError that names the file and the byte offset. The
// partition then goes offline, as Kafka takes a log offline on an
// IOException: every later call (reads included) returns an error wrapping
// ErrFailed and the fault, Close does not write the clean-shutdown marker,
// and a reopen (after the disk is fixed) recovers. Kafka error code:
// KAFKA_STORAGE_ERROR (56). It is the same value as segment.ErrFault.
//
// The walk that defines damage (recovery and Verify) reports a .log that
// ends before the bytes it was told the file holds the same way when it
// reads the file instead of its mapping (DisableMmap, or a filesystem
// without descriptors): the loss is a fault, never a torn tail to cut.
//
// Partition.Records decodes under the same protection (its loop body runs
// outside it) and takes the partition offline on a fault, as ReadFrom
// does.
//
// Bytes returned by Records.Bytes alias the mapping and are read by the
// caller, outside this protection: a fault there still kills the process.
// Callers that must survive a failing disk send with Records.WriteTo (the
// kernel copies: a media error is an error) or copy with Records.AppendTo;
// those two, Records.Batches (its framing; the batches it yields are
// Bytes) and AppendBatch given such bytes return the error without taking
// the partition offline (a Records does not know its partition, and
// AppendBatch's b is the caller's memory).
var ErrFault = segment.ErrFault

// noteFault takes the partition offline when err wraps ErrFault and then
// returns err wrapped in ErrFailed; any other err it returns as it is. Any
// goroutine.
func (p *Partition) noteFault(err error) error {
	if err == nil || !errors.Is(err, ErrFault) {
		return err
	}
	off := failedf(err)
	if p.offline.CompareAndSwap(nil, &off) {
		p.wakeWaiters()
		p.logger.Error("partlog/log: I/O error reading a mapped file; the partition is offline until reopened",
			"dir", p.dir, "err", err)
	}
	return off
}

// offlineErr returns the error every call returns once the partition is
// offline (wrapping ErrFailed and ErrFault), nil before. Any goroutine.
func (p *Partition) offlineErr() error {
	if e := p.offline.Load(); e != nil {
		return *e
	}
	return nil
}

// AppendTo appends the batches (Bytes) to dst and returns the extended
// slice. Unlike reading Bytes directly it survives a media error on a
// mapped page: the copy then stops and the error wraps ErrFault (naming the
// file and the byte offset), and dst is returned unextended. The Records
// stays open; close it as usual. After Close it returns dst and an error
// wrapping ErrClosed.
func (h Records) AppendTo(dst []byte) ([]byte, error) {
	r := h.state()
	if r == nil {
		return dst, fmt.Errorf("%w: Records.AppendTo after Close", ErrClosed)
	}
	n := len(dst)
	dst = slices.Grow(dst, len(r.b))[:n+len(r.b)]
	if _, err := mmap.SafeCopy(dst[n:], r.b); err != nil {
		return dst[:n], err
	}
	return dst, nil
}
