package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/crc32c"
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
			sum ^= crc32c.Update(0, buf[:n])
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

// durableAppends: the per-append durability policy (FlushMessages 1: each
// AppendBatch returns after an fdatasync covers it) with 1 and with 8
// concurrent appenders, in records per second, next to a loop of small
// writes each followed by fdatasync on the same filesystem. Eight appenders
// share fdatasyncs (group commit), so they pass the raw rate.
func (b *bench) durableAppends() error {
	n := 2000
	if b.total <= 128<<20 {
		n = 400
	}
	rawDir, err := b.freshDir("fdatasync")
	if err != nil {
		return err
	}
	raw, err := b.best(func() (time.Duration, error) {
		f, err := os.Create(filepath.Join(rawDir, "raw"))
		if err != nil {
			return 0, err
		}
		defer f.Close()
		rec := make([]byte, 100)
		t0 := time.Now()
		for i := 0; i < n; i++ {
			if _, err := f.Write(rec); err != nil {
				return 0, err
			}
			if err := fdatasync(f); err != nil {
				return 0, err
			}
		}
		return time.Since(t0), nil
	})
	if err != nil {
		return err
	}
	one := batches(1, 100) // one record of ~100 bytes
	perSync := map[int]float64{}
	run := func(appenders int) (time.Duration, error) {
		dir, err := b.freshDir(fmt.Sprintf("durable-%d", appenders))
		if err != nil {
			return 0, err
		}
		p, err := plog.Open(dir, plog.Config{FlushMessages: 1})
		if err != nil {
			return 0, err
		}
		defer p.Close()
		syncs0 := p.Stats().Syncs
		var wg sync.WaitGroup
		errs := make([]error, appenders)
		t0 := time.Now()
		for a := 0; a < appenders; a++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := a; i < n; i += appenders {
					if _, err := p.AppendBatch(one[0]); err != nil {
						errs[a] = err
						return
					}
				}
			}()
		}
		wg.Wait()
		d := time.Since(t0)
		if syncs := p.Stats().Syncs - syncs0; syncs > 0 {
			perSync[appenders] = float64(n) / float64(syncs)
		}
		return d, errors.Join(errs...)
	}
	d1, err := b.best(func() (time.Duration, error) { return run(1) })
	if err != nil {
		return err
	}
	d8, err := b.best(func() (time.Duration, error) { return run(8) })
	if err != nil {
		return err
	}
	rate := func(d time.Duration) float64 { return float64(n) / d.Seconds() }
	emit("durability.raw_fdatasync_rate", rate(raw), "syncs/s")
	emit("durability.append_1_appender", rate(d1), "records/s")
	emit("durability.append_8_appenders", rate(d8), "records/s")
	emit("durability.ratio_8_appenders_to_raw_fdatasync", rate(d8)/rate(raw), "x")
	emit("durability.records_per_fsync_8_appenders", perSync[8], "records")
	return nil
}
