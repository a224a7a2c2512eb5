package log_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// producerModel is a plain reference model of the producer rules: per
// producer its epoch and every batch it got accepted in that epoch (the
// partition remembers the last five; after a reopen only the last one,
// what the snapshot format keeps).
type producerModel struct {
	known map[int64]bool
	epoch map[int64]int16
	// batches[pid] are the producer's batches in its epoch; remembered[pid]
	// is how many of the newest ones the partition still recognises.
	batches    map[int64][]sentBatch
	remembered map[int64]int
	end        int64
}

type outcome struct {
	dup  *sentBatch
	ok   bool
	kind error // ErrOutOfOrderSequence or ErrInvalidProducerEpoch
}

// expect applies the rules to a batch of n records from pid.
func (m *producerModel) expect(pid int64, epoch int16, first int32, n int) outcome {
	if !m.known[pid] {
		return outcome{ok: true}
	}
	last := first + int32(n) - 1
	bs := m.batches[pid]
	if epoch == m.epoch[pid] {
		for i := len(bs) - m.remembered[pid]; i < len(bs); i++ {
			if bs[i].first == first && bs[i].last == last {
				return outcome{dup: &bs[i]}
			}
		}
	}
	switch {
	case epoch < m.epoch[pid]:
		return outcome{kind: plog.ErrInvalidProducerEpoch}
	case epoch > m.epoch[pid]:
		if first == 0 {
			return outcome{ok: true}
		}
		return outcome{kind: plog.ErrOutOfOrderSequence}
	}
	lastSeq := int32(-1)
	if len(bs) > 0 {
		lastSeq = bs[len(bs)-1].last
	}
	if first == lastSeq+1 {
		return outcome{ok: true}
	}
	return outcome{kind: plog.ErrOutOfOrderSequence}
}

// accept records an accepted batch.
func (m *producerModel) accept(b sentBatch) {
	if !m.known[b.pid] || b.epoch != m.epoch[b.pid] {
		m.known[b.pid], m.epoch[b.pid] = true, b.epoch
		m.batches[b.pid], m.remembered[b.pid] = nil, 0
	}
	m.batches[b.pid] = append(m.batches[b.pid], b)
	m.remembered[b.pid] = min(m.remembered[b.pid]+1, 5)
	m.end = b.end
}

// TestProducerStateMachine drives a partition and producerModel with the
// same random operations: next batches, retries of any earlier batch,
// arbitrary (epoch, sequence) batches, rolls and clean reopens. Every
// outcome (accepted at the log end, recognised as a retry of the same
// batch, or refused with the same sentinel) must agree, and a retry or a
// refusal never changes the log end. Rerun a failure with -rapid.seed=N.
func TestProducerStateMachine(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		mem := vfs.NewMem()
		cfg := plog.Config{FS: mem, SegmentBytes: int64(rapid.IntRange(200, 3000).Draw(rt, "segmentBytes"))}
		const dir = "/sm/p-0"
		p, err := plog.Open(dir, cfg)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { _ = p.Close() }()
		m := &producerModel{known: map[int64]bool{}, epoch: map[int64]int16{}, batches: map[int64][]sentBatch{}, remembered: map[int64]int{}}
		var all []sentBatch // every accepted batch, for retries
		ts := time.Now().UnixMilli()
		try := func(rt *rapid.T, pid int64, epoch int16, first int32, n int) {
			want := m.expect(pid, epoch, first, n)
			bt := prodBatch(rt, pid, epoch, first, n, ts, false)
			info, err := p.AppendBatchInfo(append([]byte(nil), bt...))
			what := fmt.Sprintf("producer %d epoch %d seq %d+%d", pid, epoch, first, n)
			switch {
			case want.dup != nil:
				if err != nil || !info.Duplicate || info.Base != want.dup.base || info.LastOffset != want.dup.end-1 {
					rt.Fatalf("%s: want a retry of [%d, %d), got %+v, %v", what, want.dup.base, want.dup.end, info, err)
				}
			case want.ok:
				if err != nil || info.Duplicate || info.Base != m.end {
					rt.Fatalf("%s: want accepted at %d, got %+v, %v", what, m.end, info, err)
				}
				b := sentBatch{pid: pid, epoch: epoch, first: first, last: first + int32(n) - 1, base: info.Base, end: info.LastOffset + 1, bytes: bt}
				m.accept(b)
				all = append(all, b)
			default:
				if !errors.Is(err, want.kind) {
					rt.Fatalf("%s: want %v, got %+v, %v", what, want.kind, info, err)
				}
			}
			if p.LogEndOffset() != m.end {
				rt.Fatalf("%s: log end %d, model %d", what, p.LogEndOffset(), m.end)
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"next": func(rt *rapid.T) {
				pid := rapid.Int64Range(0, 3).Draw(rt, "pid")
				first := int32(0)
				if bs := m.batches[pid]; len(bs) > 0 {
					first = bs[len(bs)-1].last + 1
				}
				try(rt, pid, m.epoch[pid], first, rapid.IntRange(1, 4).Draw(rt, "n"))
			},
			"retry": func(rt *rapid.T) {
				if len(all) == 0 {
					rt.Skip("nothing sent")
				}
				b := all[rapid.IntRange(max(0, len(all)-12), len(all)-1).Draw(rt, "batch")]
				try(rt, b.pid, b.epoch, b.first, int(b.last-b.first)+1)
			},
			"arbitrary": func(rt *rapid.T) {
				try(rt, rapid.Int64Range(0, 3).Draw(rt, "pid"), int16(rapid.IntRange(0, 3).Draw(rt, "epoch")),
					int32(rapid.IntRange(0, 20).Draw(rt, "seq")), rapid.IntRange(1, 4).Draw(rt, "n"))
			},
			"roll": func(rt *rapid.T) {
				if err := p.Roll(); err != nil {
					rt.Fatal(err)
				}
			},
			"reopen": func(rt *rapid.T) {
				if err := p.Close(); err != nil {
					rt.Fatal(err)
				}
				if p, err = plog.Open(dir, cfg); err != nil {
					rt.Fatal(err)
				}
				for pid := range m.remembered {
					m.remembered[pid] = min(m.remembered[pid], 1)
				}
			},
		})
	})
}
