package s3remote_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync"
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

// roundTripFunc is an http.RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// multipartStore returns a Store whose requests a fake store answers
// without a network (so no socket buffer takes a part's bytes ahead of
// it): every upload succeeds, and the body of each part upload is read
// by readPart. Its parts are 5 MiB and it does not retry.
func multipartStore(t *testing.T, timeout time.Duration, readPart func(r *http.Request) error) *s3remote.Store {
	t.Helper()
	answer := func(r *http.Request, h http.Header, body string) *http.Response {
		if h == nil {
			h = http.Header{}
		}
		return &http.Response{StatusCode: http.StatusOK, Header: h, Body: io.NopCloser(strings.NewReader(body)),
			ContentLength: int64(len(body)), Request: r, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
	}
	etag := func() http.Header { return http.Header{"Etag": {`"0123456789abcdef0123456789abcdef"`}} }
	transport := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Body == nil {
			r.Body = http.NoBody
		}
		defer r.Body.Close()
		q := r.URL.Query()
		switch {
		case r.Method == http.MethodPost && q.Has("uploads"):
			return answer(r, nil, `<?xml version="1.0" encoding="UTF-8"?><InitiateMultipartUploadResult>`+
				`<Bucket>bucket</Bucket><Key>k</Key><UploadId>u</UploadId></InitiateMultipartUploadResult>`), nil
		case r.Method == http.MethodPut && q.Has("partNumber"):
			if err := readPart(r); err != nil {
				return nil, err
			}
			return answer(r, etag(), ""), nil
		case r.Method == http.MethodPost && q.Has("uploadId"):
			_, _ = io.Copy(io.Discard, r.Body)
			return answer(r, nil, `<?xml version="1.0" encoding="UTF-8"?><CompleteMultipartUploadResult>`+
				`<Location>l</Location><Bucket>bucket</Bucket><Key>k</Key><ETag>"0123456789abcdef0123456789abcdef-2"</ETag>`+
				`</CompleteMultipartUploadResult>`), nil
		case r.Method == http.MethodDelete:
			resp := answer(r, nil, "")
			resp.StatusCode = http.StatusNoContent
			return resp, nil
		default: // the index objects
			_, _ = io.Copy(io.Discard, r.Body)
			return answer(r, etag(), ""), nil
		}
	})
	st, err := s3remote.New(s3remote.Config{Endpoint: "s3.test:9000", Bucket: "bucket",
		RequestTimeout: timeout, MaxRetries: -1, PartSize: 5 << 20, Transport: transport})
	require.NoError(t, err)
	return st
}

// TestSlowPartUpload: a part of a multipart upload whose bytes the store
// takes steadily, over longer than the request timeout, is progress, and
// the copy succeeds; a part the store stops taking still fails the copy
// within about the timeout with an error wrapping ErrRemoteUnavailable.
// (minio-go reads a part from the segment into a buffer and sends it from
// there: the Store's watchdog used to see no read for the whole send and
// cancel it, so a segment larger than PartSize never copied over a link
// slower than PartSize per RequestTimeout.)
func TestSlowPartUpload(t *testing.T) {
	body := bytes.Repeat([]byte{7}, 5<<20+100) // two parts
	md := plog.RemoteSegmentMetadata{ID: plog.NewRemoteSegmentID(tp), EndOffset: 9, Size: int64(len(body))}
	t.Run("Steady", func(t *testing.T) {
		// 16 KiB every 4 ms: a 5 MiB part takes over 1.2 s, and no
		// pause comes near the 1 s timeout.
		st := multipartStore(t, time.Second, func(r *http.Request) error {
			buf := make([]byte, 16<<10)
			for {
				_, err := r.Body.Read(buf)
				if err == io.EOF {
					return nil
				}
				if err != nil {
					return err
				}
				time.Sleep(4 * time.Millisecond)
			}
		})
		require.NoError(t, st.CopySegment(context.Background(), md, segmentData(body)))
	})
	t.Run("Stops", func(t *testing.T) {
		st := multipartStore(t, 300*time.Millisecond, func(r *http.Request) error {
			_, _ = io.ReadFull(r.Body, make([]byte, 1<<20))
			<-r.Context().Done()
			return r.Context().Err()
		})
		err := st.CopySegment(context.Background(), md, segmentData(body))
		require.ErrorIs(t, err, plog.ErrRemoteUnavailable)
		assert.NotErrorIs(t, err, context.Canceled)
	})
}

// TestIndexUploadRetried: an index file's upload that meets a server error
// is sent again (Config.MaxRetries), so one 500 answer does not fail the
// copy. (The index files went to minio-go as a reader it cannot rewind,
// which it sends once.)
func TestIndexUploadRetried(t *testing.T) {
	var mu sync.Mutex
	puts := map[string]int{}
	transport := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Body != nil {
			_, _ = io.Copy(io.Discard, r.Body)
			_ = r.Body.Close()
		}
		mu.Lock()
		puts[path.Base(r.URL.Path)]++
		first := puts[path.Base(r.URL.Path)] == 1
		mu.Unlock()
		resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Etag": {`"0123456789abcdef0123456789abcdef"`}},
			Body: http.NoBody, Request: r, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
		if first && path.Base(r.URL.Path) != "log" {
			const body = `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code><Message>test</Message></Error>`
			resp.StatusCode = http.StatusInternalServerError
			resp.Header = http.Header{"Content-Type": {"application/xml"}}
			resp.Body, resp.ContentLength = io.NopCloser(strings.NewReader(body)), int64(len(body))
		}
		return resp, nil
	})
	st, err := s3remote.New(s3remote.Config{Endpoint: "s3.test:9000", Bucket: "bucket", Transport: transport})
	require.NoError(t, err)
	body := bytes.Repeat([]byte{7}, 1000)
	md := plog.RemoteSegmentMetadata{ID: plog.NewRemoteSegmentID(tp), EndOffset: 9, Size: int64(len(body))}
	require.NoError(t, st.CopySegment(context.Background(), md, segmentData(body)))
	for _, name := range []string{"index", "timeindex", "txnindex", "snapshot", "epochs"} {
		assert.Equal(t, 2, puts[name], name)
	}
}

// TestAnswerWithoutLength: a whole object sent without a Content-Length
// (chunked, as HTTP/1.1 allows) reads to the end of the body. (The reader
// took the missing length, -1, for the bytes left and panicked slicing
// the caller's buffer with it.)
func TestAnswerWithoutLength(t *testing.T) {
	content := []byte("an index file sent in chunks")
	st := fakeStore(t, func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
		w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
		w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush() // the headers go without a length
		_, _ = w.Write(content)
	})
	ctx := context.Background()
	id := plog.NewRemoteSegmentID(tp)
	rc, err := st.FetchIndex(ctx, id, plog.RemoteOffsetIndex)
	assert.Equal(t, content, readAll(t, rc, err))
	rc, err = st.FetchSegment(ctx, id, 0, -1)
	assert.Equal(t, content, readAll(t, rc, err))
}
