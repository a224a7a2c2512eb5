package log

import (
	"errors"
	"fmt"
	"slices"

	"github.com/partlog/partlog/internal/mmap"
	"github.com/partlog/partlog/segment"
)

// errFault is index.ErrFault (the same value as segment.ErrFault): the
// package documentation's ErrFault. See "Media errors" there.
var errFault = segment.ErrFault

// noteFault takes the partition offline when err wraps ErrFault and then
// returns err wrapped in ErrFailed; any other err it returns as it is. Any
// goroutine.
func (p *Partition) noteFault(err error) error {
	if err == nil || !errors.Is(err, errFault) {
		return err
	}
	off := failedf(err)
	if p.offline.CompareAndSwap(nil, &off) {
		p.bounds.wakeAll()
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
