package log_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// gapRead is what a read answered: its batches' bytes and offsets, or its
// error.
type gapRead struct {
	bytes       []byte
	first, next int64
	err         error
}

// readGap reads offset from p with ReadFromFollower or ReadFrom.
func readGap(t *testing.T, p *plog.Partition, offset int64, maxBytes int, follower bool) gapRead {
	t.Helper()
	read := p.ReadFrom
	if follower {
		read = p.ReadFromFollower
	}
	r, err := read(offset, maxBytes)
	if err != nil {
		return gapRead{err: err}
	}
	defer func() { require.NoError(t, r.Close()) }()
	return gapRead{bytes: append([]byte(nil), r.Bytes()...), first: r.FirstOffset(), next: r.NextOffset()}
}

// TestTierReadInGapsBelowLocalStart: a follower's log whose segments leave
// offset gaps (rolls past 32-bit relative offsets) answers a read inside a
// gap with the first batch after it (law 3, followers), and once its first
// segments are copied and deleted locally it answers every such read below
// the local log start the same (law 14): from the next copy when the gap
// lies between two copies, from the first local segment when the gap runs
// from the last copy up to the local log start.
func TestTierReadInGapsBelowLocalStart(t *testing.T) {
	const huge = int64(math.MaxInt32) + 5
	mem := vfs.NewMem()
	st := plog.NewDirRemoteStorage("/remote", mem)
	d, err := plog.OpenDir("/data", tierDirConfig(mem, st))
	require.NoError(t, err)
	defer d.Close()
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	// Batches 0..1, 2+huge..4+huge, 5+huge..6+huge, 7+2huge..9+2huge: a
	// segment holds 2^31 offsets from its base, and a roll past them
	// starts the next one at the batch's last offset less 2^31-1 or at
	// the log end, whichever is higher. The offsets 2..1+huge and
	// 7+huge..7+2huge-1 are gaps, each partly between two segments.
	_, err = p.AppendAssigned(recordSet(t, 3,
		assigned{base: 0, n: 2}, assigned{base: 2 + huge, n: 3},
		assigned{base: 5 + huge, n: 2}, assigned{base: 7 + 2*huge, n: 3}))
	require.NoError(t, err)
	require.NoError(t, p.Sync())
	var bases []int64
	for _, s := range p.SegmentInfos() {
		bases = append(bases, s.BaseOffset)
	}
	require.Equal(t, []int64{0, 9, 5 + huge, 14 + huge}, bases)

	cases := []struct {
		name    string
		offsets []int64
	}{
		{"in the first copy", []int64{0, 1}},
		{"gap between two copies", []int64{2, 5, 8}},
		{"in a copy, before its first batch", []int64{9, 1 + huge}},
		{"in a copy", []int64{2 + huge, 3 + huge, 6 + huge}},
		{"gap from the last copy up to the local log start", []int64{7 + huge, 13 + huge}},
		{"local, before the first local batch", []int64{14 + huge, 6 + 2*huge}},
	}
	type readAt struct {
		name     string
		offset   int64
		maxBytes int
		follower bool
	}
	var all []readAt
	for _, c := range cases {
		for _, o := range c.offsets {
			for _, maxBytes := range []int{1, 1 << 20} {
				all = append(all, readAt{c.name, o, maxBytes, false}, readAt{c.name, o, maxBytes, true})
			}
		}
	}
	answers := func() []gapRead {
		out := make([]gapRead, len(all))
		for i, r := range all {
			out[i] = readGap(t, p, r.offset, r.maxBytes, r.follower)
		}
		return out
	}
	local := answers()
	for i, r := range local {
		require.NoError(t, r.err, "local read %+v", all[i])
		require.NotEmpty(t, r.bytes, "local read %+v", all[i])
	}

	d.RunTierPass()
	require.Equal(t, 3, p.Stats().Remote.Segments)
	require.Equal(t, 14+huge, p.LogStartOffset(), "the sealed segments were copied and deleted locally")
	for i, r := range answers() {
		require.Equal(t, local[i], r, "read %+v: the same answer below the local log start", all[i])
	}
}
