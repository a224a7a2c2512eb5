package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/klauspost/crc32"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

// The small-record scenarios (issue 16), each next to what a plain log of
// framed records does in the same run: every record framed as a 4-byte
// length, a 4-byte CRC-32C of the payload and the payload, in an os.File.

const (
	smallRecordSize = 100 // bytes of value per record
	smallBatchLen   = 100 // records per append
	smallRecords    = 1_000_000
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendFramed appends one framed record (length, CRC-32C, payload).
func appendFramed(dst, payload []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	dst = binary.BigEndian.AppendUint32(dst, crc32.Checksum(payload, castagnoli))
	return append(dst, payload...)
}

func smallValue() []byte {
	v := make([]byte, smallRecordSize)
	for i := range v {
		v[i] = byte(i*7 + 3)
	}
	return v
}

// smallAppend: 1,000,000 records of 100 bytes appended in batches of 100
// (batch.Builder, Partition.AppendBuilder; no fsync) vs framing the same
// records and writing each 100 with one os.File write call; and the
// allocations per batch. The same through Builder.AppendTo and
// AppendBatch (the bytes path, which checks the CRC-32C and walks the
// records) is reported as small_append.appendbatch_*, against its own
// framed runs.
func (b *bench) smallAppend() error {
	val := smallValue()
	batches := smallRecords / smallBatchLen
	framedRun := func() (cost, error) {
		dir, err := b.freshDir("small-framed")
		if err != nil {
			return cost{}, err
		}
		f, err := os.Create(filepath.Join(dir, "framed.log"))
		if err != nil {
			return cost{}, err
		}
		defer f.Close()
		var buf []byte
		c := startClock()
		for range batches {
			buf = buf[:0]
			for range smallBatchLen {
				buf = appendFramed(buf, val)
			}
			if _, err := f.Write(buf); err != nil {
				c.stop()
				return cost{}, err
			}
		}
		return c.stop(), nil
	}
	var allocs float64
	// appRun appends through AppendBuilder, or through AppendTo and
	// AppendBatch when viaBytes.
	appRun := func(viaBytes bool) (cost, error) {
		dir, err := b.freshDir("small-append")
		if err != nil {
			return cost{}, err
		}
		p, err := plog.Open(dir, plog.Config{})
		if err != nil {
			return cost{}, err
		}
		defer p.Close()
		bld := batch.NewBuilder(batch.BuilderOptions{})
		var buf []byte
		ts := time.Now().UnixMilli()
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		c := startClock()
		for range batches {
			bld.Reset(batch.BuilderOptions{})
			for range smallBatchLen {
				if err := bld.Add(batch.Record{Value: val, Timestamp: ts}); err != nil {
					c.stop()
					return cost{}, err
				}
			}
			if !viaBytes {
				if _, err := p.AppendBuilder(bld); err != nil {
					c.stop()
					return cost{}, err
				}
				continue
			}
			if buf, err = bld.AppendTo(buf[:0]); err != nil {
				c.stop()
				return cost{}, err
			}
			if _, err := p.AppendBatch(buf); err != nil {
				c.stop()
				return cost{}, err
			}
		}
		d := c.stop()
		runtime.ReadMemStats(&ms1)
		if !viaBytes {
			allocs = float64(ms1.Mallocs-ms0.Mallocs) / float64(batches)
		}
		return d, nil
	}
	framed, app, err := b.bestPair(framedRun, func() (cost, error) { return appRun(false) })
	if err != nil {
		return err
	}
	framedB, appB, err := b.bestPair(framedRun, func() (cost, error) { return appRun(true) })
	if err != nil {
		return err
	}
	values := int64(smallRecords * smallRecordSize)
	emit("small_append.framed_write_throughput", gbps(values, framed.wall), "GB/s")
	emit("small_append.throughput", gbps(values, app.wall), "GB/s")
	emit("small_append.ratio_to_framed_write", ratio(framed.wall, app.wall), "x")
	if app.cpu > 0 {
		emit("small_append.framed_write_cpu_per_batch", float64(framed.cpu.Nanoseconds())/float64(batches)/1000, "us")
		emit("small_append.cpu_per_batch", float64(app.cpu.Nanoseconds())/float64(batches)/1000, "us")
		emit("small_append.cpu_ratio_to_framed_write", ratio(framed.cpu, app.cpu), "x")
	}
	emit("small_append.allocs_per_batch", allocs, "allocs")
	emit("small_append.appendbatch_ratio_to_framed_write", ratio(framedB.wall, appB.wall), "x")
	if appB.cpu > 0 {
		emit("small_append.appendbatch_cpu_per_batch", float64(appB.cpu.Nanoseconds())/float64(batches)/1000, "us")
		emit("small_append.appendbatch_cpu_ratio_to_framed_write", ratio(framedB.cpu, appB.cpu), "x")
	}
	return nil
}

// oneRecordReads: 1,000,000 one-record batches of 100 bytes read from
// start to end (ReadFrom of 1 MiB at a time, Records.Batches, Batch.All,
// each value touched) vs reading the same records framed from an os.File
// in 1 MiB reads (page cache) and checking every CRC-32C.
func (b *bench) oneRecordReads() error {
	val := smallValue()
	dir, err := b.freshDir("one-record")
	if err != nil {
		return err
	}
	p, err := plog.Open(dir, plog.Config{})
	if err != nil {
		return err
	}
	defer p.Close()
	bld := batch.NewBuilder(batch.BuilderOptions{})
	ts := time.Now().UnixMilli()
	var buf, framed []byte
	for range smallRecords {
		bld.Reset(batch.BuilderOptions{})
		if err := bld.Add(batch.Record{Value: val, Timestamp: ts}); err != nil {
			return err
		}
		if buf, err = bld.AppendTo(buf[:0]); err != nil {
			return err
		}
		if _, err := p.AppendBatch(buf); err != nil {
			return err
		}
		framed = appendFramed(framed, val)
	}
	path := filepath.Join(dir, "framed.log")
	if err := os.WriteFile(path, framed, 0o644); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	size := len(framed)
	framed = nil
	var dec batch.Decoder
	var got int
	readLog := func() (time.Duration, error) {
		got = 0
		t0 := time.Now()
		for off := int64(0); off < p.HighWatermark(); {
			r, err := p.ReadFrom(off, 1<<20)
			if err != nil {
				return 0, err
			}
			for bt, err := range r.Batches() {
				if err != nil {
					r.Close()
					return 0, err
				}
				for rec, err := range bt.All(&dec) {
					if err != nil {
						r.Close()
						return 0, err
					}
					got += len(rec.Value)
				}
			}
			off = r.NextOffset()
			if err := r.Close(); err != nil {
				return 0, err
			}
		}
		return time.Since(t0), nil
	}
	rbuf := make([]byte, 1<<20)
	readFramed := func() (time.Duration, error) {
		got = 0
		t0 := time.Now()
		carry := 0
		for pos := int64(0); pos < int64(size); {
			m, err := f.ReadAt(rbuf[carry:], pos)
			if m == 0 && err != nil {
				return 0, err
			}
			pos += int64(m)
			data := rbuf[:carry+m]
			for len(data) >= 8 {
				l := int(binary.BigEndian.Uint32(data))
				if len(data) < 8+l {
					break
				}
				payload := data[8 : 8+l]
				if crc32.Checksum(payload, castagnoli) != binary.BigEndian.Uint32(data[4:]) {
					return 0, fmt.Errorf("framed record at %d: bad CRC-32C", pos)
				}
				got += len(payload)
				data = data[8+l:]
			}
			carry = copy(rbuf, data)
		}
		return time.Since(t0), nil
	}
	// Warm the page cache and the mapping once.
	if _, err := readLog(); err != nil {
		return err
	}
	if _, err := readFramed(); err != nil {
		return err
	}
	fr, err := b.best(readFramed)
	if err != nil {
		return err
	}
	pl, err := b.best(readLog)
	if err != nil {
		return err
	}
	if got != smallRecords*smallRecordSize {
		return fmt.Errorf("one-record reads: %d value bytes read, want %d", got, smallRecords*smallRecordSize)
	}
	values := int64(smallRecords * smallRecordSize)
	emit("one_record_read.framed_read_throughput", gbps(values, fr), "GB/s")
	emit("one_record_read.throughput", gbps(values, pl), "GB/s")
	emit("one_record_read.ratio_to_framed_read", fr.Seconds()/pl.Seconds(), "x")
	return nil
}

// reopenNonGrowing: Open after a clean Close of a 1 MiB and a 256 MiB log
// whose timestamps are all the same (the time index's last regular entry
// is then at the start of the segment): no batch data is read, so both
// cost the same.
func (b *bench) reopenNonGrowing() error {
	open := map[int64]time.Duration{}
	for _, size := range []int64{1 << 20, 256 << 20} {
		dir, err := b.freshDir(fmt.Sprintf("reopen-constant-%d", size>>20))
		if err != nil {
			return err
		}
		if _, err := fillLogTimes(dir, size, false); err != nil {
			return err
		}
		if open[size], err = b.best(func() (time.Duration, error) { return timeOpen(dir, plog.Config{}) }); err != nil {
			return err
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	emit("reopen_constant_ts.clean_reopen_1MiB", float64(open[1<<20].Microseconds())/1000, "ms")
	emit("reopen_constant_ts.clean_reopen_256MiB", float64(open[256<<20].Microseconds())/1000, "ms")
	emit("reopen_constant_ts.ratio_large_to_small", open[256<<20].Seconds()/open[1<<20].Seconds(), "x")
	return nil
}
