package logtest_test

// This file is the recipe for a program's own property and crash tests on
// partlog. It imports public packages only: recipe_test.go copies it into
// a module of its own and runs it there.

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/index/vfs/vfstest"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// sender is the code under test: a service that turns the records it is
// given into a batch with a batch.Builder and appends it.
type sender struct {
	p   *plog.Partition
	bld *batch.Builder
}

// send appends recs as one batch.
func (s *sender) send(recs []batch.Record) (plog.AppendInfo, error) {
	s.bld.Reset(batch.BuilderOptions{})
	for _, r := range recs {
		if err := s.bld.Add(r); err != nil {
			return plog.AppendInfo{}, err
		}
	}
	return s.p.AppendBuilder(s.bld)
}

// randomRecords draws 1 to 5 records: null or short keys and values, up
// to two headers, timestamps from ts on.
func randomRecords(rng *rand.Rand, ts int64) []batch.Record {
	bytesOrNull := func(prefix string) []byte {
		if rng.IntN(4) == 0 {
			return nil
		}
		return fmt.Appendf(nil, "%s%d", prefix, rng.IntN(1000))
	}
	recs := make([]batch.Record, 1+rng.IntN(5))
	for i := range recs {
		recs[i] = batch.Record{Key: bytesOrNull("k"), Value: bytesOrNull("v"), Timestamp: ts + int64(i)}
		for range rng.IntN(3) {
			recs[i].Headers = append(recs[i].Headers, batch.RecordHeader{Key: []byte("h"), Value: bytesOrNull("x")})
		}
	}
	return recs
}

// readAll reads what a consumer sees, from the log start to the high
// watermark, as records.
func readAll(p *plog.Partition) ([]logtest.Record, error) {
	var out []logtest.Record
	for off := p.LogStartOffset(); off < p.HighWatermark(); {
		r, err := p.ReadFrom(off, 1<<20)
		if err != nil {
			return nil, err
		}
		recs, err := logtest.DecodeRecords(r.Bytes())
		next := r.NextOffset()
		_ = r.Close()
		if err != nil {
			return nil, err
		}
		if next <= off {
			break
		}
		out, off = append(out, recs...), next
	}
	return out, nil
}

// history drives the sender and the model with the same random
// operations: sends, syncs and (when truncate is set) truncations,
// checking what a consumer reads after each send. beforeCrash reports
// whether no crash has happened yet (always true in a test without
// crashes): what the partition acknowledged while it is true binds the
// model, and the history stops after the operation during which the crash
// happened, so that the model is the partition's at the crash.
func history(rng *rand.Rand, p *plog.Partition, m *logtest.Model, steps int, truncate bool, beforeCrash func() bool) error {
	s := &sender{p: p, bld: batch.NewBuilder(batch.BuilderOptions{})}
	for i := range steps {
		if !beforeCrash() {
			return nil
		}
		op := rng.IntN(10)
		if op == 9 && !truncate {
			op = 0
		}
		switch {
		case op < 7:
			info, err := s.send(randomRecords(rng, 1_700_000_000_000+int64(i)*10))
			if err != nil {
				return err
			}
			// The model takes the Builder the partition took, and checks
			// the offsets the append returned.
			if err := m.AppendBuilder(s.bld, info); err != nil {
				return err
			}
			got, err := readAll(p)
			if err != nil {
				return err
			}
			if err := logtest.CompareRecords(got, m.Records(m.LogStartOffset(), m.HighWatermark())); err != nil {
				return err
			}
		case op < 9:
			if err := p.Sync(); err != nil {
				return err
			}
			if beforeCrash() {
				m.Sync() // acknowledged before the crash: it must survive it
			}
		default:
			o := m.LogStartOffset() + rng.Int64N(m.LogEndOffset()-m.LogStartOffset()+1)
			if err := p.TruncateTo(o); err != nil {
				return err
			}
			if err := m.TruncateTo(o); err != nil {
				return err
			}
		}
	}
	return logtest.Check(p, m)
}

// config is the crash test's partition configuration: small segments, so
// that the history rolls some, small index files, which an in-memory
// filesystem holds whole, and no log of the repairs recovery makes after
// a crash (torn index tails are expected there).
func config(fs vfs.FS) plog.Config {
	return plog.Config{FS: fs, SegmentBytes: 2048, SegmentIndexBytes: 4096, Logger: slog.New(slog.DiscardHandler)}
}

// ExampleModel_AppendBuilder is a property test of a service that appends
// with a batch.Builder: 20 random histories, each checked against the
// model after every step. With pgregory.net/rapid, draw the operations
// with rapid instead (the package documentation shows how).
func ExampleModel_AppendBuilder() {
	for seed := range uint64(20) {
		dir, err := os.MkdirTemp("", "logtest-recipe")
		if err != nil {
			panic(err)
		}
		p, err := plog.Open(dir, plog.Config{SegmentBytes: 2048})
		if err != nil {
			panic(err)
		}
		err = history(rand.New(rand.NewPCG(seed, 1)), p, logtest.NewModel(0, false), 40, true, func() bool { return true })
		if cerr := p.Close(); err == nil {
			err = cerr
		}
		_ = os.RemoveAll(dir)
		if err != nil {
			fmt.Printf("seed %d: %v\n", seed, err)
			return
		}
	}
	fmt.Println("20 histories agree with the model")
	// Output: 20 histories agree with the model
}

// crashCase runs the history of seed 1 (sends and syncs) on a filesystem
// that crashes before its operation at, reopens what the crash left and
// checks it against the model: every batch synced before the crash is
// there, whole, and nothing after the first batch lost. A truncation
// under way at the crash may leave the log at either end, which the model
// does not follow: crash tests leave truncations out.
func crashCase(at int64, opts vfstest.CrashOptions) (ops int64, err error) {
	fs := logtest.NewCrashFS(at, opts)
	p, err := plog.Open("/p", config(fs))
	if err != nil {
		return 0, err
	}
	m := logtest.NewModel(0, false)
	err = history(rand.New(rand.NewPCG(1, 1)), p, m, 40, false, func() bool { return !fs.Crashed() })
	if cerr := p.Close(); err == nil {
		err = cerr
	}
	if err != nil || at < 0 {
		return fs.Ops(), err
	}
	q, err := plog.Open("/p", config(fs.State()))
	if err != nil {
		return 0, fmt.Errorf("reopen after a crash at operation %d: %w", at, err)
	}
	defer q.Close()
	if err := m.Crash(q.LogEndOffset(), q.HighWatermark()); err != nil {
		return 0, fmt.Errorf("crash at operation %d: %w", at, err)
	}
	if err := logtest.Check(q, m); err != nil {
		return 0, fmt.Errorf("crash at operation %d: %w", at, err)
	}
	got, err := readAll(q)
	if err != nil {
		return 0, err
	}
	return fs.Ops(), logtest.CompareRecords(got, m.Records(m.LogStartOffset(), m.HighWatermark()))
}

// ExampleCrashFS is a crash test: one history, crashed at 100 of its
// filesystem operations in turn, each crash keeping a random share of the
// writes not yet synced, whole, cut or torn.
func ExampleCrashFS() {
	total, err := crashCase(-1, vfstest.CrashOptions{}) // count the operations
	if err != nil {
		panic(err)
	}
	const cases = 100
	for i := range int64(cases) {
		at := i * total / cases
		opts := vfstest.CrashOptions{UnsyncedDataPercent: int(i % 101), TornPercent: 50, Seed: uint64(i)}
		if _, err := crashCase(at, opts); err != nil {
			var mm *logtest.MismatchError
			fmt.Println("crash", i, "mismatch:", errors.As(err, &mm), err)
			return
		}
	}
	fmt.Println(cases, "crashes recovered as the model says")
	// Output: 100 crashes recovered as the model says
}
