package s3remote_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/s3remote"
)

// fakeStore starts an HTTP server answering every request with handler
// and returns a Store of it with a 300 ms request timeout and no retries.
func fakeStore(t *testing.T, handler func(w http.ResponseWriter, r *http.Request, release <-chan struct{})) *s3remote.Store {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handler(w, r, release)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	st, err := s3remote.New(s3remote.Config{
		Endpoint:       strings.TrimPrefix(srv.URL, "http://"),
		Bucket:         "bucket",
		RequestTimeout: 300 * time.Millisecond,
		MaxRetries:     -1,
	})
	require.NoError(t, err)
	return st
}

func s3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>`+code+`</Code><Message>test</Message></Error>`)
}

// every calls each Store method once and returns their errors by name.
func every(st *s3remote.Store) map[string]error {
	ctx := context.Background()
	id := plog.NewRemoteSegmentID(tp)
	body := bytes.Repeat([]byte{1}, 1000)
	out := map[string]error{}
	out["CopySegment"] = st.CopySegment(ctx, plog.RemoteSegmentMetadata{ID: id, Size: int64(len(body))}, segmentData(body))
	rc, err := st.FetchSegment(ctx, id, 0, 10)
	if err == nil {
		_, err = io.ReadAll(rc)
		rc.Close()
	}
	out["FetchSegment"] = err
	rc, err = st.FetchIndex(ctx, id, plog.RemoteTimeIndex)
	if err == nil {
		_, err = io.ReadAll(rc)
		rc.Close()
	}
	out["FetchIndex"] = err
	out["DeleteSegment"] = st.DeleteSegment(ctx, id)
	_, out["ListSegments"] = st.ListSegments(ctx, tp)
	return out
}

// TestErrorAnswers maps the store's error answers to the log's sentinels:
// throttling and server errors are unavailability, a missing object is not
// found, a denied request is neither.
func TestErrorAnswers(t *testing.T) {
	for _, tc := range []struct {
		status      int
		code        string
		unavailable bool
	}{
		{http.StatusServiceUnavailable, "SlowDown", true},
		{http.StatusInternalServerError, "InternalError", true},
		{http.StatusTooManyRequests, "TooManyRequests", true},
		{http.StatusForbidden, "AccessDenied", false},
	} {
		t.Run(tc.code, func(t *testing.T) {
			st := fakeStore(t, func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
				s3Error(w, tc.status, tc.code)
			})
			for name, err := range every(st) {
				require.Error(t, err, name)
				assert.Equal(t, tc.unavailable, errors.Is(err, plog.ErrRemoteUnavailable), "%s: %v", name, err)
				assert.NotErrorIs(t, err, plog.ErrRemoteSegmentNotFound, name)
			}
		})
	}
	t.Run("NoSuchKey", func(t *testing.T) {
		st := fakeStore(t, func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
			s3Error(w, http.StatusNotFound, "NoSuchKey")
		})
		ctx := context.Background()
		_, err := st.FetchSegment(ctx, plog.NewRemoteSegmentID(tp), 0, 10)
		require.ErrorIs(t, err, plog.ErrRemoteSegmentNotFound)
		assert.NotErrorIs(t, err, plog.ErrRemoteUnavailable)
		_, err = st.FetchIndex(ctx, plog.NewRemoteSegmentID(tp), plog.RemoteOffsetIndex)
		require.ErrorIs(t, err, plog.ErrRemoteSegmentNotFound)
	})
}

// TestStalledStore: a store that accepts requests and never answers, or
// stops sending a body half way, fails every call within about the
// request timeout with an error wrapping ErrRemoteUnavailable, and not
// with context.Canceled (the caller canceled nothing).
func TestStalledStore(t *testing.T) {
	t.Run("NoAnswer", func(t *testing.T) {
		st := fakeStore(t, func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
		start := time.Now()
		for name, err := range every(st) {
			require.ErrorIs(t, err, plog.ErrRemoteUnavailable, name)
			assert.NotErrorIs(t, err, context.Canceled, name)
		}
		assert.Less(t, time.Since(start), 10*time.Second, "five calls with a 300 ms timeout")
	})
	t.Run("BodyStops", func(t *testing.T) {
		st := fakeStore(t, func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
			w.Header().Set("Content-Range", "bytes 0-999/5000")
			w.Header().Set("Content-Length", "1000")
			w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
			w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
			w.WriteHeader(http.StatusPartialContent)
			_, _ = w.Write(make([]byte, 100))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
		rc, err := st.FetchSegment(context.Background(), plog.NewRemoteSegmentID(tp), 0, 1000)
		require.NoError(t, err)
		defer rc.Close()
		start := time.Now()
		b, err := io.ReadAll(rc)
		require.ErrorIs(t, err, plog.ErrRemoteUnavailable)
		assert.NotErrorIs(t, err, context.Canceled)
		assert.Len(t, b, 100)
		assert.Less(t, time.Since(start), 5*time.Second)
	})
	t.Run("CallerCancels", func(t *testing.T) {
		st := fakeStore(t, func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := st.ListSegments(ctx, tp)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.NotErrorIs(t, err, plog.ErrRemoteUnavailable)
	})
}
