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

// producerModel is a plain reference model of the producer rules. It
// keeps every accepted batch (hist, in log order) and the horizon: the
// offset of the snapshot the partition last loaded its state from. The
// state it checks against is derived from them: a producer's batches at
// or past the horizon are all known, of those below it only its last one
// (the snapshot format keeps one per producer); of the known ones, the
// last five in the producer's latest epoch are recognised.
type producerModel struct {
	hist    []sentBatch
	horizon int64
	end     int64
}

// producer returns what the partition should know of pid.
func (m *producerModel) producer(pid int64) (known bool, epoch int16, recent []sentBatch) {
	lastBelow := -1
	var mine []sentBatch
	for i, b := range m.hist {
		if b.pid != pid {
			continue
		}
		if b.base < m.horizon {
			lastBelow = i
			continue
		}
		mine = append(mine, b)
	}
	if lastBelow >= 0 {
		mine = append([]sentBatch{m.hist[lastBelow]}, mine...)
	}
	if len(mine) == 0 {
		return false, 0, nil
	}
	epoch = mine[len(mine)-1].epoch
	for i := len(mine) - 1; i >= 0 && mine[i].epoch == epoch && len(recent) < 5; i-- {
		recent = append([]sentBatch{mine[i]}, recent...)
	}
	return true, epoch, recent
}

type outcome struct {
	dup  *sentBatch
	ok   bool
	kind error // ErrOutOfOrderSequence or ErrInvalidProducerEpoch
}

// expect applies the rules to a batch of n records from pid.
func (m *producerModel) expect(pid int64, epoch int16, first int32, n int) outcome {
	known, cur, recent := m.producer(pid)
	if !known {
		return outcome{ok: true}
	}
	last := first + int32(n) - 1
	if epoch == cur {
		for i := range recent {
			if recent[i].first == first && recent[i].last == last {
				return outcome{dup: &recent[i]}
			}
		}
	}
	switch {
	case epoch < cur:
		return outcome{kind: plog.ErrInvalidProducerEpoch}
	case epoch > cur:
		if first == 0 {
			return outcome{ok: true}
		}
		return outcome{kind: plog.ErrOutOfOrderSequence}
	}
	if first == recent[len(recent)-1].last+1 {
		return outcome{ok: true}
	}
	return outcome{kind: plog.ErrOutOfOrderSequence}
}

// nextSeq returns pid's next sequence in its epoch.
func (m *producerModel) nextSeq(pid int64) (int16, int32) {
	known, epoch, recent := m.producer(pid)
	if !known {
		return 0, 0
	}
	return epoch, recent[len(recent)-1].last + 1
}

// TestProducerStateMachine drives a partition and producerModel with the
// same random operations: next batches, retries of any earlier batch,
// arbitrary (epoch, sequence) batches, rolls, clean reopens and
// truncations (which reload the state from the newest snapshot left). Every
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
		m := &producerModel{}
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
				m.hist = append(m.hist, b)
				m.end = b.end
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
				epoch, first := m.nextSeq(pid)
				try(rt, pid, epoch, first, rapid.IntRange(1, 4).Draw(rt, "n"))
			},
			"retry": func(rt *rapid.T) {
				if len(m.hist) == 0 {
					rt.Skip("nothing sent")
				}
				b := m.hist[rapid.IntRange(max(0, len(m.hist)-12), len(m.hist)-1).Draw(rt, "batch")]
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
				m.horizon = m.end // Close wrote the snapshot at the log end
			},
			"truncate": func(rt *rapid.T) {
				if len(m.hist) == 0 {
					rt.Skip("nothing sent")
				}
				o := m.hist[rapid.IntRange(0, len(m.hist)-1).Draw(rt, "cut")].base
				if err := p.TruncateTo(o); err != nil {
					rt.Fatal(err)
				}
				for len(m.hist) > 0 && m.hist[len(m.hist)-1].end > o {
					m.hist = m.hist[:len(m.hist)-1]
				}
				m.end = o
				if p.LogEndOffset() != o {
					rt.Fatalf("truncate to %d: log end %d", o, p.LogEndOffset())
				}
				// The partition reloaded from its newest snapshot at or
				// below o (from the log start when none).
				names, err := mem.List(dir)
				if err != nil {
					rt.Fatal(err)
				}
				m.horizon = 0
				for _, n := range names {
					var off int64
					if k, _ := fmtSscan(n, &off); k == 1 {
						if off > o {
							rt.Fatalf("snapshot %s left past the new end %d", n, o)
						}
						m.horizon = max(m.horizon, off)
					}
				}
			},
		})
	})
}
