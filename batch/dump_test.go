package batch

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/golden/fixtures.txt from the decoder's output")

// dumpSource is a fixture and where its batches lie: a byte range walked
// entry by entry (legacy entries are reported and skipped).
type dumpSource struct {
	file       string
	start, end int // end 0 = to the end of the file
}

func dumpSources(t *testing.T) []dumpSource {
	var srcs []dumpSource
	files, _ := filepath.Glob(filepath.Join(fixtureDir, "*", "extracted", "*", "*.bin"))
	for _, f := range files {
		srcs = append(srcs, dumpSource{file: filepath.ToSlash(strings.TrimPrefix(f, fixtureDir+string(filepath.Separator)))})
	}
	logs, _ := filepath.Glob(filepath.Join(fixtureDir, "kafka-*", "kafka-logs", "*", "*.log"))
	for _, f := range logs {
		srcs = append(srcs, dumpSource{file: filepath.ToSlash(strings.TrimPrefix(f, fixtureDir+string(filepath.Separator)))})
	}
	const kjs = "kafkajs/src/protocol/"
	srcs = append(srcs,
		dumpSource{kjs + "recordBatch/fixtures/v0_recordbatch.json", 0, 0},
		dumpSource{kjs + "recordBatch/fixtures/v0_recordbatch_zstd.json", 0, 0},
		dumpSource{kjs + "requests/fetch/fixtures/v11_response.json", 135, 0},
		dumpSource{kjs + "requests/fetch/fixtures/v4_response.json", 75, 0},
		dumpSource{kjs + "requests/fetch/fixtures/v4_response_gzip.json", 75, 0},
		dumpSource{kjs + "requests/fetch/fixtures/v4_response_snappy.json", 54, 0},
		dumpSource{kjs + "requests/fetch/fixtures/v4_from_scala_producer_response.json", 91, 0},
		dumpSource{kjs + "requests/fetch/fixtures/v4_response_mixed_formats.json", 120569, 0},
	)
	for _, kg := range []struct {
		f          string
		start, end int
	}{
		{"v1-v1.hex", 75, 362}, {"v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc.hex", 73, 1720}, {"v1c-v1-v1c.hex", 77, 569},
		{"v1c-v1c.hex", 76, 422}, {"v2-v2.hex", 76, 378}, {"v2b-v1.hex", 77, 370}, {"v2bc-v1-v1c.hex", 76, 490},
		{"v2bc-v1.hex", 76, 353}, {"v2bc-v1c.hex", 77, 342}, {"v2c-v2-v2c.hex", 76, 498}, {"v2c-v2c.hex", 78, 346},
	} {
		srcs = append(srcs, dumpSource{"kafka-go/fixtures/" + kg.f, kg.start, kg.end})
	}
	return srcs
}

// short quotes p, cut to 40 bytes, with its length and null-ness.
func short(p []byte) string {
	if p == nil {
		return "null"
	}
	if len(p) > 40 {
		return fmt.Sprintf("%q…(%d)", p[:40], len(p))
	}
	return fmt.Sprintf("%q", p)
}

// dumpBatch describes b and its records, one line each.
func dumpBatch(w *strings.Builder, b Batch) {
	h := b.Header()
	fmt.Fprintf(w, "batch base=%d last=%d size=%d ple=%d crc=%#08x attrs=%s count=%d baseTs=%d maxTs=%d producer=%d/%d/%d\n",
		h.BaseOffset, b.LastOffset(), len(b), h.PartitionLeaderEpoch, h.CRC, h.Attributes, h.RecordsCount,
		h.BaseTimestamp, h.MaxTimestamp, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
	if err := b.Validate(); err != nil {
		fmt.Fprintf(w, "  invalid: %v\n", err)
		return
	}
	for r, err := range b.All(nil) {
		if err != nil {
			fmt.Fprintf(w, "  error: %v\n", err)
			return
		}
		fmt.Fprintf(w, "  %d ts=%d key=%s value=%s", r.Offset, r.Timestamp, short(r.Key), short(r.Value))
		for _, hd := range r.Headers {
			fmt.Fprintf(w, " %s=%s", short(hd.Key), short(hd.Value))
		}
		if b.Attributes().IsControl() {
			cr, err := ParseControlRecord(r)
			fmt.Fprintf(w, " control=%s/%d err=%v", cr.Type, cr.CoordinatorEpoch, err)
		}
		w.WriteString("\n")
	}
}

// TestGoldenDump decodes every v2 batch of the fixtures into a text dump
// and compares it with testdata/golden/fixtures.txt (go test -run
// TestGoldenDump -rewrite regenerates it; review the diff).
func TestGoldenDump(t *testing.T) {
	var w strings.Builder
	w.WriteString("# Every RecordBatch in testdata/kafka, decoded. Regenerate: go test ./batch -run TestGoldenDump -rewrite\n")
	for _, src := range dumpSources(t) {
		data := readFixture(t, src.file)
		end := src.end
		if end == 0 {
			end = len(data)
		}
		set := data[src.start:end]
		fmt.Fprintf(&w, "\n# %s [%d:%d]\n", src.file, src.start, end)
		for len(set) > 0 {
			b, rest, err := Parse(set)
			switch {
			case errors.Is(err, ErrUnsupportedMagic):
				size := LogOverhead + int(binary.BigEndian.Uint32(set[batchLengthOffset:]))
				fmt.Fprintf(&w, "legacy magic %d entry at offset %d, %d bytes: %v\n", set[magicOffset],
					int64(binary.BigEndian.Uint64(set)), size, errors.Is(err, ErrUnsupportedMagic))
				if size > len(set) {
					set = nil
					break
				}
				set = set[size:]
				continue
			case err != nil:
				// A fetch response goes on after its records (or ends
				// inside a batch): stop at the first thing that is not one.
				fmt.Fprintf(&w, "end: %d bytes that are not a batch (truncated %v)\n", len(set), isTruncated(err))
				set = nil
				continue
			}
			dumpBatch(&w, b)
			set = rest
		}
	}
	golden := filepath.Join("testdata", "golden", "fixtures.txt")
	if *rewrite {
		require.NoError(t, os.MkdirAll(filepath.Dir(golden), 0o755))
		require.NoError(t, os.WriteFile(golden, []byte(w.String()), 0o644))
		return
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "%v (run with -rewrite to create it)", err)
	gl, wl := strings.Split(w.String(), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(gl) && i < len(wl); i++ {
		require.Equal(t, wl[i], gl[i], "dump differs at line %d:\n got: %s\nwant: %s", i+1, gl[i], wl[i])
	}
	require.Len(t, gl, len(wl), "dump has %d lines, golden %d", len(gl), len(wl))
}
