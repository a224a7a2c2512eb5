// Command logbench measures partlog's hot paths next to the machine's own
// limits in the same run, so that the ratios mean something on a noisy
// shared machine:
//
//	append    AppendBatch of 16 KiB batches vs a plain os.File write loop of
//	          the same bytes (no fsync in either)
//	read      sequential ReadFrom copying the bytes vs memcpy of the same
//	          bytes; the zero-copy path's throughput
//	validate  Batch.Validate vs raw CRC-32C over the same bytes: klauspost/crc32
//	          (DESIGN.md's target) and the machine's fastest (Batch.ComputeCRC)
//	lookup    ReadFrom at random offsets (index lookup + header scan), ns/op
//	readers   append throughput with 8 concurrent readers vs none
//	recovery  Open after a clean Close of a 1 MiB and a large log (the same
//	          cost), and after a simulated crash vs reading the log and
//	          computing its CRC-32C
//	durability appends under the per-append fsync policy with 1 and 8
//	          appenders vs a raw write+fdatasync loop (group commit)
//	small_append  1,000,000 records of 100 bytes built (batch.Builder)
//	          and appended in batches of 100 (AppendBuilder; and, as
//	          appendbatch_*, AppendTo + AppendBatch) vs a framed (length,
//	          CRC-32C) os.File write loop, one write per 100 records
//	one_record_append  100-byte records appended one per call (a
//	          Builder of one record, AppendBuilder) vs a framed os.File
//	          write loop making one write per record
//	one_record_read  1,000,000 one-record batches read through ReadFrom
//	          and Records.All (and, as batches_all_*, Records.Batches and
//	          Batch.All) vs reading the same records framed from an
//	          os.File, checking their CRC-32C and splitting each into its
//	          key and value
//	reopen_constant_ts  Open after a clean Close of a 1 MiB and a 256 MiB
//	          log whose timestamps do not grow (the same cost)
//	rolls     AppendBatch latency percentiles (p50, p99, p99.9) of 16 KiB
//	          batches into 4 MiB segments, across the rolls, vs a plain
//	          os.File write loop into one file and a plain rolling loop (a
//	          new file every 4 MiB, the previous one fsynced and closed by
//	          a goroutine), in rounds, medians over the rounds
//	many_partitions  a Dir of 10,000 partitions (2,000 with -quick) of one
//	          small record each: creating them, OpenDir after a clean
//	          shutdown and after a simulated crash, Close (after each),
//	          resident memory,
//	          descriptors and mappings per idle partition, disk per
//	          partition, each over the target or the budget
//	spread_append  16 KiB batches appended by 16 goroutines to 1,000
//	          partitions of a Dir vs the same bytes appended to one
//	          partition, in turn after an untimed warm-up: wall and
//	          process CPU ratios, page faults; with FlushMessages 1,
//	          records per fdatasync
//
// Each figure is one line, "<name> <value> <unit>":
//
//	go run ./examples/logbench -quick
//	append.ratio_to_raw_write 0.93 x
//
// Every measurement runs three times (-reps) and the best run is reported
// (the latency percentiles of rolls: the median of five rounds, seven
// without -quick). The small-record scenarios run partlog and its
// baseline in turn and also report the median of the rounds' ratios
// (*.median_*), the figure to quote on a shared machine. -quick
// uses 128 MiB data sets and finishes in seconds; without it they are 512
// MiB.
package main

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/crc32"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

func main() {
	quick := flag.Bool("quick", false, "small data sets, one repetition (under a minute)")
	dirFlag := flag.String("dir", "", "directory for the benchmark files (default: a new temporary directory)")
	only := flag.String("only", "", "comma-separated measurements to run (append, read, validate, lookup, readers,\n"+
		"recovery, durability, small_append, one_record_append, one_record_read, reopen_constant_ts, rolls,\n"+
		"many_partitions, spread_append, remote); default all")
	reps := flag.Int("reps", 3, "runs of each measurement; the paired ones report the best run and the median of the rounds' ratios")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	flag.Parse()
	if *reps < 1 {
		fmt.Fprintln(os.Stderr, "logbench: -reps must be at least 1")
		os.Exit(2)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "logbench:", err)
			os.Exit(1)
		}
		defer f.Close()
	}
	err := run(*quick, *dirFlag, *only, *reps)
	pprof.StopCPUProfile()
	if err != nil {
		fmt.Fprintln(os.Stderr, "logbench:", err)
		os.Exit(1)
	}
}

type bench struct {
	root  string
	reps  int
	total int64 // bytes appended per append measurement
}

func run(quick bool, dir, only string, reps int) error {
	root := dir
	if root == "" {
		var err error
		if root, err = os.MkdirTemp("", "partlog-logbench-"); err != nil {
			return err
		}
		defer os.RemoveAll(root)
	}
	b := &bench{root: root, reps: reps, total: 512 << 20}
	if quick {
		b.total = 128 << 20
	}
	fmt.Printf("# logbench: %s, %d cores, GOMAXPROCS %d, %d MiB per append run, best of %d\n",
		runtime.Version(), runtime.NumCPU(), runtime.GOMAXPROCS(0), b.total>>20, b.reps)
	steps := []struct {
		name string
		run  func() error
	}{
		{"append", b.appendVsWrite}, {"read", b.readVsMemcpy}, {"validate", b.validateVsCRC},
		{"lookup", b.lookup}, {"readers", b.appendWithReaders}, {"recovery", b.reopenAndRecover},
		{"durability", b.durableAppends}, {"small_append", b.smallAppend},
		{"one_record_append", b.oneRecordAppend},
		{"one_record_read", b.oneRecordReads}, {"reopen_constant_ts", b.reopenNonGrowing},
		{"rolls", b.rollLatency}, {"many_partitions", b.manyPartitions},
		{"spread_append", b.spreadAppend}, {"remote", b.remoteTiers},
	}
	names := make([]string, len(steps))
	for i, step := range steps {
		names[i] = step.name
	}
	want, err := selectSteps(names, only)
	if err != nil {
		return err
	}
	for i, step := range steps {
		if !want[i] {
			continue
		}
		if err := step.run(); err != nil {
			return err
		}
	}
	return nil
}

// selectSteps returns which of the measurements names -only selects (all
// of them when only is empty), or an error naming one it does not know.
func selectSteps(names []string, only string) ([]bool, error) {
	sel := make([]bool, len(names))
	if strings.TrimSpace(only) == "" {
		for i := range sel {
			sel[i] = true
		}
		return sel, nil
	}
	for _, name := range strings.Split(only, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		i := slices.Index(names, name)
		if i < 0 {
			return nil, fmt.Errorf("-only: no measurement %q", name)
		}
		sel[i] = true
	}
	return sel, nil
}

func emit(name string, value float64, unit string) {
	fmt.Printf("%s %.3g %s\n", name, value, unit)
}

// batches returns n producer batches of about size bytes each (records of
// 1 KiB with small keys), the shape DESIGN.md's append target names.
func batches(n, size int) [][]byte {
	out := make([][]byte, n)
	rng := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, 1000)
	for i := range value {
		value[i] = byte(rng.IntN(256))
	}
	perBatch := size / (len(value) + 24)
	if perBatch < 1 {
		perBatch = 1
	}
	bld := batch.NewBuilder(batch.BuilderOptions{})
	for i := range out {
		bld.Reset(batch.BuilderOptions{})
		for r := 0; r < perBatch; r++ {
			key := fmt.Appendf(nil, "k%07d", i*perBatch+r)
			if err := bld.Add(batch.Record{Key: key, Value: value, Timestamp: int64(1_700_000_000_000 + i)}); err != nil {
				panic(err)
			}
		}
		b, err := bld.Build()
		if err != nil {
			panic(err)
		}
		out[i] = append([]byte(nil), b...)
	}
	return out
}

// best runs f reps times and returns the shortest duration.
func (b *bench) best(f func() (time.Duration, error)) (time.Duration, error) {
	var min time.Duration
	for i := 0; i < b.reps; i++ {
		d, err := f()
		if err != nil {
			return 0, err
		}
		if i == 0 || d < min {
			min = d
		}
	}
	return min, nil
}

func gbps(bytes int64, d time.Duration) float64 { return float64(bytes) / d.Seconds() / 1e9 }

func (b *bench) freshDir(name string) (string, error) {
	d := filepath.Join(b.root, name)
	if err := os.RemoveAll(d); err != nil {
		return "", err
	}
	return d, os.MkdirAll(d, 0o755)
}

// appendVsWrite: AppendBatch of 16 KiB batches vs os.File.Write of the same
// bytes, and the allocations per append.
func (b *bench) appendVsWrite() error {
	set := batches(256, 16<<10)
	size := int64(len(set[0]))
	n := int(b.total / size)

	rawRun := func() (cost, error) {
		dir, err := b.freshDir("raw")
		if err != nil {
			return cost{}, err
		}
		f, err := os.Create(filepath.Join(dir, "raw.log"))
		if err != nil {
			return cost{}, err
		}
		defer f.Close()
		c := startClock()
		for i := 0; i < n; i++ {
			if _, err := f.Write(set[i%len(set)]); err != nil {
				c.stop()
				return cost{}, err
			}
		}
		return c.stop(), nil
	}
	var allocs float64
	appRun := func() (cost, error) {
		dir, err := b.freshDir("append")
		if err != nil {
			return cost{}, err
		}
		p, err := plog.Open(dir, plog.Config{})
		if err != nil {
			return cost{}, err
		}
		defer p.Close()
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		c := startClock()
		for i := 0; i < n; i++ {
			if _, err := p.AppendBatch(set[i%len(set)]); err != nil {
				c.stop()
				return cost{}, err
			}
		}
		d := c.stop()
		runtime.ReadMemStats(&ms1)
		allocs = float64(ms1.Mallocs-ms0.Mallocs) / float64(n)
		return d, nil
	}
	raw, app, err := b.bestPair(rawRun, appRun)
	if err != nil {
		return err
	}
	total := int64(n) * size
	emit("append.raw_write_throughput", gbps(total, raw.wall), "GB/s")
	emit("append.throughput", gbps(total, app.wall), "GB/s")
	emit("append.ratio_to_raw_write", ratio(raw.wall, app.wall), "x")
	if app.cpu > 0 {
		emit("append.raw_write_cpu_per_append", float64(raw.cpu.Nanoseconds())/float64(n)/1000, "us")
		emit("append.cpu_per_append", float64(app.cpu.Nanoseconds())/float64(n)/1000, "us")
		emit("append.cpu_ratio_to_raw_write", ratio(raw.cpu, app.cpu), "x")
	}
	emit("append.allocs_per_append", allocs, "allocs")
	return nil
}

// readVsMemcpy: sequential ReadFrom over a log, copying every batch into a
// buffer, vs copying the same number of bytes from memory; and the
// zero-copy path that only touches the returned slice's length.
func (b *bench) readVsMemcpy() error {
	dir, err := b.freshDir("read")
	if err != nil {
		return err
	}
	p, err := plog.Open(dir, plog.Config{})
	if err != nil {
		return err
	}
	defer p.Close()
	set := batches(256, 16<<10)
	var total int64
	for total < b.total/2 {
		bt := set[int(total/int64(len(set[0])))%len(set)]
		if _, err := p.AppendBatch(bt); err != nil {
			return err
		}
		total += int64(len(bt))
	}
	const maxBytes = 1 << 20
	buf := make([]byte, maxBytes+(64<<10))

	readAll := func(copyOut bool) (time.Duration, int64, error) {
		var read int64
		t0 := time.Now()
		for off := int64(0); off < p.HighWatermark(); {
			r, err := p.ReadFrom(off, maxBytes)
			if err != nil {
				return 0, 0, err
			}
			bs := r.Bytes()
			if copyOut {
				copy(buf, bs)
			}
			read += int64(len(bs))
			off = r.NextOffset()
			if err := r.Close(); err != nil {
				return 0, 0, err
			}
		}
		return time.Since(t0), read, nil
	}
	// Warm the page cache and the mapping once.
	if _, _, err := readAll(true); err != nil {
		return err
	}
	var read int64
	cp, err := b.best(func() (time.Duration, error) {
		d, n, err := readAll(true)
		read = n
		return d, err
	})
	if err != nil {
		return err
	}
	zc, err := b.best(func() (time.Duration, error) {
		d, _, err := readAll(false)
		return d, err
	})
	if err != nil {
		return err
	}
	// The machine's limit: copying the same number of bytes, in the same
	// 1 MiB steps, out of a heap buffer as large as the log (so neither side
	// is served from the CPU cache).
	src := make([]byte, read)
	for i := range src {
		src[i] = byte(i)
	}
	mc, err := b.best(func() (time.Duration, error) {
		t0 := time.Now()
		for done := int64(0); done < read; done += maxBytes {
			copy(buf, src[done:min(done+maxBytes, read)])
		}
		return time.Since(t0), nil
	})
	if err != nil {
		return err
	}
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	reads := 0
	for off := int64(0); off < p.HighWatermark(); reads++ {
		r, err := p.ReadFrom(off, maxBytes)
		if err != nil {
			return err
		}
		off = r.NextOffset()
		r.Close()
	}
	runtime.ReadMemStats(&ms1)

	emit("read.memcpy_throughput", gbps(read, mc), "GB/s")
	emit("read.copy_throughput", gbps(read, cp), "GB/s")
	emit("read.ratio_to_memcpy", mc.Seconds()/cp.Seconds(), "x")
	emit("read.zero_copy_throughput", gbps(read, zc), "GB/s")
	emit("read.allocs_per_read", float64(ms1.Mallocs-ms0.Mallocs)/float64(reads), "allocs")
	return nil
}

// crcStart is the first byte of a batch its CRC-32C covers (attributes,
// at byte 21 of Kafka's frozen RecordBatch v2 header): the bytes
// Batch.ComputeCRC checksums.
const crcStart = 21

// validateVsCRC: Batch.Validate vs a raw CRC-32C over the same 16 KiB
// batches, computed two ways: klauspost/crc32's Update with the Castagnoli
// table, which DESIGN.md's validation target names, and the machine's
// fastest CRC-32C (Batch.ComputeCRC, the checksum Validate itself computes:
// the AVX-512 folding code where the CPU has it, klauspost/crc32
// elsewhere). Besides
// the wall-clock ratios it reports the ratios of the per-thread CPU times
// (Linux), the steadier figures on a shared machine.
func (b *bench) validateVsCRC() error {
	set := batches(256, 16<<10)
	size := int64(len(set[0]))
	// Eight passes over the append data set: at 30-50 GB/s one pass takes
	// a few milliseconds, which one preemption on a busy machine distorts.
	n := int(8 * b.total / size)
	var sink uint32
	loop := func(f func(bt []byte) error) func() (time.Duration, error) {
		return func() (time.Duration, error) {
			t0 := time.Now()
			for i := 0; i < n; i++ {
				if err := f(set[i%len(set)]); err != nil {
					return 0, err
				}
			}
			return time.Since(t0), nil
		}
	}
	// The three loops take turns, so that none gets all the quiet moments.
	loops := []func() (time.Duration, error){
		loop(func(bt []byte) error {
			sink += crc32.Update(0, castagnoli, bt[crcStart:])
			return nil
		}),
		loop(func(bt []byte) error {
			sink += batch.Batch(bt).ComputeCRC()
			return nil
		}),
		loop(func(bt []byte) error { return batch.Batch(bt).Validate() }),
	}
	var wall, cpu [3]time.Duration
	for rep := 0; rep < b.reps; rep++ {
		for i, f := range loops {
			var c time.Duration
			d, err := onThread(f, &c)()
			if err != nil {
				return err
			}
			if rep == 0 || d < wall[i] {
				wall[i] = d
			}
			if rep == 0 || c < cpu[i] {
				cpu[i] = c
			}
		}
	}
	kp, crc, val := wall[0], wall[1], wall[2]
	kpCPU, crcCPU, valCPU := cpu[0], cpu[1], cpu[2]
	_ = sink
	total := int64(n) * size
	emit("validate.klauspost_crc32c_throughput", gbps(total, kp), "GB/s")
	emit("validate.crc32c_throughput", gbps(total, crc), "GB/s")
	emit("validate.throughput", gbps(total, val), "GB/s")
	emit("validate.ratio_to_klauspost_crc32c", kp.Seconds()/val.Seconds(), "x")
	emit("validate.ratio_to_crc32c", crc.Seconds()/val.Seconds(), "x")
	if valCPU > 0 {
		emit("validate.cpu_ratio_to_klauspost_crc32c", ratio(kpCPU, valCPU), "x")
		emit("validate.cpu_ratio_to_crc32c", ratio(crcCPU, valCPU), "x")
	}
	return nil
}

// lookup: ReadFrom at random offsets of a multi-segment log: segment
// choice, offset index floor, header scan.
func (b *bench) lookup() error {
	dir, err := b.freshDir("lookup")
	if err != nil {
		return err
	}
	p, err := plog.Open(dir, plog.Config{SegmentBytes: 64 << 20})
	if err != nil {
		return err
	}
	defer p.Close()
	set := batches(64, 1<<10) // small batches: many index entries
	for total := int64(0); total < b.total/2; {
		bt := set[int(total)%len(set)]
		if _, err := p.AppendBatch(bt); err != nil {
			return err
		}
		total += int64(len(bt))
	}
	end := p.HighWatermark()
	rng := rand.New(rand.NewPCG(3, 4))
	const lookups = 200_000
	offs := make([]int64, lookups)
	for i := range offs {
		offs[i] = rng.Int64N(end)
	}
	d, err := b.best(func() (time.Duration, error) {
		t0 := time.Now()
		for _, o := range offs {
			r, err := p.ReadFrom(o, 1)
			if err != nil {
				return 0, err
			}
			r.Close()
		}
		return time.Since(t0), nil
	})
	if err != nil {
		return err
	}
	emit("lookup.random_read_from", float64(d.Nanoseconds())/lookups, "ns/op")
	emit("lookup.records_in_log", float64(end), "records")
	return nil
}

// appendWithReaders: append throughput while 8 goroutines tail the log,
// relative to the same appends with no reader. A reader that has caught up
// waits 100 µs before it fetches again, as a consumer's fetch wait would:
// on a 2-core machine, 8 goroutines spinning on an empty tail would measure
// CPU starvation, not contention with the append path.
func (b *bench) appendWithReaders() error {
	set := batches(256, 16<<10)
	size := int64(len(set[0]))
	n := int(b.total / 2 / size)
	runOnce := func(readers int) (time.Duration, error) {
		dir, err := b.freshDir(fmt.Sprintf("readers-%d", readers))
		if err != nil {
			return 0, err
		}
		p, err := plog.Open(dir, plog.Config{})
		if err != nil {
			return 0, err
		}
		defer p.Close()
		var stop atomic.Bool
		var wg sync.WaitGroup
		errc := make(chan error, readers)
		for r := 0; r < readers; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				off := int64(0)
				for !stop.Load() {
					if off >= p.HighWatermark() {
						time.Sleep(100 * time.Microsecond)
						continue
					}
					rec, err := p.ReadFrom(off, 1<<20)
					if err != nil {
						errc <- err
						return
					}
					off = rec.NextOffset()
					rec.Close()
				}
			}()
		}
		t0 := time.Now()
		var appendErr error
		for i := 0; i < n; i++ {
			if _, err := p.AppendBatch(set[i%len(set)]); err != nil {
				appendErr = err
				break
			}
		}
		d := time.Since(t0)
		stop.Store(true)
		wg.Wait()
		close(errc)
		return d, errors.Join(appendErr, <-errc)
	}
	none, err := b.best(func() (time.Duration, error) { return runOnce(0) })
	if err != nil {
		return err
	}
	eight, err := b.best(func() (time.Duration, error) { return runOnce(8) })
	if err != nil {
		return err
	}
	total := int64(n) * size
	emit("readers.append_throughput_0_readers", gbps(total, none), "GB/s")
	emit("readers.append_throughput_8_readers", gbps(total, eight), "GB/s")
	emit("readers.ratio_8_to_0", none.Seconds()/eight.Seconds(), "x")
	return nil
}
