package main

import (
	"errors"
	"fmt"
	stdcrc32 "hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

// cleanShutdownFile is Kafka's clean-shutdown marker, which Close writes
// and Open removes; deleting it makes the next Open recover as after a
// crash.
const cleanShutdownFile = ".kafka_cleanshutdown"

// recoveryPointFile is Kafka's recovery point checkpoint, which a partition
// opened alone keeps in its directory.
const recoveryPointFile = "recovery-point-offset-checkpoint"

// fillLog writes about size bytes of 16 KiB batches into a new partition in
// dir and closes it cleanly. Timestamps grow batch by batch, as a
// producer's wall clock does (reopenNonGrowing measures constant ones).
func fillLog(dir string, size int64) (int64, error) { return fillLogTimes(dir, size, true) }

// fillLogTimes is fillLog with a timestamp growing from batch to batch
// (growing) or the same one in every batch.
func fillLogTimes(dir string, size int64, growing bool) (int64, error) {
	p, err := plog.Open(dir, plog.Config{})
	if err != nil {
		return 0, err
	}
	value := make([]byte, 1000)
	bld := batch.NewBuilder(batch.BuilderOptions{})
	var buf []byte
	var total int64
	for i := int64(0); total < size; i++ {
		bld.Reset(batch.BuilderOptions{})
		ts := int64(1_700_000_000_000)
		if growing {
			ts += i
		}
		for r := 0; r < 16; r++ {
			if err := bld.Add(batch.Record{Key: fmt.Appendf(nil, "k%d", r), Value: value, Timestamp: ts}); err != nil {
				p.Close()
				return 0, err
			}
		}
		if buf, err = bld.AppendTo(buf[:0]); err != nil {
			p.Close()
			return 0, err
		}
		if _, err := p.AppendBatch(buf); err != nil {
			p.Close()
			return 0, err
		}
		total += int64(len(buf))
	}
	return total, p.Close()
}

// timeOpen times Open of dir (Close is not timed).
func timeOpen(dir string, cfg plog.Config) (time.Duration, error) {
	t0 := time.Now()
	p, err := plog.Open(dir, cfg)
	d := time.Since(t0)
	if err != nil {
		return 0, err
	}
	return d, p.Close()
}

// reopenAndRecover: Open after a clean Close of a small and a large log
// (which should cost the same: no batch data is read), and Open after a
// simulated crash of the large log (every batch validated, indexes
// rebuilt) next to reading the same file and computing its CRC-32C.
func (b *bench) reopenAndRecover() error {
	small, err := b.freshDir("reopen-small")
	if err != nil {
		return err
	}
	if _, err := fillLog(small, 1<<20); err != nil {
		return err
	}
	large, err := b.freshDir("reopen-large")
	if err != nil {
		return err
	}
	size, err := fillLog(large, b.total)
	if err != nil {
		return err
	}
	clean := func(dir string) func() (time.Duration, error) {
		return func() (time.Duration, error) { return timeOpen(dir, plog.Config{}) }
	}
	ds, err := b.best(clean(small))
	if err != nil {
		return err
	}
	dl, err := b.best(clean(large))
	if err != nil {
		return err
	}
	unclean, err := b.best(func() (time.Duration, error) {
		for _, name := range []string{cleanShutdownFile, recoveryPointFile} {
			if err := os.Remove(filepath.Join(large, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return 0, err
			}
		}
		return timeOpen(large, plog.Config{})
	})
	if err != nil {
		return err
	}
	raw, err := b.best(func() (time.Duration, error) { return readAndChecksum(large) })
	if err != nil {
		return err
	}
	emit("recovery.clean_reopen_1MiB", float64(ds.Microseconds())/1000, "ms")
	emit(fmt.Sprintf("recovery.clean_reopen_%dMiB", size>>20), float64(dl.Microseconds())/1000, "ms")
	emit("recovery.clean_reopen_ratio_large_to_small", dl.Seconds()/ds.Seconds(), "x")
	emit("recovery.raw_read_crc32c_throughput", gbps(size, raw), "GB/s")
	emit("recovery.unclean_throughput", gbps(size, unclean), "GB/s")
	emit("recovery.unclean_ratio_to_raw_read_crc32c", raw.Seconds()/unclean.Seconds(), "x")
	return nil
}

// stdCastagnoli is the standard library's CRC-32C table: its code is the
// faster of the two public CRC-32C implementations at hand (hash/crc32,
// klauspost/crc32) on large buffers.
var stdCastagnoli = stdcrc32.MakeTable(stdcrc32.Castagnoli)

// readAndChecksum reads every .log file of dir in 1 MiB steps and computes
// its CRC-32C: the machine's limit for a recovery scan.
func readAndChecksum(dir string) (time.Duration, error) {
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	var sum uint32
	t0 := time.Now()
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			return 0, err
		}
		for {
			n, err := f.Read(buf)
			sum ^= stdcrc32.Update(0, stdCastagnoli, buf[:n])
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				f.Close()
				return 0, err
			}
		}
		if err := f.Close(); err != nil {
			return 0, err
		}
	}
	_ = sum
	return time.Since(t0), nil
}

// durableRecord is the record the durability measurement appends: one
// record with a 100-byte value in a batch of its own (about 170 bytes).
// The raw baseline writes these same bytes.
func durableRecord() ([]byte, error) {
	bld := batch.NewBuilder(batch.BuilderOptions{})
	value := make([]byte, 100)
	for i := range value {
		value[i] = byte(i)
	}
	if err := bld.Add(batch.Record{Key: []byte("k0000000"), Value: value, Timestamp: 1_700_000_000_000}); err != nil {
		return nil, err
	}
	b, err := bld.Build()
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), b...), nil
}

// syncRound is what one round of a durability loop took.
type syncRound struct {
	elapsed time.Duration
	// write and sync are the raw loop's time in write and in fdatasync;
	// for a partition sync is Stats.SyncTime's growth.
	write, sync time.Duration
	// syncs is the number of fdatasyncs (for a partition, Stats.Syncs'
	// growth); records the records made durable.
	syncs, records int64
}

// rawSyncRound is the baseline: one writer appends rec to a new file in dir
// n times per records each, each per-th write followed by fdatasync (the
// file grows, as a partition's .log does, so every fdatasync also carries
// the new size). With per 1 it is the raw fdatasync rate; with per 8 it is
// the most any group commit of 8 appenders could reach on this disk (the
// same bytes per fdatasync, none of the hand-offs).
func rawSyncRound(dir string, rec []byte, n, per int) (syncRound, error) {
	f, err := os.Create(filepath.Join(dir, "raw"))
	if err != nil {
		return syncRound{}, err
	}
	defer f.Close()
	if err := settle(dir); err != nil {
		return syncRound{}, err
	}
	var r syncRound
	t0 := time.Now()
	for i := 0; i < n; i++ {
		w0 := time.Now()
		for range per {
			if _, err := f.Write(rec); err != nil {
				return syncRound{}, err
			}
		}
		s0 := time.Now()
		if err := fdatasync(f); err != nil {
			return syncRound{}, err
		}
		r.write += s0.Sub(w0)
		r.sync += time.Since(s0)
	}
	r.elapsed = time.Since(t0)
	r.syncs, r.records = int64(n), int64(n*per)
	return r, f.Close()
}

// durableRound appends rec n times from appenders goroutines (each append
// returns after an fdatasync covers it) to a new partition in dir
// (FlushMessages 1), and reports the fdatasyncs the partition ran.
func durableRound(dir string, rec []byte, n, appenders int) (syncRound, error) {
	p, err := plog.Open(dir, plog.Config{FlushMessages: 1})
	if err != nil {
		return syncRound{}, err
	}
	if err := settle(dir); err != nil {
		return syncRound{}, errors.Join(err, p.Close())
	}
	before := p.Stats()
	var wg sync.WaitGroup
	errs := make([]error, appenders)
	t0 := time.Now()
	for a := 0; a < appenders; a++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := a; i < n; i += appenders {
				if _, err := p.AppendBatch(rec); err != nil {
					errs[a] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	after := p.Stats()
	if err := errors.Join(errors.Join(errs...), p.Close()); err != nil {
		return syncRound{}, err
	}
	return syncRound{
		elapsed: elapsed,
		sync:    after.SyncTime - before.SyncTime,
		syncs:   after.Syncs - before.Syncs,
		records: int64(n),
	}, nil
}

// add accumulates o into r.
func (r *syncRound) add(o syncRound) {
	r.elapsed += o.elapsed
	r.write += o.write
	r.sync += o.sync
	r.syncs += o.syncs
	r.records += o.records
}

// rate is records per second.
func (r syncRound) rate() float64 { return float64(r.records) / r.elapsed.Seconds() }

// perSync is d per fdatasync in microseconds.
func (r syncRound) perSync(d time.Duration) float64 {
	return float64(d.Microseconds()) / float64(max(r.syncs, 1))
}

// durableAppends: the per-append durability policy (FlushMessages 1: each
// AppendBatch returns after an fdatasync covers it) with 1 and with 8
// concurrent appenders, in records per second, next to one writer's loop
// writing the same record and fdatasyncing it, on the same filesystem.
// Eight appenders share fdatasyncs (group commit), so they pass the raw
// rate. A fourth loop writes 8 records per fdatasync from one writer: the
// ceiling of an 8-record group commit on this disk, whose fdatasyncs
// carry 8 times the bytes of the raw loop's.
//
// The loops run in interleaved rounds (in a rotating order; each round on
// a new file or partition, timed after a syncfs wrote back what earlier
// rounds left pending) and each figure sums its rounds, so that all of
// them meet the same load: on a shared disk the fdatasync latency moves
// by several times within seconds, which made "best of three" of loops
// run one after the other compare different disks. Rounds are short (50
// fdatasyncs with -quick) and many, so that a burst of other processes'
// I/O, which lasts longer than a round, lands on every loop alike. A
// round of 8 appenders appends 8 times the raw round's records, so that
// both run about as many fdatasyncs.
//
// The per-cycle figures split the 8-appender time into the fdatasync
// itself (Stats.SyncTime per fdatasync) and the rest of each cycle (the
// writes, the hand-off to the woken appenders), next to the raw loops'
// write and fdatasync times.
func (b *bench) durableAppends() error {
	n, rounds := 100, 48
	if b.total <= 128<<20 {
		n, rounds = 50, 32
	}
	rec, err := durableRecord()
	if err != nil {
		return err
	}
	rawDir, err := b.freshDir("fdatasync")
	if err != nil {
		return err
	}
	var raw, raw8, one, eight syncRound
	ratios := make([]float64, 0, rounds)
	const loops = 4
	for r := 0; r < rounds; r++ {
		var rr, r8 syncRound
		for step := 0; step < loops; step++ {
			var err error
			switch (r + step) % loops {
			case 0:
				rr, err = rawSyncRound(rawDir, rec, n, 1)
				raw.add(rr)
			case 1:
				var dir string
				if dir, err = b.freshDir("durable-8"); err == nil {
					r8, err = durableRound(dir, rec, 8*n, 8)
					eight.add(r8)
				}
			case 2:
				var dir string
				if dir, err = b.freshDir("durable-1"); err == nil {
					var r1 syncRound
					r1, err = durableRound(dir, rec, n, 1)
					one.add(r1)
				}
			case 3:
				var rb syncRound
				rb, err = rawSyncRound(rawDir, rec, n, 8)
				raw8.add(rb)
			}
			if err != nil {
				return err
			}
		}
		ratios = append(ratios, r8.rate()/rr.rate())
	}
	emit("durability.raw_fdatasync_rate", raw.rate(), "syncs/s")
	emit("durability.append_1_appender", one.rate(), "records/s")
	emit("durability.append_8_appenders", eight.rate(), "records/s")
	emit("durability.ratio_8_appenders_to_raw_fdatasync", eight.rate()/raw.rate(), "x")
	emit("durability.ratio_8_appenders_round_median", median(ratios), "x")
	emit("durability.records_per_fsync_8_appenders", float64(eight.records)/float64(max(eight.syncs, 1)), "records")
	emit("durability.raw_8_per_fdatasync_rate", raw8.rate(), "records/s")
	emit("durability.ratio_8_appenders_to_raw_8_per_fdatasync", eight.rate()/raw8.rate(), "x")
	emit("durability.raw_cycle", raw.perSync(raw.elapsed), "us")
	emit("durability.raw_cycle_fdatasync", raw.perSync(raw.sync), "us")
	emit("durability.raw_cycle_write", raw.perSync(raw.write), "us")
	emit("durability.raw_8_cycle_fdatasync", raw8.perSync(raw8.sync), "us")
	emit("durability.raw_8_cycle_write", raw8.perSync(raw8.write), "us")
	emit("durability.cycle_8_appenders", eight.perSync(eight.elapsed), "us")
	emit("durability.cycle_8_appenders_fdatasync", eight.perSync(eight.sync), "us")
	emit("durability.cycle_8_appenders_rest", eight.perSync(eight.elapsed-eight.sync), "us")
	return nil
}
