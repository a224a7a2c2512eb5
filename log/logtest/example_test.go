package logtest_test

import (
	"fmt"
	"os"
	"testing"

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
			"": func(rt *rapid.T) { logtest.Check(rt, p, m) },
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
	if err := logtest.CheckErr(p, m); err != nil {
		panic(err)
	}
	fmt.Println("log end offset", p.LogEndOffset(), "model", m.LogEndOffset())
	// Output: log end offset 14 model 14
}
