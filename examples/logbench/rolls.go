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
// lock a roll seals the segment (its final time index entry) and renames
// the next segment's files, made ahead in the background as a spare (it
// creates them itself when no spare is ready); the append that rolls
// waits for that, and so do appends queued behind it. The trim of the
// sealed segment's indexes, its flush and the recovery point checkpoint
// run in the background.
func (b *bench) rollLatency() error {
	set := batches(256, 16<<10)
	n := int(b.total / 2 / int64(len(set[0])))
	dir, err := b.freshDir("rolls")
	if err != nil {
		return err
	}
	p, err := plog.Open(dir, plog.Config{SegmentBytes: rollSegmentBytes})
	if err != nil {
		return err
	}
	defer p.Close()
	lat := make([]time.Duration, n)
	var rolling []time.Duration // the appends that rolled
	rolls := p.Stats().Rolls
	for i := range n {
		t0 := time.Now()
		if _, err := p.AppendBatch(set[i%len(set)]); err != nil {
			return err
		}
		lat[i] = time.Since(t0)
		if r := p.Stats().Rolls; r != rolls {
			rolls = r
			rolling = append(rolling, lat[i])
		}
	}
	slices.Sort(lat)
	pct := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	emit("rolls.count", float64(rolls), "rolls")
	emit("rolls.append_latency_p50", us(pct(0.50)), "us")
	emit("rolls.append_latency_p99", us(pct(0.99)), "us")
	emit("rolls.append_latency_p999", us(pct(0.999)), "us")
	emit("rolls.append_latency_max", us(lat[len(lat)-1]), "us")
	emit("rolls.ratio_p999_to_p50", float64(pct(0.999))/float64(pct(0.50)), "x")
	// The appends that rolled, alone: their fastest and their median
	// show the roll's own cost, which load on the machine inflates less
	// than the tail percentiles above.
	if len(rolling) > 0 {
		slices.Sort(rolling)
		emit("rolls.rolling_append_min", us(rolling[0]), "us")
		emit("rolls.rolling_append_p50", us(rolling[len(rolling)/2]), "us")
	}
	return nil
}
