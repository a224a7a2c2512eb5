package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	plog "github.com/partlog/partlog/log"
)

// rollSegmentBytes is the segment size of the rolls scenario: small enough
// that a quick run rolls a few dozen times.
const rollSegmentBytes = 4 << 20

// rollLatency: the latency of each AppendBatch of 16 KiB batches (no
// fsync) into segments of 4 MiB, so that the appends cross many rolls, as
// percentiles, and the appends that rolled alone. Under the partition
// lock a roll seals the segment (its final time index entry) and makes
// the next segment, made ahead in the background as a spare, the active
// one at its base offset in memory: no filesystem operation (it creates
// the files itself when no spare is ready). The renames of the spare's
// files to the base's names, the trim of the sealed segment's indexes,
// its flush and the recovery point checkpoint run after the lock, in the
// background.
//
// The machine's own limits are measured in the same run, with the same
// batches: the plain os.File write loop into one file that never rolls
// (rolls.raw_write_*: the tail a write into the page cache has on this
// machine at all), and the plain rolling loop (rolls.raw_rolling_*: a new
// file every rollSegmentBytes, the previous one fsynced and closed by a
// goroutine, the least any rolling log that makes its sealed segments
// durable must do). The same appends into one partlog segment large
// enough never to roll (rolls.no_roll_*) separate partlog's tail from the
// rolls'.
//
// A tail percentile of a few thousand appends is a handful of samples,
// which whatever else the machine does moves a lot, so the four loops
// take turns in rounds (partlog, raw rolling, raw plain, partlog without
// rolls; every loop syncs and removes its files after its timed part,
// and the filesystem is settled before the next one), and each figure is
// the median over the rounds: percentiles per round, and the ratios
// between loops per round (the loops of one round saw the same machine).
func (b *bench) rollLatency() error {
	set := batches(256, 16<<10)
	n := int(b.total / int64(len(set[0])))
	rounds := 5
	if b.total > 128<<20 {
		rounds = 7
	}
	noRoll := min(int64(n+64)*int64(len(set[0])), 1<<31)
	var (
		app, raw, rawRoll, base []latencies
		rolling                 []time.Duration
	)
	for range rounds {
		l, err := b.appendLatencies(set, n, "rolls", rollSegmentBytes)
		if err != nil {
			return err
		}
		app = append(app, l)
		rolling = append(rolling, l.rolling...)
		if l, err = b.rawRollingLatencies(set, n, "rolls-raw-rolling", rollSegmentBytes); err != nil {
			return err
		}
		rawRoll = append(rawRoll, l)
		if l, err = b.rawRollingLatencies(set, n, "rolls-raw", 0); err != nil {
			return err
		}
		raw = append(raw, l)
		if l, err = b.appendLatencies(set, n, "rolls-baseline", noRoll); err != nil {
			return err
		}
		base = append(base, l)
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	med := func(ls []latencies, f func(l latencies) float64) float64 {
		v := make([]float64, len(ls))
		for i, l := range ls {
			v[i] = f(l)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	at := func(q float64) func(l latencies) float64 { return func(l latencies) float64 { return us(l.pct(q)) } }
	maxOf := func(l latencies) float64 { return us(l.lat[len(l.lat)-1]) }
	tail := func(l latencies) float64 { return l.ratio() }
	// per pairs each round's figure of partlog's rolling run with the
	// same round's of another loop.
	per := func(other []latencies, f func(a, o latencies) float64) float64 {
		v := make([]float64, len(app))
		for i := range app {
			v[i] = f(app[i], other[i])
		}
		slices.Sort(v)
		return v[len(v)/2]
	}

	emit("rolls.rounds", float64(rounds), "rounds")
	emit("rolls.appends_per_round", float64(n), "appends")
	emit("rolls.count", float64(app[0].rolls), "rolls")
	emit("rolls.append_latency_p50", med(app, at(0.50)), "us")
	emit("rolls.append_latency_p99", med(app, at(0.99)), "us")
	emit("rolls.append_latency_p999", med(app, at(0.999)), "us")
	emit("rolls.append_latency_max", med(app, maxOf), "us")
	emit("rolls.ratio_p999_to_p50", med(app, tail), "x")
	// The appends that rolled, alone (every round's): their fastest and
	// their median show the roll's own cost, which load on the machine
	// inflates less than the tail percentiles above.
	if len(rolling) > 0 {
		slices.Sort(rolling)
		emit("rolls.rolling_append_min", us(rolling[0]), "us")
		emit("rolls.rolling_append_p50", us(rolling[len(rolling)/2]), "us")
	}
	emit("rolls.no_roll_p50", med(base, at(0.50)), "us")
	emit("rolls.no_roll_p999", med(base, at(0.999)), "us")
	emit("rolls.no_roll_ratio_p999_to_p50", med(base, tail), "x")

	emit("rolls.raw_write_p50", med(raw, at(0.50)), "us")
	emit("rolls.raw_write_p99", med(raw, at(0.99)), "us")
	emit("rolls.raw_write_p999", med(raw, at(0.999)), "us")
	emit("rolls.raw_write_ratio_p999_to_p50", med(raw, tail), "x")
	emit("rolls.raw_rolling_p50", med(rawRoll, at(0.50)), "us")
	emit("rolls.raw_rolling_p99", med(rawRoll, at(0.99)), "us")
	emit("rolls.raw_rolling_p999", med(rawRoll, at(0.999)), "us")
	emit("rolls.raw_rolling_ratio_p999_to_p50", med(rawRoll, tail), "x")
	// partlog's tail against the machine's: its p99.9 over the raw
	// rolling loop's (1 = as good as the least a rolling log must do),
	// and its p99.9/p50 over the plain write loop's (1 = the tail the
	// page cache alone has).
	emit("rolls.p999_to_raw_rolling_p999", per(rawRoll, func(a, o latencies) float64 {
		return float64(a.pct(0.999)) / float64(o.pct(0.999))
	}), "x")
	emit("rolls.ratio_to_raw_write_ratio", per(raw, func(a, o latencies) float64 { return a.ratio() / o.ratio() }), "x")
	// partlog's median append across rolls over the plain write loop's
	// (1 = a write into the page cache and nothing else), per round.
	emit("rolls.p50_to_raw_write_p50", per(raw, latencies.p50Over), "x")
	return nil
}

// latencies are the latencies of one timed loop.
type latencies struct {
	// lat holds every append's latency, sorted.
	lat []time.Duration
	// rolling holds the latencies of the appends that rolled, in order.
	rolling []time.Duration
	// rolls is how many appends rolled.
	rolls int
}

// pct returns the q quantile (0 <= q < 1).
func (l latencies) pct(q float64) time.Duration {
	return l.lat[min(len(l.lat)-1, int(q*float64(len(l.lat))))]
}

// ratio is p99.9 over p50.
func (l latencies) ratio() float64 { return float64(l.pct(0.999)) / float64(l.pct(0.50)) }

// p50Over returns l's median latency over o's (the same round's plain
// write loop for rolls.p50_to_raw_write_p50).
func (l latencies) p50Over(o latencies) float64 { return float64(l.pct(0.50)) / float64(o.pct(0.50)) }

// appendLatencies appends n batches of set into a fresh partition whose
// segments are segmentBytes long and returns each append's latency and
// those of the appends that rolled. The partition is closed (its
// segments synced) and removed, and the filesystem settled, after the
// timed appends.
func (b *bench) appendLatencies(set [][]byte, n int, name string, segmentBytes int64) (l latencies, err error) {
	dir, err := b.freshDir(name)
	if err != nil {
		return l, err
	}
	p, err := plog.Open(dir, plog.Config{SegmentBytes: segmentBytes})
	if err != nil {
		return l, err
	}
	l.lat = make([]time.Duration, n)
	rolls := p.Stats().Rolls
	for i := range n {
		t0 := time.Now()
		if _, err := p.AppendBatch(set[i%len(set)]); err != nil {
			p.Close()
			return l, err
		}
		l.lat[i] = time.Since(t0)
		if r := p.Stats().Rolls; r != rolls {
			rolls = r
			l.rolling = append(l.rolling, l.lat[i])
		}
	}
	l.rolls = len(l.rolling)
	slices.Sort(l.lat)
	return l, errors.Join(p.Close(), cleanUp(dir))
}

// rawRollingLatencies writes n batches of set with os.File.Write into
// files of dir/name and returns each write's latency. With segmentBytes
// > 0 it starts a new file when the next batch would take the current
// one past segmentBytes (the file created inside the timed write, as a
// roll does) and a goroutine fsyncs and closes the previous one: the
// plain rolling loop. With 0 every batch goes into one file. The last
// file is synced and everything removed after the timed writes.
func (b *bench) rawRollingLatencies(set [][]byte, n int, name string, segmentBytes int64) (l latencies, err error) {
	dir, err := b.freshDir(name)
	if err != nil {
		return l, err
	}
	files := 0
	create := func() (*os.File, error) {
		files++
		return os.OpenFile(filepath.Join(dir, fmt.Sprintf("%020d.log", files)), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	}
	f, err := create()
	if err != nil {
		return l, err
	}
	var (
		wg      sync.WaitGroup
		errMu   sync.Mutex
		bgErr   error
		written int64
	)
	l.lat = make([]time.Duration, n)
	for i := range n {
		bt := set[i%len(set)]
		t0 := time.Now()
		if segmentBytes > 0 && written > 0 && written+int64(len(bt)) > segmentBytes {
			nf, cerr := create()
			if cerr != nil {
				err = cerr
				break // f, still open, is closed below
			}
			old := f
			f = nf
			written = 0
			l.rolls++
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := errors.Join(old.Sync(), old.Close())
				errMu.Lock()
				bgErr = errors.Join(bgErr, err)
				errMu.Unlock()
			}()
		}
		if _, err = f.Write(bt); err != nil {
			break
		}
		l.lat[i] = time.Since(t0)
		written += int64(len(bt))
	}
	wg.Wait()
	err = errors.Join(err, f.Sync(), f.Close())
	slices.Sort(l.lat)
	return l, errors.Join(err, bgErr, cleanUp(dir))
}

// cleanUp removes a timed loop's directory and settles the filesystem, so
// that the next loop does not pay for this one's removals.
func cleanUp(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return settle(filepath.Dir(dir))
}
