package main

import (
	"slices"
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
// background. The same appends into one segment large enough never to
// roll run first, in the same process (rolls.no_roll_*): the tail the
// machine adds without any roll, for comparison.
func (b *bench) rollLatency() error {
	set := batches(256, 16<<10)
	n := int(b.total / 2 / int64(len(set[0])))
	noRoll := min(int64(n+64)*int64(len(set[0])), 1<<30)
	base, _, err := b.appendLatencies(set, n, "rolls-baseline", noRoll)
	if err != nil {
		return err
	}
	lat, rolling, err := b.appendLatencies(set, n, "rolls", rollSegmentBytes)
	if err != nil {
		return err
	}
	pct := func(l []time.Duration, q float64) time.Duration { return l[min(len(l)-1, int(q*float64(len(l))))] }
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	emit("rolls.count", float64(len(rolling)), "rolls")
	emit("rolls.append_latency_p50", us(pct(lat, 0.50)), "us")
	emit("rolls.append_latency_p99", us(pct(lat, 0.99)), "us")
	emit("rolls.append_latency_p999", us(pct(lat, 0.999)), "us")
	emit("rolls.append_latency_max", us(lat[len(lat)-1]), "us")
	emit("rolls.ratio_p999_to_p50", float64(pct(lat, 0.999))/float64(pct(lat, 0.50)), "x")
	// The appends that rolled, alone: their fastest and their median
	// show the roll's own cost, which load on the machine inflates less
	// than the tail percentiles above.
	if len(rolling) > 0 {
		slices.Sort(rolling)
		emit("rolls.rolling_append_min", us(rolling[0]), "us")
		emit("rolls.rolling_append_p50", us(rolling[len(rolling)/2]), "us")
	}
	emit("rolls.no_roll_p50", us(pct(base, 0.50)), "us")
	emit("rolls.no_roll_p999", us(pct(base, 0.999)), "us")
	emit("rolls.no_roll_ratio_p999_to_p50", float64(pct(base, 0.999))/float64(pct(base, 0.50)), "x")
	return nil
}

// appendLatencies appends n batches of set into a fresh partition whose
// segments are segmentBytes long and returns each append's latency,
// sorted, and those of the appends that rolled, in order.
func (b *bench) appendLatencies(set [][]byte, n int, name string, segmentBytes int64) (lat, rolling []time.Duration, err error) {
	dir, err := b.freshDir(name)
	if err != nil {
		return nil, nil, err
	}
	p, err := plog.Open(dir, plog.Config{SegmentBytes: segmentBytes})
	if err != nil {
		return nil, nil, err
	}
	defer p.Close()
	lat = make([]time.Duration, n)
	rolls := p.Stats().Rolls
	for i := range n {
		t0 := time.Now()
		if _, err := p.AppendBatch(set[i%len(set)]); err != nil {
			return nil, nil, err
		}
		lat[i] = time.Since(t0)
		if r := p.Stats().Rolls; r != rolls {
			rolls = r
			rolling = append(rolling, lat[i])
		}
	}
	slices.Sort(lat)
	return lat, rolling, nil
}
