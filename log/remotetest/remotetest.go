// Package remotetest is the conformance suite of log.RemoteStorage: every
// implementation (the library's directory-backed store, an object store of
// your own) runs it from a test of its own package:
//
//	func TestConformance(t *testing.T) {
//		remotetest.Run(t, func(t *testing.T) log.RemoteStorage {
//			return mystore.New(t.TempDir())
//		})
//	}
//
// Run checks what the log relies on: copies read back byte for byte, in
// whole and in ranges; every index kind, empty ones included; range
// errors; deletion, also of what a failed copy left, which ListSegments
// lists; re-copies under the same ID; listing per partition; not-found
// errors; cancellation; and concurrent use.
//
// Kill, with KillHelper, is the copier kill test of a store: a child
// process tiering to it is killed with SIGKILL again and again, and after
// each kill nothing acknowledged is lost and the next start leaves no
// orphan copy in the store.
package remotetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	plog "github.com/partlog/partlog/log"
)

// Run runs the conformance suite as subtests of t. newStore returns a
// fresh, empty store for each subtest; it may register cleanups on the
// subtest it is given.
func Run(t *testing.T, newStore func(t *testing.T) plog.RemoteStorage) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, s plog.RemoteStorage)
	}{
		{"CopyFetchWhole", testCopyFetchWhole},
		{"FetchRanges", testFetchRanges},
		{"InvalidRanges", testInvalidRanges},
		{"IndexKinds", testIndexKinds},
		{"EmptyIndexes", testEmptyIndexes},
		{"LargeStreamedSegment", testLargeStreamedSegment},
		{"EmptySegment", testEmptySegment},
		{"NotFound", testNotFound},
		{"Delete", testDelete},
		{"DeleteAbsent", testDeleteAbsent},
		{"RecopySameID", testRecopySameID},
		{"RecopyReplaces", testRecopyReplaces},
		{"List", testList},
		{"FailedCopyCleanedByDelete", testFailedCopy},
		{"ShortSegmentFails", testShortSegment},
		{"CanceledContext", testCanceled},
		{"Concurrent", testConcurrent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, newStore(t))
		})
	}
}

var (
	tpA = plog.TopicPartition{Topic: "orders", Partition: 0}
	tpB = plog.TopicPartition{Topic: "orders", Partition: 1}
	tpC = plog.TopicPartition{Topic: "orders.v2", Partition: 0}
)

// segment is one segment's contents and metadata for the tests.
type segment struct {
	md   plog.RemoteSegmentMetadata
	body []byte
	idx  map[plog.RemoteIndexKind][]byte
}

func newSegment(tp plog.TopicPartition, seed uint64, size int) segment {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	fill := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	s := segment{
		md: plog.RemoteSegmentMetadata{
			ID:           plog.NewRemoteSegmentID(tp),
			BaseOffset:   int64(seed) * 100,
			EndOffset:    int64(seed)*100 + 99,
			MaxTimestamp: 1_700_000_000_000 + int64(seed),
			Size:         int64(size),
			LeaderEpochs: []plog.EpochStart{{Epoch: 3, StartOffset: int64(seed) * 100}},
		},
		body: fill(size),
		idx:  map[plog.RemoteIndexKind][]byte{},
	}
	for i, k := range plog.RemoteIndexKinds {
		s.idx[k] = fill(8 + 12*i + int(seed%7))
	}
	return s
}

func (s segment) data() plog.RemoteSegmentData {
	return plog.RemoteSegmentData{
		Segment:          bytes.NewReader(s.body),
		OffsetIndex:      s.idx[plog.RemoteOffsetIndex],
		TimeIndex:        s.idx[plog.RemoteTimeIndex],
		TxnIndex:         s.idx[plog.RemoteTxnIndex],
		ProducerSnapshot: s.idx[plog.RemoteProducerSnapshot],
		LeaderEpochs:     s.idx[plog.RemoteLeaderEpochIndex],
	}
}

func copySegment(t *testing.T, st plog.RemoteStorage, s segment) {
	t.Helper()
	require.NoError(t, st.CopySegment(context.Background(), s.md, s.data()), "CopySegment %s", s.md.ID)
}

func fetch(t *testing.T, st plog.RemoteStorage, id plog.RemoteSegmentID, start, end int64) []byte {
	t.Helper()
	rc, err := st.FetchSegment(context.Background(), id, start, end)
	require.NoError(t, err, "FetchSegment %s [%d, %d)", id, start, end)
	defer func() { require.NoError(t, rc.Close()) }()
	b, err := io.ReadAll(rc)
	require.NoError(t, err, "reading FetchSegment %s [%d, %d)", id, start, end)
	return b
}

func fetchIndex(t *testing.T, st plog.RemoteStorage, id plog.RemoteSegmentID, k plog.RemoteIndexKind) []byte {
	t.Helper()
	rc, err := st.FetchIndex(context.Background(), id, k)
	require.NoError(t, err, "FetchIndex %s %s", id, k)
	defer func() { require.NoError(t, rc.Close()) }()
	b, err := io.ReadAll(rc)
	require.NoError(t, err, "reading FetchIndex %s %s", id, k)
	return b
}

func list(t *testing.T, st plog.RemoteStorage, tp plog.TopicPartition) []string {
	t.Helper()
	ids, err := st.ListSegments(context.Background(), tp)
	require.NoError(t, err, "ListSegments %s", tp)
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		require.Equal(t, tp, id.TopicPartition, "ListSegments %s returned %s", tp, id)
		out = append(out, id.ID)
	}
	slices.Sort(out)
	return out
}

func sortedIDs(segs ...segment) []string {
	out := make([]string, 0, len(segs))
	for _, s := range segs {
		out = append(out, s.md.ID.ID)
	}
	slices.Sort(out)
	return out
}

func testCopyFetchWhole(t *testing.T, st plog.RemoteStorage) {
	s := newSegment(tpA, 1, 64<<10+17)
	copySegment(t, st, s)
	assert.Equal(t, s.body, fetch(t, st, s.md.ID, 0, -1))
	assert.Equal(t, s.body, fetch(t, st, s.md.ID, 0, s.md.Size))
}

func testFetchRanges(t *testing.T, st plog.RemoteStorage) {
	s := newSegment(tpA, 2, 100_000)
	copySegment(t, st, s)
	n := s.md.Size
	ranges := [][2]int64{
		{0, 1}, {0, 4096}, {1, 2}, {4095, 4097}, {12345, 54321}, {n - 1, n}, {n - 1, -1},
		{50_000, -1}, {n, n}, {n, -1}, {0, 0}, {777, 777},
	}
	for _, r := range ranges {
		end := r[1]
		if end < 0 {
			end = n
		}
		assert.Equal(t, s.body[r[0]:end], fetch(t, st, s.md.ID, r[0], r[1]), "range [%d, %d)", r[0], r[1])
	}
}

func testInvalidRanges(t *testing.T, st plog.RemoteStorage) {
	s := newSegment(tpA, 3, 1000)
	copySegment(t, st, s)
	for _, r := range [][2]int64{{-1, 10}, {-1, -1}, {1001, -1}, {1001, 1002}, {10, 9}, {0, 1001}, {500, 2000}} {
		rc, err := st.FetchSegment(context.Background(), s.md.ID, r[0], r[1])
		if err == nil {
			_ = rc.Close()
		}
		require.ErrorIs(t, err, plog.ErrRemoteInvalidRange, "range [%d, %d)", r[0], r[1])
	}
}

func testIndexKinds(t *testing.T, st plog.RemoteStorage) {
	s := newSegment(tpA, 4, 2048)
	copySegment(t, st, s)
	for _, k := range plog.RemoteIndexKinds {
		assert.Equal(t, s.idx[k], fetchIndex(t, st, s.md.ID, k), "index %s", k)
	}
}

func testEmptyIndexes(t *testing.T, st plog.RemoteStorage) {
	s := newSegment(tpA, 5, 2048)
	d := s.data()
	d.TxnIndex = nil
	d.ProducerSnapshot = []byte{}
	d.LeaderEpochs = nil
	require.NoError(t, st.CopySegment(context.Background(), s.md, d))
	assert.Empty(t, fetchIndex(t, st, s.md.ID, plog.RemoteTxnIndex))
	assert.Empty(t, fetchIndex(t, st, s.md.ID, plog.RemoteProducerSnapshot))
	assert.Empty(t, fetchIndex(t, st, s.md.ID, plog.RemoteLeaderEpochIndex))
	assert.Equal(t, s.idx[plog.RemoteOffsetIndex], fetchIndex(t, st, s.md.ID, plog.RemoteOffsetIndex))
}

// chunkReader hands out its bytes a few at a time and is neither a Seeker
// nor a ReaderAt, as the log's segment readers may be.
type chunkReader struct {
	b     []byte
	chunk int
	err   error // returned once b is exhausted instead of io.EOF, if set
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		return 0, io.EOF
	}
	n := min(len(p), r.chunk, len(r.b))
	copy(p, r.b[:n])
	r.b = r.b[n:]
	return n, nil
}

func testLargeStreamedSegment(t *testing.T, st plog.RemoteStorage) {
	s := newSegment(tpA, 6, 12<<20+3)
	d := s.data()
	d.Segment = &chunkReader{b: s.body, chunk: 100_003}
	require.NoError(t, st.CopySegment(context.Background(), s.md, d))
	got := fetch(t, st, s.md.ID, 0, -1)
	require.Len(t, got, len(s.body))
	assert.True(t, bytes.Equal(s.body, got), "12 MiB segment differs after a streamed copy")
	assert.True(t, bytes.Equal(s.body[9<<20:10<<20+5], fetch(t, st, s.md.ID, 9<<20, 10<<20+5)))
}

func testEmptySegment(t *testing.T, st plog.RemoteStorage) {
	s := newSegment(tpA, 7, 0)
	copySegment(t, st, s)
	assert.Empty(t, fetch(t, st, s.md.ID, 0, -1))
	assert.Empty(t, fetch(t, st, s.md.ID, 0, 0))
	assert.Equal(t, []string{s.md.ID.ID}, list(t, st, tpA))
}

func testNotFound(t *testing.T, st plog.RemoteStorage) {
	ctx := context.Background()
	copySegment(t, st, newSegment(tpA, 8, 100))
	for _, id := range []plog.RemoteSegmentID{plog.NewRemoteSegmentID(tpA), plog.NewRemoteSegmentID(tpB)} {
		_, err := st.FetchSegment(ctx, id, 0, -1)
		require.ErrorIs(t, err, plog.ErrRemoteSegmentNotFound, "FetchSegment %s", id)
		for _, k := range plog.RemoteIndexKinds {
			_, err := st.FetchIndex(ctx, id, k)
			require.ErrorIs(t, err, plog.ErrRemoteSegmentNotFound, "FetchIndex %s %s", id, k)
		}
	}
	assert.Empty(t, list(t, st, tpB))
}

func testDelete(t *testing.T, st plog.RemoteStorage) {
	ctx := context.Background()
	a, b := newSegment(tpA, 9, 3000), newSegment(tpA, 10, 3000)
	copySegment(t, st, a)
	copySegment(t, st, b)
	require.NoError(t, st.DeleteSegment(ctx, a.md.ID))
	_, err := st.FetchSegment(ctx, a.md.ID, 0, -1)
	require.ErrorIs(t, err, plog.ErrRemoteSegmentNotFound)
	for _, k := range plog.RemoteIndexKinds {
		_, err := st.FetchIndex(ctx, a.md.ID, k)
		require.ErrorIs(t, err, plog.ErrRemoteSegmentNotFound, "index %s after delete", k)
	}
	assert.Equal(t, []string{b.md.ID.ID}, list(t, st, tpA))
	assert.Equal(t, b.body, fetch(t, st, b.md.ID, 0, -1), "deleting a segment touched another")
	require.NoError(t, st.DeleteSegment(ctx, a.md.ID), "second delete")
}

func testDeleteAbsent(t *testing.T, st plog.RemoteStorage) {
	require.NoError(t, st.DeleteSegment(context.Background(), plog.NewRemoteSegmentID(tpA)))
	require.NoError(t, st.DeleteSegment(context.Background(), plog.NewRemoteSegmentID(tpC)))
}

func testRecopySameID(t *testing.T, st plog.RemoteStorage) {
	s := newSegment(tpA, 11, 5000)
	copySegment(t, st, s)
	copySegment(t, st, s)
	assert.Equal(t, s.body, fetch(t, st, s.md.ID, 0, -1))
	for _, k := range plog.RemoteIndexKinds {
		assert.Equal(t, s.idx[k], fetchIndex(t, st, s.md.ID, k), "index %s", k)
	}
	assert.Equal(t, []string{s.md.ID.ID}, list(t, st, tpA))
}

func testRecopyReplaces(t *testing.T, st plog.RemoteStorage) {
	s := newSegment(tpA, 12, 5000)
	copySegment(t, st, s)
	// A retry after a crash may copy a segment that differs in size (the
	// store must not keep a tail of the earlier copy) with other indexes.
	r := newSegment(tpA, 13, 3000)
	r.md.ID = s.md.ID
	copySegment(t, st, r)
	assert.Equal(t, r.body, fetch(t, st, s.md.ID, 0, -1))
	for _, k := range plog.RemoteIndexKinds {
		assert.Equal(t, r.idx[k], fetchIndex(t, st, s.md.ID, k), "index %s", k)
	}
}

func testList(t *testing.T, st plog.RemoteStorage) {
	assert.Empty(t, list(t, st, tpA))
	a1, a2 := newSegment(tpA, 14, 10), newSegment(tpA, 15, 10)
	b1 := newSegment(tpB, 16, 10)
	c1 := newSegment(tpC, 17, 10)
	for _, s := range []segment{a1, a2, b1, c1} {
		copySegment(t, st, s)
	}
	assert.Equal(t, sortedIDs(a1, a2), list(t, st, tpA))
	assert.Equal(t, sortedIDs(b1), list(t, st, tpB))
	assert.Equal(t, sortedIDs(c1), list(t, st, tpC))
	assert.Empty(t, list(t, st, plog.TopicPartition{Topic: "orders", Partition: 2}))
	assert.Empty(t, list(t, st, plog.TopicPartition{Topic: "order", Partition: 0}))
}

var errReader = errors.New("remotetest: segment reader failed")

func testFailedCopy(t *testing.T, st plog.RemoteStorage) {
	ctx := context.Background()
	s := newSegment(tpA, 18, 300_000)
	d := s.data()
	d.Segment = &chunkReader{b: s.body[:150_000], chunk: 10_000, err: errReader}
	err := st.CopySegment(ctx, s.md, d)
	require.ErrorIs(t, err, errReader, "CopySegment must fail with (a wrap of) the segment reader's error")
	// Whatever the failed copy left is listed (or nothing of it can be
	// fetched): a log finds what to delete by listing.
	if listed := list(t, st, tpA); len(listed) == 0 {
		_, err = st.FetchSegment(ctx, s.md.ID, 0, -1)
		require.ErrorIs(t, err, plog.ErrRemoteSegmentNotFound, "a failed copy that is not listed must leave nothing")
		for _, k := range plog.RemoteIndexKinds {
			_, err := st.FetchIndex(ctx, s.md.ID, k)
			require.ErrorIs(t, err, plog.ErrRemoteSegmentNotFound, "a failed copy that is not listed must leave no %s file", k)
		}
	} else {
		assert.Equal(t, []string{s.md.ID.ID}, listed, "ListSegments after a failed copy")
	}
	// Whatever the failed copy left, DeleteSegment removes it.
	require.NoError(t, st.DeleteSegment(ctx, s.md.ID))
	assert.Empty(t, list(t, st, tpA))
	_, err = st.FetchSegment(ctx, s.md.ID, 0, -1)
	require.ErrorIs(t, err, plog.ErrRemoteSegmentNotFound)
	// And a retry under the same ID succeeds.
	copySegment(t, st, s)
	assert.Equal(t, s.body, fetch(t, st, s.md.ID, 0, -1))
}

func testShortSegment(t *testing.T, st plog.RemoteStorage) {
	s := newSegment(tpA, 19, 4000)
	d := s.data()
	d.Segment = bytes.NewReader(s.body[:3000])
	require.Error(t, st.CopySegment(context.Background(), s.md, d),
		"a segment reader that ends before RemoteSegmentMetadata.Size must fail the copy")
}

func testCanceled(t *testing.T, st plog.RemoteStorage) {
	s := newSegment(tpA, 20, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := st.CopySegment(ctx, s.md, s.data())
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, st.DeleteSegment(context.Background(), s.md.ID))
	copySegment(t, st, s)
	_, err = st.FetchSegment(ctx, s.md.ID, 0, -1)
	require.ErrorIs(t, err, context.Canceled)
	_, err = st.FetchIndex(ctx, s.md.ID, plog.RemoteOffsetIndex)
	require.ErrorIs(t, err, context.Canceled)
}

func testConcurrent(t *testing.T, st plog.RemoteStorage) {
	const n = 8
	segs := make([]segment, n)
	for i := range segs {
		segs[i] = newSegment([]plog.TopicPartition{tpA, tpB}[i%2], uint64(30+i), 20_000+i*1000)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, s := range segs {
		wg.Go(func() { errs[i] = st.CopySegment(context.Background(), s.md, s.data()) })
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "concurrent copy %d", i)
	}
	got := make([][]byte, n)
	for i, s := range segs {
		wg.Go(func() {
			rc, err := st.FetchSegment(context.Background(), s.md.ID, 100, -1)
			if err != nil {
				errs[i] = err
				return
			}
			defer rc.Close()
			got[i], errs[i] = io.ReadAll(rc)
		})
	}
	wg.Wait()
	for i, s := range segs {
		require.NoError(t, errs[i], "concurrent fetch %d", i)
		assert.Equal(t, s.body[100:], got[i], fmt.Sprintf("concurrent fetch %d", i))
	}
	assert.Equal(t, sortedIDs(segs[0], segs[2], segs[4], segs[6]), list(t, st, tpA))
	assert.Equal(t, sortedIDs(segs[1], segs[3], segs[5], segs[7]), list(t, st, tpB))
}
