package logtest

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

// Check compares the partition with the model and returns the first
// difference (fail the test on it: require.NoError(t, logtest.Check(p, m))):
//
//   - the log start offset, high watermark and log end offset agree;
//   - the partition's files pass Partition.Verify (batches valid and
//     contiguous, index entries at batch starts inside their batches, time
//     index entries on the first batch reaching their timestamp);
//   - at every offset of every batch, ReadFromFollower returns that batch
//     first, byte for byte, and ReadFrom returns it when it lies wholly
//     below the high watermark and nothing otherwise;
//   - reads outside [log start, log end] fail with ErrOffsetOutOfRange,
//     and reads at the visibility bounds are empty;
//   - reading from the log start to the log end with several byte limits
//     returns the model's batches in order, whole, each read within its
//     limit unless it holds a single batch;
//   - OffsetForTimestamp agrees with the model for every record timestamp
//     (and one past it) and for the Latest and Earliest sentinels, and the
//     MaxTimestamp answer is a visible record with the largest visible
//     timestamp, with the leader epochs of every answer;
//   - the leader epoch caches agree, and so does EndOffsetForEpoch for
//     every cached epoch, its neighbours and the undefined epoch;
//   - unless the producer state is unknown (after Crash), the last stable
//     offset, the open transactions and the read_committed "latest" offset
//     agree, and reading read_committed from the log start returns the
//     model's batches below the last stable offset and reports exactly the
//     model's aborted transactions overlapping them.
//
// Batches of more than 64 records are probed at their first, last and a
// few middle offsets rather than at every one.
func Check(p *plog.Partition, m *Model) error {
	if got, want := p.LogStartOffset(), m.LogStartOffset(); got != want {
		return fmt.Errorf("partlog/logtest: log start offset %d, model %d", got, want)
	}
	if got, want := p.HighWatermark(), m.HighWatermark(); got != want {
		return fmt.Errorf("partlog/logtest: high watermark %d, model %d", got, want)
	}
	if got, want := p.LogEndOffset(), m.LogEndOffset(); got != want {
		return fmt.Errorf("partlog/logtest: log end offset %d, model %d", got, want)
	}
	if err := p.Verify(); err != nil {
		return fmt.Errorf("partlog/logtest: files: %w", err)
	}
	if err := checkPointReads(p, m); err != nil {
		return err
	}
	if err := checkBounds(p, m); err != nil {
		return err
	}
	for _, limit := range []int{0, 1000, 1 << 20} {
		if err := checkScan(p, m, limit, true); err != nil {
			return err
		}
		if err := checkScan(p, m, limit, false); err != nil {
			return err
		}
	}
	if err := checkTxn(p, m); err != nil {
		return err
	}
	if err := checkEpochs(p, m); err != nil { // epochs.go
		return err
	}
	return checkTimes(p, m)
}

// probes returns the offsets of b to read at.
func probes(b *Batch, logStart int64) []int64 {
	lo := max(b.BaseOffset, logStart)
	if b.LastOffset-lo <= 64 {
		out := make([]int64, 0, b.LastOffset-lo+1)
		for o := lo; o <= b.LastOffset; o++ {
			out = append(out, o)
		}
		return out
	}
	mid := lo + (b.LastOffset-lo)/2
	return []int64{lo, lo + 1, mid, b.LastOffset - 1, b.LastOffset}
}

// checkPointReads reads at every probed offset with a 1-byte limit.
func checkPointReads(p *plog.Partition, m *Model) error {
	for i := range m.batches {
		b := &m.batches[i]
		for _, o := range probes(b, m.logStart) {
			if err := expectFirst(p.ReadFromFollower(o, 1)); err != nil {
				return fmt.Errorf("partlog/logtest: ReadFromFollower(%d, 1): %w", o, err)
			}
			if err := matchFirst(p, o, true, b); err != nil {
				return err
			}
			if o >= m.hw {
				continue
			}
			var want *Batch
			if b.LastOffset < m.hw {
				want = b
			}
			if err := matchFirst(p, o, false, want); err != nil {
				return err
			}
		}
	}
	return nil
}

func expectFirst(r plog.Records, err error) error {
	if err != nil {
		return err
	}
	return r.Close()
}

// matchFirst reads at o and checks that the result is exactly want (or
// empty when want is nil).
func matchFirst(p *plog.Partition, o int64, follower bool, want *Batch) error {
	name := "ReadFrom"
	read := p.ReadFrom
	if follower {
		name, read = "ReadFromFollower", p.ReadFromFollower
	}
	r, err := read(o, 1)
	if err != nil {
		return fmt.Errorf("partlog/logtest: %s(%d, 1): %w", name, o, err)
	}
	defer r.Close()
	got := r.Bytes()
	if want == nil {
		if len(got) != 0 || len(r.Bytes()) != 0 {
			return fmt.Errorf("partlog/logtest: %s(%d, 1) returned %d bytes, want none (past the visibility bound)", name, o, len(got))
		}
		return nil
	}
	if !bytes.Equal(got, want.Bytes) {
		return fmt.Errorf("partlog/logtest: %s(%d, 1) returned %d bytes %s, not the model's batch [%d, %d]: %w",
			name, o, len(got), describe(got), want.BaseOffset, want.LastOffset, diffBatches(got, want))
	}
	if r.FirstOffset() != want.BaseOffset || r.NextOffset() != want.NextOffset() {
		return fmt.Errorf("partlog/logtest: %s(%d, 1): Records offsets [%d, %d), want [%d, %d)",
			name, o, r.FirstOffset(), r.NextOffset(), want.BaseOffset, want.NextOffset())
	}
	return nil
}

// describe names the batches in b for an error message.
func describe(b []byte) string {
	var s string
	for rest := b; len(rest) > 0; {
		bt, r, err := batch.Parse(rest)
		if err != nil {
			return s + fmt.Sprintf(" (unparsable: %v)", err)
		}
		s += fmt.Sprintf("[%d,%d]", bt.BaseOffset(), bt.LastOffset())
		rest = r
	}
	return s
}

// checkBounds checks the range errors and the empty reads at the bounds.
func checkBounds(p *plog.Partition, m *Model) error {
	if m.logStart > 0 {
		for _, read := range []func(int64, int) (plog.Records, error){p.ReadFrom, p.ReadFromFollower} {
			if r, err := read(m.logStart-1, 1); !errors.Is(err, plog.ErrOffsetOutOfRange) {
				if err == nil {
					_ = r.Close()
				}
				return fmt.Errorf("partlog/logtest: read below the log start (%d): err %v, want ErrOffsetOutOfRange", m.logStart-1, err)
			}
		}
	}
	for _, read := range []func(int64, int) (plog.Records, error){p.ReadFrom, p.ReadFromFollower} {
		if r, err := read(m.next+1, 1); !errors.Is(err, plog.ErrOffsetOutOfRange) {
			if err == nil {
				_ = r.Close()
			}
			return fmt.Errorf("partlog/logtest: read past the log end (%d): err %v, want ErrOffsetOutOfRange", m.next+1, err)
		}
	}
	for _, c := range []struct {
		name   string
		read   func(int64, int) (plog.Records, error)
		offset int64
	}{{"ReadFrom at the high watermark", p.ReadFrom, m.hw}, {"ReadFromFollower at the log end", p.ReadFromFollower, m.next}} {
		r, err := c.read(c.offset, 1<<20)
		if err != nil {
			return fmt.Errorf("partlog/logtest: %s (%d): %w", c.name, c.offset, err)
		}
		n := len(r.Bytes())
		_ = r.Close()
		if n != 0 {
			return fmt.Errorf("partlog/logtest: %s (%d) returned %d bytes, want none", c.name, c.offset, n)
		}
	}
	return nil
}

// checkScan reads from the log start to the bound with limit and checks
// that the batches come whole and in order.
func checkScan(p *plog.Partition, m *Model, limit int, follower bool) error {
	bound := m.hw
	read := p.ReadFrom
	if follower {
		bound, read = m.next, p.ReadFromFollower
	}
	i := 0
	for i < len(m.batches) && m.batches[i].LastOffset < m.logStart {
		i++
	}
	o := m.logStart
	for o < bound {
		r, err := read(o, limit)
		if err != nil {
			return fmt.Errorf("partlog/logtest: scan (limit %d, follower %v) at %d: %w", limit, follower, o, err)
		}
		got := r.Bytes()
		if len(got) == 0 {
			_ = r.Close()
			if i >= len(m.batches) {
				break // an offset gap up to the log end (a follower's)
			}
			// Only the batch straddling the high watermark is hidden.
			if !follower && i < len(m.batches) && m.batches[i].LastOffset >= bound {
				break
			}
			return fmt.Errorf("partlog/logtest: scan (limit %d, follower %v) at %d: empty read below the bound %d", limit, follower, o, bound)
		}
		n, pos := 0, 0
		for pos < len(got) {
			if i >= len(m.batches) {
				_ = r.Close()
				return fmt.Errorf("partlog/logtest: scan (limit %d, follower %v) at %d: more batches than the model has", limit, follower, o)
			}
			want := m.batches[i].Bytes
			if len(got)-pos < len(want) || !bytes.Equal(got[pos:pos+len(want)], want) {
				err := fmt.Errorf("partlog/logtest: scan (limit %d, follower %v) at %d: got %s, want batch [%d, %d] next: %w",
					limit, follower, o, describe(got), m.batches[i].BaseOffset, m.batches[i].LastOffset, diffBatches(got[pos:], &m.batches[i]))
				_ = r.Close() // got is the read's until then
				return err
			}
			if m.batches[i].LastOffset >= bound {
				_ = r.Close()
				return fmt.Errorf("partlog/logtest: scan (limit %d, follower %v) at %d: batch [%d, %d] crosses the bound %d",
					limit, follower, o, m.batches[i].BaseOffset, m.batches[i].LastOffset, bound)
			}
			pos += len(want)
			o = m.batches[i].NextOffset()
			i++
			n++
		}
		_ = r.Close()
		if n > 1 && len(got) > limit {
			return fmt.Errorf("partlog/logtest: scan (limit %d, follower %v): %d batches of %d bytes, over the limit", limit, follower, n, len(got))
		}
	}
	return nil
}

// checkTimes compares OffsetForTimestamp with the model.
func checkTimes(p *plog.Partition, m *Model) error {
	seen := map[int64]bool{}
	var targets []int64
	add := func(ts int64) {
		if ts >= 0 && !seen[ts] {
			seen[ts] = true
			targets = append(targets, ts)
		}
	}
	maxVisible := batch.NoTimestamp
	for _, b := range m.batches {
		for _, r := range b.Records {
			add(r.Timestamp)
			add(r.Timestamp + 1)
			if r.Offset >= m.logStart && r.Offset < m.hw {
				maxVisible = max(maxVisible, r.Timestamp)
			}
		}
	}
	add(0)
	targets = append(targets, plog.LatestTimestamp, plog.EarliestTimestamp)
	for _, ts := range targets {
		got, ok, err := p.OffsetForTimestamp(ts)
		if err != nil {
			return fmt.Errorf("partlog/logtest: OffsetForTimestamp(%d): %w", ts, err)
		}
		want, wantOK := m.OffsetForTimestamp(ts)
		if ok != wantOK || (ok && got != want) {
			return fmt.Errorf("partlog/logtest: OffsetForTimestamp(%d) = %+v, %v; model %+v, %v", ts, got, ok, want, wantOK)
		}
	}
	got, ok, err := p.OffsetForTimestamp(plog.MaxTimestamp)
	if err != nil {
		return fmt.Errorf("partlog/logtest: OffsetForTimestamp(MaxTimestamp): %w", err)
	}
	if ok {
		if got.Offset >= m.hw || got.Timestamp < maxVisible {
			return fmt.Errorf("partlog/logtest: OffsetForTimestamp(MaxTimestamp) = %+v; high watermark %d, largest visible timestamp %d", got, m.hw, maxVisible)
		}
		if b, in := m.batchHolding(got.Offset); in && got.Offset >= m.logStart {
			found := false
			for _, r := range b.Records {
				if r.Offset == got.Offset {
					found = r.Timestamp == got.Timestamp
					break
				}
			}
			if !found {
				return fmt.Errorf("partlog/logtest: OffsetForTimestamp(MaxTimestamp) = %+v: no such record", got)
			}
		}
	}
	return nil
}
