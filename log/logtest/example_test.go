package logtest_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"pgregory.net/rapid"
)

// TestMyPartition is what a user's own property test looks like: random
// appends and truncations, checked against the model after every step.
func TestMyPartition(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		dir := t.TempDir()
		p, err := plog.Open(dir, plog.Config{SegmentBytes: 4096})
		if err != nil {
			rt.Fatalf("open: %v", err)
		}
		defer p.Close()
		m := logtest.NewModel(0, false)
		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				n := rapid.IntRange(1, 20).Draw(rt, "records")
				b := logtest.MakeBatch(n, 100, 1_700_000_000_000, 0)
				base, err := p.AppendBatch(b)
				if err != nil {
					rt.Fatalf("append: %v", err)
				}
				// b is unchanged; the model patches its own copy.
				if err := m.AppendBatch(b, base); err != nil {
					rt.Fatalf("model: %v", err)
				}
			},
			"truncate": func(rt *rapid.T) {
				o := rapid.Int64Range(m.LogStartOffset(), m.LogEndOffset()).Draw(rt, "offset")
				if err := p.TruncateTo(o); err != nil {
					rt.Fatalf("truncate: %v", err)
				}
				_ = m.TruncateTo(o)
			},
			"": func(rt *rapid.T) { require.NoError(rt, logtest.Check(p, m)) },
		})
	})
}

// Example_rapid shows the shape of a user's property test; TestMyPartition
// in this file runs it.
func Example_rapid() {
	var test func(*testing.T) = TestMyPartition
	_ = test
}

// ExampleCheck compares a partition with its model after two appends.
func ExampleCheck() {
	dir, err := os.MkdirTemp("", "logtest-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	p, err := plog.Open(dir, plog.Config{})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	m := logtest.NewModel(0, false)
	for _, n := range []int{11, 3} {
		b := logtest.MakeBatch(n, 10, 1000, 0)
		base, err := p.AppendBatch(b)
		if err != nil {
			panic(err)
		}
		if err := m.AppendBatch(b, base); err != nil {
			panic(err)
		}
	}
	if err := logtest.Check(p, m); err != nil {
		panic(err)
	}
	fmt.Println("log end offset", p.LogEndOffset(), "model", m.LogEndOffset())
	// Output: log end offset 14 model 14
}

// producerBatch builds a batch of n records from producer 7 at epoch 0
// with first sequence seq.
func producerBatch(seq int32, n int) []byte {
	now := time.Now().UnixMilli() // not expired by Config.ProducerIDExpiration
	b := batch.NewBuilder(batch.BuilderOptions{Producer: &batch.Producer{ID: 7, Epoch: 0, BaseSequence: seq}})
	for i := range n {
		if err := b.Add(batch.Record{Timestamp: now + int64(i), Value: []byte("v")}); err != nil {
			panic(err)
		}
	}
	bt, err := b.Build()
	if err != nil {
		panic(err)
	}
	return slices.Clone(bt)
}

// ExampleModel_ExpectAppend shows a retried batch recognised by both the
// model and a Partition: the retry gets the original base offset and
// changes nothing, and a gap in the sequence is refused by both.
func ExampleModel_ExpectAppend() {
	dir, err := os.MkdirTemp("", "logtest-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	p, err := plog.Open(dir, plog.Config{})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	m := logtest.NewModel(0, false)
	send := func(b []byte) {
		want, wantErr := m.ExpectAppend(b)
		got, err := p.AppendBatchInfo(slices.Clone(b))
		switch {
		case err != nil:
			fmt.Println("refused:", errors.Is(err, plog.ErrOutOfOrderSequence), "model agrees:", errors.Is(wantErr, plog.ErrOutOfOrderSequence))
			return
		case got.Duplicate:
			fmt.Println("retry of the batch at", got.Base, "model agrees:", want == got)
		default:
			fmt.Println("appended at", got.Base, "model agrees:", want == got)
		}
		if err := m.AppendBatch(b, got.Base); err != nil { // a retry changes nothing
			panic(err)
		}
	}
	first := producerBatch(0, 3)
	send(first)
	send(producerBatch(3, 2))
	send(first)               // the producer retries: nothing is written
	send(producerBatch(9, 1)) // sequences 5..8 are missing
	if err := logtest.Check(p, m); err != nil {
		panic(err)
	}
	fmt.Println("log end offset", p.LogEndOffset(), "model", m.LogEndOffset())
	// Output:
	// appended at 0 model agrees: true
	// appended at 3 model agrees: true
	// retry of the batch at 0 model agrees: true
	// refused: true model agrees: true
	// log end offset 5 model 5
}
