package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/klauspost/crc32"
	"github.com/tidwall/wal"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

// A peer is one log under measurement, behind the calls a program makes
// that appends records as they come (one a call, or n a call) and reads
// them back in order. None syncs. Every append reaches the kernel before
// it returns (no user-space buffer a kill -9 would lose), but for
// partlog_write_behind's, whose buffer written() writes out.
type peer interface {
	// appendOne appends one record.
	appendOne(value []byte) error
	// appendBatch appends values in one call.
	appendBatch(values [][]byte) error
	// written makes every record appended so far reach the kernel; the
	// timed appends end with it. A no-op but for partlog_write_behind.
	written() error
	// readAll hands every record's value to fn, in order, and checks
	// what the log checks on a read.
	readAll(fn func(value []byte)) error
	close() error
}

// peerNames are the peers, in the order each round runs them.
var peerNames = []string{"framed", "partlog", "partlog_write_behind", "tidwall_wal"}

// openPeer opens the peer name in the empty directory dir.
func openPeer(name, dir string) (peer, error) {
	switch name {
	case "framed":
		f, err := os.Create(filepath.Join(dir, "framed.log"))
		if err != nil {
			return nil, err
		}
		return &framedPeer{f: f}, nil
	case "partlog":
		p, err := plog.Open(filepath.Join(dir, "records-0"), plog.Config{})
		if err != nil {
			return nil, err
		}
		return &partlogPeer{p: p, bld: batch.NewBuilder(batch.BuilderOptions{})}, nil
	case "partlog_write_behind":
		// Appends acknowledged from partlog's write buffer (16 KiB, at
		// most 1 ms old): a kill -9 may lose what it holds.
		p, err := plog.Open(filepath.Join(dir, "records-0"), plog.Config{WriteBehind: time.Millisecond})
		if err != nil {
			return nil, err
		}
		return &partlogPeer{p: p, bld: batch.NewBuilder(batch.BuilderOptions{})}, nil
	case "tidwall_wal":
		// Segments as large as partlog's (segment.bytes): tidwall/wal
		// fsyncs a segment it fills whatever NoSync says.
		l, err := wal.Open(filepath.Join(dir, "wal"), &wal.Options{NoSync: true, SegmentSize: 1 << 30,
			LogFormat: wal.Binary, SegmentCacheSize: 2, NoCopy: true, DirPerms: 0o750, FilePerms: 0o640})
		if err != nil {
			return nil, err
		}
		return &tidwallPeer{l: l, next: 1}, nil
	}
	return nil, fmt.Errorf("no peer %q", name)
}

// framedPeer is the machine's own limit: each record framed as a 4-byte
// length, a 4-byte CRC-32C of the value and the value, written to an
// os.File with one write call per append.
type framedPeer struct {
	f   *os.File
	buf []byte
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (p *framedPeer) frame(value []byte) {
	p.buf = binary.BigEndian.AppendUint32(p.buf, uint32(len(value)))
	p.buf = binary.BigEndian.AppendUint32(p.buf, crc32.Checksum(value, castagnoli))
	p.buf = append(p.buf, value...)
}

func (p *framedPeer) appendOne(value []byte) error {
	p.buf = p.buf[:0]
	p.frame(value)
	_, err := p.f.Write(p.buf)
	return err
}

func (p *framedPeer) appendBatch(values [][]byte) error {
	p.buf = p.buf[:0]
	for _, v := range values {
		p.frame(v)
	}
	_, err := p.f.Write(p.buf)
	return err
}

// readAll reads the file in 1 MiB reads and checks every record's CRC.
func (p *framedPeer) readAll(fn func(value []byte)) error {
	st, err := p.f.Stat()
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	carry := 0
	for pos := int64(0); pos < st.Size(); {
		n, err := p.f.ReadAt(buf[carry:], pos)
		if n == 0 && err != nil {
			return err
		}
		pos += int64(n)
		data := buf[:carry+n]
		for len(data) >= 8 {
			l := int(binary.BigEndian.Uint32(data))
			if 8+l > len(buf) {
				return fmt.Errorf("framed: a record of %d bytes, longer than the read buffer", l)
			}
			if len(data) < 8+l {
				break
			}
			value := data[8 : 8+l]
			if crc32.Checksum(value, castagnoli) != binary.BigEndian.Uint32(data[4:]) {
				return errors.New("framed: bad CRC")
			}
			fn(value)
			data = data[8+l:]
		}
		carry = copy(buf, data)
	}
	if carry != 0 {
		return errors.New("framed: a partial record at the end")
	}
	return nil
}

func (p *framedPeer) written() error { return nil }

func (p *framedPeer) close() error { return p.f.Close() }

// partlogPeer appends as a user writes it: a batch.Builder and
// Partition.AppendBuilder (Kafka's RecordBatch v2, CRC-32C, offsets and
// indexes), and reads with ReadFrom and Batch.All.
type partlogPeer struct {
	p   *plog.Partition
	bld *batch.Builder
	dec batch.Decoder
}

func (p *partlogPeer) appendOne(value []byte) error {
	p.bld.Reset(batch.BuilderOptions{})
	if err := p.bld.Add(batch.Record{Value: value}); err != nil {
		return err
	}
	_, err := p.p.AppendBuilder(p.bld)
	return err
}

func (p *partlogPeer) appendBatch(values [][]byte) error {
	p.bld.Reset(batch.BuilderOptions{})
	for _, v := range values {
		if err := p.bld.Add(batch.Record{Value: v}); err != nil {
			return err
		}
	}
	_, err := p.p.AppendBuilder(p.bld)
	return err
}

// readAll reads from offset 0 to the high watermark in reads of 1 MiB
// and checks each batch's CRC-32C (ValidateHeader), as a consumer with
// Kafka's check.crcs does and as the framed peer checks each record's.
func (p *partlogPeer) readAll(fn func(value []byte)) error {
	for off := int64(0); off < p.p.HighWatermark(); {
		r, err := p.p.ReadFrom(off, 1<<20)
		if err != nil {
			return err
		}
		for bt, err := range r.Batches() {
			if err == nil {
				err = bt.ValidateHeader()
			}
			if err != nil {
				r.Close()
				return err
			}
			for rec, err := range bt.All(&p.dec) {
				if err != nil {
					r.Close()
					return err
				}
				fn(rec.Value)
			}
		}
		off = r.NextOffset()
		if err := r.Close(); err != nil {
			return err
		}
	}
	return nil
}

// written writes what partlog_write_behind's buffer holds: every call
// that observes the log does, LogEndOffset the cheapest of them.
func (p *partlogPeer) written() error {
	p.p.LogEndOffset()
	return nil
}

func (p *partlogPeer) close() error { return p.p.Close() }

// tidwallPeer is github.com/tidwall/wal (NoSync; NoCopy reads): each
// Write or WriteBatch call is one write system call. Its binary entries
// are a length and the data, with no checksum, and it keeps the tail
// segment's bytes in memory.
type tidwallPeer struct {
	l     *wal.Log
	next  uint64
	batch wal.Batch
}

func (p *tidwallPeer) appendOne(value []byte) error {
	if err := p.l.Write(p.next, value); err != nil {
		return err
	}
	p.next++
	return nil
}

func (p *tidwallPeer) appendBatch(values [][]byte) error {
	p.batch.Clear()
	for i, v := range values {
		p.batch.Write(p.next+uint64(i), v)
	}
	if err := p.l.WriteBatch(&p.batch); err != nil {
		return err
	}
	p.next += uint64(len(values))
	return nil
}

func (p *tidwallPeer) readAll(fn func(value []byte)) error {
	for i := uint64(1); i < p.next; i++ {
		v, err := p.l.Read(i)
		if err != nil {
			return err
		}
		fn(v)
	}
	return nil
}

func (p *tidwallPeer) written() error { return nil }

func (p *tidwallPeer) close() error { return p.l.Close() }
