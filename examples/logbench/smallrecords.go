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
	framedRun := func() (cost, error) { return b.framedWrites("small-framed", val, batches, smallBatchLen) }
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
	rs, err := b.rounds(framedRun, func() (cost, error) { return appRun(false) })
	if err != nil {
		return err
	}
	rsB, err := b.rounds(framedRun, func() (cost, error) { return appRun(true) })
	if err != nil {
		return err
	}
	framed, app, appB := rs.base, rs.cand, rsB.cand
	values := int64(smallRecords * smallRecordSize)
	emit("small_append.framed_write_throughput", gbps(values, framed.wall), "GB/s")
	emit("small_append.throughput", gbps(values, app.wall), "GB/s")
	emit("small_append.ratio_to_framed_write", ratio(framed.wall, app.wall), "x")
	emit("small_append.median_ratio_to_framed_write", rs.medianWall(), "x")
	if app.cpu > 0 {
		emit("small_append.framed_write_cpu_per_batch", float64(framed.cpu.Nanoseconds())/float64(batches)/1000, "us")
		emit("small_append.cpu_per_batch", float64(app.cpu.Nanoseconds())/float64(batches)/1000, "us")
		emit("small_append.cpu_ratio_to_framed_write", ratio(framed.cpu, app.cpu), "x")
		emit("small_append.median_cpu_ratio_to_framed_write", rs.medianCPU(), "x")
	}
	emit("small_append.allocs_per_batch", allocs, "allocs")
	emit("small_append.appendbatch_ratio_to_framed_write", ratio(rsB.base.wall, appB.wall), "x")
	emit("small_append.appendbatch_median_ratio_to_framed_write", rsB.medianWall(), "x")
	if appB.cpu > 0 {
		emit("small_append.appendbatch_cpu_per_batch", float64(appB.cpu.Nanoseconds())/float64(batches)/1000, "us")
		emit("small_append.appendbatch_cpu_ratio_to_framed_write", ratio(rsB.base.cpu, appB.cpu), "x")
		emit("small_append.appendbatch_median_cpu_ratio_to_framed_write", rsB.medianCPU(), "x")
	}
	return nil
}

// oneRecordAppend: records of 100 bytes appended one per call (a
// batch.Builder holding one record, Partition.AppendBuilder; no fsync)
// vs framing each record and writing it with its own os.File write call:
// a program that appends each record as it comes. Both loops make one
// write system call per record, so the ratio shows what partlog adds to
// it (the Builder's encoding, the append's checks, index and state
// work). The write_behind figures run the same appends under
// Config.WriteBehind, where one write carries about 16 KiB of them.
// -quick appends a quarter of the 1,000,000 records.
func (b *bench) oneRecordAppend() error {
	val := smallValue()
	n := smallRecords
	if b.total <= 128<<20 {
		n /= 4
	}
	framedRun := func() (cost, error) { return b.framedWrites("one-append-framed", val, n, 1) }
	var allocs float64
	// run appends the records to a fresh partition opened with cfg. The
	// timed loop ends with LogEndOffset, which under WriteBehind writes
	// what the buffer still holds: both loops end with every record
	// written.
	run := func(cfg plog.Config) (cost, error) {
		dir, err := b.freshDir("one-append")
		if err != nil {
			return cost{}, err
		}
		p, err := plog.Open(dir, cfg)
		if err != nil {
			return cost{}, err
		}
		defer p.Close()
		bld := batch.NewBuilder(batch.BuilderOptions{})
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		c := startClock()
		for range n {
			bld.Reset(batch.BuilderOptions{})
			if err := bld.Add(batch.Record{Value: val}); err != nil {
				c.stop()
				return cost{}, err
			}
			if _, err := p.AppendBuilder(bld); err != nil {
				c.stop()
				return cost{}, err
			}
		}
		end := p.LogEndOffset()
		d := c.stop()
		if end != int64(n) {
			return cost{}, fmt.Errorf("one_record_append: log end %d after %d appends", end, n)
		}
		runtime.ReadMemStats(&ms1)
		allocs = float64(ms1.Mallocs-ms0.Mallocs) / float64(n)
		return d, nil
	}
	rs, err := b.rounds(framedRun, func() (cost, error) { return run(plog.Config{}) })
	if err != nil {
		return err
	}
	// The same appends under Config.WriteBehind (a crash of the process
	// may lose what the 16 KiB buffer holds), in rounds of their own.
	rsWB, err := b.rounds(framedRun, func() (cost, error) { return run(plog.Config{WriteBehind: time.Millisecond}) })
	if err != nil {
		return err
	}
	perRecord := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(n) }
	emit("one_record_append.framed_write_per_record", perRecord(rs.base.wall), "ns")
	emit("one_record_append.per_record", perRecord(rs.cand.wall), "ns")
	emit("one_record_append.ratio_to_framed_write", ratio(rs.base.wall, rs.cand.wall), "x")
	emit("one_record_append.median_ratio_to_framed_write", rs.medianWall(), "x")
	if rs.cand.cpu > 0 {
		emit("one_record_append.framed_write_cpu_per_record", perRecord(rs.base.cpu), "ns")
		emit("one_record_append.cpu_per_record", perRecord(rs.cand.cpu), "ns")
		emit("one_record_append.cpu_ratio_to_framed_write", ratio(rs.base.cpu, rs.cand.cpu), "x")
		emit("one_record_append.median_cpu_ratio_to_framed_write", rs.medianCPU(), "x")
	}
	emit("one_record_append.write_behind_per_record", perRecord(rsWB.cand.wall), "ns")
	emit("one_record_append.write_behind_median_ratio_to_framed_write", rsWB.medianWall(), "x")
	if rsWB.cand.cpu > 0 {
		emit("one_record_append.write_behind_median_cpu_ratio_to_framed_write", rsWB.medianCPU(), "x")
	}
	emit("one_record_append.allocs_per_record", allocs, "allocs")
	return nil
}

// appendFramedRecord appends one framed key-value record: length, CRC-32C
// of the payload, and the payload, which is the key's length + 1 as a
// uvarint (0: a null key), the key and the value.
func appendFramedRecord(dst, key, value []byte) []byte {
	kl := uint64(0)
	if key != nil {
		kl = uint64(len(key)) + 1
	}
	var lb [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(lb[:], kl)
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, uint32(n+len(key)+len(value)))
	dst = append(dst, 0, 0, 0, 0)
	dst = append(dst, lb[:n]...)
	dst = append(dst, key...)
	dst = append(dst, value...)
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(dst[start+8:], castagnoli))
	return dst
}

// splitFramed splits a framed record's payload into its key (nil when
// null) and value; ok is false when the key length does not fit.
func splitFramed(payload []byte) (key, value []byte, ok bool) {
	kl, k := binary.Uvarint(payload)
	if k <= 0 || kl > uint64(len(payload)-k)+1 {
		return nil, nil, false
	}
	if kl > 0 {
		key = payload[k : k+int(kl)-1]
		k += int(kl) - 1
	}
	return key, payload[k:], true
}

// oneRecordReads: 1,000,000 one-record batches of 100 bytes read from
// start to end (ReadFrom of 1 MiB at a time and Records.All, each key and
// value handed to the loop) vs reading the same records framed from an
// os.File in 1 MiB reads (page cache), checking every CRC-32C and
// splitting every payload into its key and value, which is what any log
// of keyed records hands its reader (appendFramedRecord). Besides the
// wall-clock ratio it reports the ratio of the per-thread CPU times
// (Linux), the steadier figure on a shared machine, and the CPU time per
// record. The same log read through Records.Batches and Batch.All (a
// loop per batch) is reported as one_record_read.batches_all_*.
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
		framed = appendFramedRecord(framed, nil, val)
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
			for rec, err := range r.All(&dec) {
				if err != nil {
					r.Close()
					return 0, err
				}
				got += len(rec.Key) + len(rec.Value)
			}
			off = r.NextOffset()
			if err := r.Close(); err != nil {
				return 0, err
			}
		}
		return time.Since(t0), nil
	}
	readBatches := func() (time.Duration, error) {
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
					got += len(rec.Key) + len(rec.Value)
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
				key, value, ok := splitFramed(payload)
				if !ok {
					return 0, fmt.Errorf("framed record at %d: bad key length", pos)
				}
				got += len(key) + len(value)
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
	if _, err := readBatches(); err != nil {
		return err
	}
	// Each loop checks it read every value byte.
	checked := func(f func() (time.Duration, error)) func() (time.Duration, error) {
		return func() (time.Duration, error) {
			d, err := f()
			if err == nil && got != smallRecords*smallRecordSize {
				err = fmt.Errorf("one-record reads: %d value bytes read, want %d", got, smallRecords*smallRecordSize)
			}
			return d, err
		}
	}
	// The framed loop and each partlog loop take turns, round by round.
	rs, err := b.rounds(timed(checked(readFramed)), timed(checked(readLog)))
	if err != nil {
		return err
	}
	rsB, err := b.rounds(timed(checked(readFramed)), timed(checked(readBatches)))
	if err != nil {
		return err
	}
	fr, pl, ba := rs.base, rs.cand, rsB.cand
	values := int64(smallRecords * smallRecordSize)
	perRecord := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / smallRecords }
	emit("one_record_read.framed_read_throughput", gbps(values, fr.wall), "GB/s")
	emit("one_record_read.throughput", gbps(values, pl.wall), "GB/s")
	emit("one_record_read.ratio_to_framed_read", ratio(fr.wall, pl.wall), "x")
	emit("one_record_read.median_ratio_to_framed_read", rs.medianWall(), "x")
	if fr.cpu > 0 && pl.cpu > 0 {
		emit("one_record_read.framed_cpu_per_record", perRecord(fr.cpu), "ns")
		emit("one_record_read.cpu_per_record", perRecord(pl.cpu), "ns")
		emit("one_record_read.cpu_ratio_to_framed_read", ratio(fr.cpu, pl.cpu), "x")
		emit("one_record_read.median_cpu_ratio_to_framed_read", rs.medianCPU(), "x")
	}
	emit("one_record_read.batches_all_ratio_to_framed_read", ratio(rsB.base.wall, ba.wall), "x")
	emit("one_record_read.batches_all_median_ratio_to_framed_read", rsB.medianWall(), "x")
	if ba.cpu > 0 {
		emit("one_record_read.batches_all_cpu_per_record", perRecord(ba.cpu), "ns")
		emit("one_record_read.batches_all_cpu_ratio_to_framed_read", ratio(rsB.base.cpu, ba.cpu), "x")
		emit("one_record_read.batches_all_median_cpu_ratio_to_framed_read", rsB.medianCPU(), "x")
	}
	return nil
}

// onThread returns f run on a locked OS thread, keeping in *best the
// least CPU time the thread spent in a run (none where threadCPU cannot
// read it: it returns 0 there). On a shared machine the CPU time of a loop that makes no
// system call but reads is much steadier than its wall-clock time, which
// counts the time other processes held the core.
func onThread(f func() (time.Duration, error), best *time.Duration) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		c0 := threadCPU()
		d, err := f()
		if c1 := threadCPU(); c0 > 0 && c1 > c0 && (*best == 0 || c1-c0 < *best) {
			*best = c1 - c0
		}
		return d, err
	}
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

// framedWrites is the framed baseline of the small-record scenarios: in a
// fresh directory named after name, writes times os.File write calls, each
// of perWrite records of value val framed with appendFramed.
func (b *bench) framedWrites(name string, val []byte, writes, perWrite int) (cost, error) {
	dir, err := b.freshDir(name)
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
	for range writes {
		buf = buf[:0]
		for range perWrite {
			buf = appendFramed(buf, val)
		}
		if _, err := f.Write(buf); err != nil {
			c.stop()
			return cost{}, err
		}
	}
	return c.stop(), nil
}
