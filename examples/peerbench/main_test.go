package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunReportsEveryPeer runs every scenario on a small log: each peer's
// reads hand back exactly the records appended (run fails otherwise), and
// the output holds each peer's time per record and each other peer's
// time over partlog's.
func TestRunReportsEveryPeer(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(&out, t.TempDir(), "", 2_000, 2))
	for _, sc := range scenarios {
		for _, p := range peerNames {
			assert.Contains(t, out.String(), sc.name+"."+p+"_per_record ", "scenario %s, peer %s", sc.name, p)
			if p != "partlog" {
				assert.Contains(t, out.String(), sc.name+"."+p+"_time_over_partlog ", "scenario %s, peer %s", sc.name, p)
			}
		}
	}
}

// TestPeersReadBackBatches: every peer reads back, in order, records
// appended in batches of a length that does not divide their count.
func TestPeersReadBackBatches(t *testing.T) {
	values := make([][]byte, 250)
	for i := range values {
		values[i] = []byte(strings.Repeat(string(rune('a'+i%26)), 1+i%7))
	}
	for _, name := range peerNames {
		p, err := openPeer(name, t.TempDir())
		require.NoError(t, err, name)
		for i := 0; i < len(values); i += 40 {
			require.NoError(t, p.appendBatch(values[i:min(i+40, len(values))]), name)
		}
		require.NoError(t, readCheck(p, values), name)
		require.NoError(t, p.close(), name)
	}
}

// TestSelected: -only picks scenarios by name and refuses an unknown one.
func TestSelected(t *testing.T) {
	sel, err := selected(" read, reread ")
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"one_record_append": false, "batch_append": false, "read": true, "reread": true}, sel)
	_, err = selected("reads")
	require.ErrorContains(t, err, `no scenario "reads"`)
	require.Error(t, run(&bytes.Buffer{}, t.TempDir(), "", 10, 0))
}

// TestFramedRefusesRecordPastBuffer: a framed record longer than the read
// buffer is an error, not a loop that never advances.
func TestFramedRefusesRecordPastBuffer(t *testing.T) {
	p, err := openPeer("framed", t.TempDir())
	require.NoError(t, err)
	defer p.close()
	require.NoError(t, p.appendOne(make([]byte, 2<<20)))
	require.ErrorContains(t, p.readAll(func([]byte) {}), "longer than the read buffer")
}

// TestReportMedian: the ratio report gives the median of the rounds'
// ratios, the mean of the middle two for an even number of rounds (it
// once gave the upper one: with -rounds 2, the larger ratio).
func TestReportMedian(t *testing.T) {
	times := make([][]time.Duration, len(peerNames))
	for i := range times {
		times[i] = []time.Duration{100, 100}
	}
	times[slices.Index(peerNames, "framed")] = []time.Duration{100, 300}
	var out bytes.Buffer
	report(&out, "sc", times, 1)
	assert.Contains(t, out.String(), "sc.framed_time_over_partlog 2 x\n")
	assert.Contains(t, out.String(), "sc.tidwall_wal_time_over_partlog 1 x\n")
	assert.InDelta(t, 2.0, median([]float64{3, 1, 2}), 1e-9)
	assert.InDelta(t, 2.5, median([]float64{4, 1, 3, 2}), 1e-9)
	assert.Zero(t, median(nil))
}
