package main

import (
	"encoding/binary"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	plog "github.com/partlog/partlog/log"
)

// TestSelectSteps: -only runs exactly the measurements it names, whatever
// their order (it once ran every measurement after the first one named).
func TestSelectSteps(t *testing.T) {
	names := []string{"append", "read", "validate", "lookup"}
	tests := []struct {
		only string
		want []bool
		err  bool
	}{
		{"", []bool{true, true, true, true}, false},
		{"read", []bool{false, true, false, false}, false},
		{"append", []bool{true, false, false, false}, false},
		{"lookup, append", []bool{true, false, false, true}, false},
		{"read,nosuch", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.only, func(t *testing.T) {
			got, err := selectSteps(names, tt.only)
			if tt.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestFramedRecordRoundTrip: the framed baseline of one_record_read hands
// back each record's key (nil when null) and value, and rejects a key
// length that runs past the payload.
func TestFramedRecordRoundTrip(t *testing.T) {
	tests := []struct {
		name       string
		key, value []byte
	}{
		{"null key", nil, []byte("value")},
		{"empty key", []byte{}, []byte("value")},
		{"key", []byte("key"), []byte("value")},
		{"long key", make([]byte, 300), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fr := appendFramedRecord(nil, tt.key, tt.value)
			require.Len(t, fr, 8+int(binary.BigEndian.Uint32(fr)))
			key, value, ok := splitFramed(fr[8:])
			require.True(t, ok)
			assert.Equal(t, tt.key, key)
			assert.Equal(t, len(tt.value), len(value))
			assert.Equal(t, tt.key == nil, key == nil)
		})
	}
	_, _, ok := splitFramed([]byte{5, 'a', 'b'}) // a key of 4 bytes in 2
	assert.False(t, ok)
	_, _, ok = splitFramed(nil)
	assert.False(t, ok)
}

// TestRawRollingLatencies: the plain rolling loop starts a new file when
// the next batch would pass the segment size (as a partition rolls), the
// plain loop never does, every write is timed, and both remove their
// files.
func TestRawRollingLatencies(t *testing.T) {
	set := [][]byte{make([]byte, 1000), make([]byte, 1000)}
	tests := []struct {
		name         string
		segmentBytes int64
		wantRolls    int
	}{
		{"plain", 0, 0},
		{"rolling", 2500, 4}, // 2 writes per file: 10 writes, 5 files
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &bench{root: t.TempDir()}
			l, err := b.rawRollingLatencies(set, 10, "raw", tt.segmentBytes)
			require.NoError(t, err)
			assert.Equal(t, tt.wantRolls, l.rolls)
			require.Len(t, l.lat, 10)
			assert.True(t, slices.IsSorted(l.lat))
			assert.NoDirExists(t, filepath.Join(b.root, "raw"))
		})
	}
}

// TestRounds: the baseline and the candidate take turns, each round's
// ratio is base ÷ cand, the best runs are the least times, and the median
// is the middle ratio (the mean of the middle two for an even count).
func TestRounds(t *testing.T) {
	var order []string
	base := []time.Duration{10, 12, 8, 10}
	cand := []time.Duration{20, 12, 4, 5}
	i, j := 0, 0
	b := &bench{reps: 4}
	r, err := b.rounds(func() (cost, error) {
		order = append(order, "base")
		i++
		return cost{wall: base[i-1]}, nil
	}, func() (cost, error) {
		order = append(order, "cand")
		j++
		return cost{wall: cand[j-1]}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"base", "cand", "base", "cand", "base", "cand", "base", "cand"}, order)
	assert.Equal(t, []float64{0.5, 1, 2, 2}, r.wall)
	assert.Empty(t, r.cpu)
	assert.Equal(t, time.Duration(8), r.base.wall)
	assert.Equal(t, time.Duration(4), r.cand.wall)
	assert.InDelta(t, 1.5, r.medianWall(), 1e-9)
	assert.InDelta(t, 1.0, median([]float64{3, 1, 0.5}), 1e-9)
	assert.Zero(t, median(nil))
}

// TestP50Over: rolls.p50_to_raw_write_p50 divides the two loops' medians
// (the latencies are sorted; the median of four is the third).
func TestP50Over(t *testing.T) {
	us := time.Microsecond
	a := latencies{lat: []time.Duration{10 * us, 11 * us, 12 * us, 900 * us}}
	o := latencies{lat: []time.Duration{7 * us, 8 * us, 10 * us, 90 * us}}
	assert.InDelta(t, 1.2, a.p50Over(o), 1e-9)
	assert.InDelta(t, 1/1.2, o.p50Over(a), 1e-9)
}

// TestRemoteTiersStartsFresh: a second run of the remote measurement in
// the same directory (-dir) measures a partition and a store of its own.
// It once reopened the first run's: its appends went on after the first
// run's log, its wait for the copies ended at once on the first run's
// (a copy rate of 0), and its "local" read from offset 0 read the first
// run's copies back from the store.
func TestRemoteTiersStartsFresh(t *testing.T) {
	b := &bench{root: t.TempDir(), reps: 1, total: 64 << 20} // 16 MiB: 4 segments
	logEnd := func() int64 {
		dir := filepath.Join(b.root, "remote-0")
		d, err := plog.OpenDir(filepath.Join(dir, "data"), plog.DirConfig{
			Config: plog.Config{SegmentBytes: 4 << 20},
			Remote: &plog.RemoteConfig{Storage: plog.NewDirRemoteStorage(filepath.Join(dir, "store"), nil), LocalRetentionBytes: 1, Interval: time.Hour},
		})
		require.NoError(t, err)
		defer func() { require.NoError(t, d.Close()) }()
		p := d.Partition("bench", 0)
		require.NotNil(t, p)
		return p.LogEndOffset()
	}
	require.NoError(t, b.remoteTiers())
	first := logEnd()
	require.Positive(t, first)
	require.NoError(t, b.remoteTiers())
	assert.Equal(t, first, logEnd(), "the second run appended to the first run's partition")
}
