package s3remote_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/remotetest"
	"github.com/partlog/partlog/log/s3remote/weedtest"
)

// TestConformance runs the log's RemoteStorage suite against a SeaweedFS
// S3 gateway, each subtest under a key prefix of its own in one bucket.
func TestConformance(t *testing.T) {
	w := weedtest.Start(t)
	var n atomic.Int64
	remotetest.Run(t, func(t *testing.T) plog.RemoteStorage {
		return w.Store(t, fmt.Sprintf("conformance/%d/", n.Add(1)))
	})
}

var tp = plog.TopicPartition{Topic: "events", Partition: 3}

func testSegment(size int) (plog.RemoteSegmentMetadata, []byte) {
	body := make([]byte, size)
	for i := range body {
		body[i] = byte(i*7 + i>>9)
	}
	md := plog.RemoteSegmentMetadata{ID: plog.NewRemoteSegmentID(tp), BaseOffset: 0, EndOffset: 99, Size: int64(size)}
	return md, body
}

func segmentData(body []byte) plog.RemoteSegmentData {
	return plog.RemoteSegmentData{Segment: bytes.NewReader(body), OffsetIndex: []byte("offsets"), TimeIndex: []byte("times")}
}

func readAll(t *testing.T, rc io.ReadCloser, err error) []byte {
	t.Helper()
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return b
}

// TestServerStoppedAndRestarted stops the server under a Store: every call
// fails, within the request timeout and its retries, with an error
// wrapping ErrRemoteUnavailable (not ErrRemoteSegmentNotFound); once the
// server is back, the same Store reads what it copied before and copies
// again.
func TestServerStoppedAndRestarted(t *testing.T) {
	w := weedtest.Start(t)
	st := w.Store(t, "outage/")
	ctx := context.Background()
	md, body := testSegment(300_000)
	require.NoError(t, st.CopySegment(ctx, md, segmentData(body)))

	// A fetch started before the stop and read after it.
	rc, err := st.FetchSegment(ctx, md.ID, 0, -1)
	require.NoError(t, err)
	w.Stop()
	_, err = io.ReadAll(rc)
	if err != nil {
		// The server may have sent the whole body before it stopped.
		require.ErrorIs(t, err, plog.ErrRemoteUnavailable)
	}
	require.NoError(t, rc.Close())

	md2, body2 := testSegment(100_000)
	calls := map[string]func() error{
		"CopySegment": func() error { return st.CopySegment(ctx, md2, segmentData(body2)) },
		"FetchSegment": func() error {
			rc, err := st.FetchSegment(ctx, md.ID, 10, 20)
			if err == nil {
				rc.Close()
			}
			return err
		},
		"FetchIndex": func() error {
			rc, err := st.FetchIndex(ctx, md.ID, plog.RemoteOffsetIndex)
			if err == nil {
				rc.Close()
			}
			return err
		},
		"DeleteSegment": func() error { return st.DeleteSegment(ctx, md2.ID) },
		"ListSegments": func() error {
			_, err := st.ListSegments(ctx, tp)
			return err
		},
	}
	for name, call := range calls {
		start := time.Now()
		err := call()
		require.ErrorIs(t, err, plog.ErrRemoteUnavailable, "%s with the server stopped", name)
		assert.NotErrorIs(t, err, plog.ErrRemoteSegmentNotFound, name)
		assert.Less(t, time.Since(start), 40*time.Second, "%s took too long to fail: %v", name, err)
	}

	w.Start()
	rc, err = st.FetchSegment(ctx, md.ID, 1000, 2000)
	assert.Equal(t, body[1000:2000], readAll(t, rc, err))
	require.NoError(t, st.CopySegment(ctx, md2, segmentData(body2)))
	rc, err = st.FetchSegment(ctx, md2.ID, 0, -1)
	assert.Equal(t, body2, readAll(t, rc, err))
	ids, err := st.ListSegments(ctx, tp)
	require.NoError(t, err)
	assert.ElementsMatch(t, []plog.RemoteSegmentID{md.ID, md2.ID}, ids)
}
