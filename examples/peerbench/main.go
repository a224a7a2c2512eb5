// Command peerbench measures partlog next to another Go log library and
// next to the machine's own limit, in the same run, through each one's
// public API: records of 100 bytes appended one per call, appended 100 a
// call, and read back in order once (read: a consumer that follows the
// log) and again (reread). The peers:
//
//   - framed: a plain os.File log, each record framed with its length and
//     a CRC-32C, one write system call per append (the machine's limit for
//     a log that checks what it reads);
//   - partlog: batch.Builder and Partition.AppendBuilder (Kafka's
//     RecordBatch v2, offsets, indexes), ReadFrom, Batch.ValidateHeader
//     and Batch.All;
//   - partlog_write_behind: the same with Config.WriteBehind (1 ms):
//     appends acknowledged from a 16 KiB buffer, written with one write
//     when it fills or when a call observes the log (a kill -9 may lose
//     what it holds);
//   - tidwall_wal: github.com/tidwall/wal with NoSync and NoCopy (one
//     write system call per Write or WriteBatch, no checksum).
//
// No peer syncs while it is timed (tidwall/wal fsyncs a segment it fills,
// so its segments are 1 GiB, as partlog's), and every append reaches the
// kernel before it returns, so a kill -9 of the process loses no
// acknowledged record in any of them, but for partlog_write_behind (whose
// timed appends end by writing its buffer). Reads check what each log can
// check: framed and partlog a CRC-32C (of each record, of each batch),
// tidwall/wal nothing. The peers take turns in rounds on fresh
// directories, each round starting with the next peer; each scenario
// reports each peer's best round (ns per record) and the median over the
// rounds of each other peer's time over partlog's (above 1: partlog is
// faster). Speed is reported, never asserted.
//
// It is a module of its own, so that partlog's module does not require
// the peers. From this directory:
//
//	go run . -quick
//	go run . -only one_record_append -rounds 5
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

const (
	recordSize = 100 // bytes of value per record
	batchLen   = 100 // records per call in batch_append
)

func main() {
	quick := flag.Bool("quick", false, "250,000 records a run instead of 1,000,000")
	rounds := flag.Int("rounds", 3, "rounds; each runs every peer once")
	only := flag.String("only", "", "comma-separated scenarios (one_record_append, batch_append, read, reread); default all")
	dir := flag.String("dir", "", "directory for the files (default: a new temporary directory)")
	flag.Parse()
	records := 1_000_000
	if *quick {
		records = 250_000
	}
	if err := run(os.Stdout, *dir, *only, records, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "peerbench:", err)
		os.Exit(1)
	}
}

// scenario is one measurement: prepare (untimed) and timed run the same
// peer on a fresh directory.
type scenario struct {
	name    string
	prepare func(p peer, values [][]byte) error
	timed   func(p peer, values [][]byte) error
}

var scenarios = []scenario{
	{name: "one_record_append", timed: appendEach},
	{name: "batch_append", timed: func(p peer, values [][]byte) error {
		for i := 0; i < len(values); i += batchLen {
			if err := p.appendBatch(values[i:min(i+batchLen, len(values))]); err != nil {
				return err
			}
		}
		return p.written()
	}},
	{name: "read", prepare: appendEach, timed: readCheck},
	{name: "reread", prepare: func(p peer, values [][]byte) error {
		if err := appendEach(p, values); err != nil {
			return err
		}
		return readCheck(p, values)
	}, timed: readCheck},
}

// readCheck reads every record and checks that they are values, in
// order: read times the first read after the appends (what a consumer
// that follows the log does), reread a second one.
func readCheck(p peer, values [][]byte) error {
	n := 0
	var bad error
	err := p.readAll(func(v []byte) {
		if bad == nil && (n >= len(values) || !bytes.Equal(v, values[n])) {
			bad = fmt.Errorf("record %d differs from what was appended", n)
		}
		n++
	})
	switch {
	case err != nil:
		return err
	case bad != nil:
		return bad
	case n != len(values):
		return fmt.Errorf("read %d records, want %d", n, len(values))
	}
	return nil
}

// appendEach appends values one per call: one_record_append, and what
// the read scenario reads (one-record batches, for partlog).
func appendEach(p peer, values [][]byte) error {
	for _, v := range values {
		if err := p.appendOne(v); err != nil {
			return err
		}
	}
	return p.written()
}

// run runs the selected scenarios with records records of recordSize
// bytes, over rounds rounds, in files under root ("" for a temporary
// directory), and writes the figures to w.
func run(w io.Writer, root, only string, records, rounds int) error {
	if rounds < 1 {
		return fmt.Errorf("-rounds must be at least 1, not %d", rounds)
	}
	sel, err := selected(only)
	if err != nil {
		return err
	}
	if root == "" {
		if root, err = os.MkdirTemp("", "partlog-peerbench-"); err != nil {
			return err
		}
		defer os.RemoveAll(root)
	}
	values := make([][]byte, records)
	for i := range values {
		v := make([]byte, recordSize)
		for j := range v {
			v[j] = byte(i*7 + j)
		}
		values[i] = v
	}
	fmt.Fprintf(w, "# peerbench: %s, %d cores, %d records of %d bytes, %d rounds\n",
		runtime.Version(), runtime.NumCPU(), records, recordSize, rounds)
	for _, sc := range scenarios {
		if !sel[sc.name] {
			continue
		}
		// times[peer][round]
		times := make([][]time.Duration, len(peerNames))
		for r := range rounds {
			for k := range peerNames {
				// Each round starts with the next peer, so that none
				// always follows the same one's dirty pages.
				i := (r + k) % len(peerNames)
				name := peerNames[i]
				d, err := measure(filepath.Join(root, fmt.Sprintf("%s-%s-%d", sc.name, name, r)), name, sc, values)
				if err != nil {
					return fmt.Errorf("%s, %s: %w", sc.name, name, err)
				}
				times[i] = append(times[i], d)
			}
		}
		report(w, sc.name, times, records)
	}
	return nil
}

// selected returns the scenarios -only names (all when empty).
func selected(only string) (map[string]bool, error) {
	sel := map[string]bool{}
	for _, sc := range scenarios {
		sel[sc.name] = strings.TrimSpace(only) == ""
	}
	for _, name := range strings.Split(only, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		if _, ok := sel[name]; !ok {
			return nil, fmt.Errorf("-only: no scenario %q", name)
		}
		sel[name] = true
	}
	return sel, nil
}

// measure opens the peer name in the new directory dir, runs sc's
// prepare untimed and its timed part timed, closes the peer and removes
// the directory. It returns the timed part's wall time.
func measure(dir, name string, sc scenario, values [][]byte) (d time.Duration, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	defer func() {
		if rerr := os.RemoveAll(dir); err == nil {
			err = rerr
		}
	}()
	p, err := openPeer(name, dir)
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := p.close(); err == nil {
			err = cerr
		}
	}()
	if sc.prepare != nil {
		if err := sc.prepare(p, values); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	err = sc.timed(p, values)
	return time.Since(start), err
}

// report writes each peer's best round in ns per record and, for each
// peer other than partlog, the median over the rounds of its time over
// partlog's in the same round; then the same over partlog_write_behind's.
func report(w io.Writer, name string, times [][]time.Duration, records int) {
	for i, peerName := range peerNames {
		fmt.Fprintf(w, "%s.%s_per_record %.4g ns\n", name, peerName, float64(slices.Min(times[i]).Nanoseconds())/float64(records))
	}
	for _, base := range []string{"partlog", "partlog_write_behind"} {
		pl := slices.Index(peerNames, base)
		for i, peerName := range peerNames {
			if i == pl {
				continue
			}
			ratios := make([]float64, len(times[i]))
			for r := range times[i] {
				ratios[r] = times[i][r].Seconds() / times[pl][r].Seconds()
			}
			fmt.Fprintf(w, "%s.%s_time_over_%s %.3g x\n", name, peerName, base, median(ratios))
		}
	}
}

// median returns the median of xs, the mean of the middle two for an
// even count (as logbench's), or 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
