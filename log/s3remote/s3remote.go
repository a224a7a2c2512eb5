// Package s3remote stores a partlog log's remote segments in an
// S3-compatible object store (Amazon S3, MinIO, SeaweedFS, Ceph RGW, ...).
// It is a module of its own so that programs which do not tier their logs
// do not depend on an S3 client.
//
// A Store implements log.RemoteStorage. Each copied segment is six objects
// under one key prefix per copy:
//
//	<Prefix><topic>-<partition>/<id>/log        the segment file
//	<Prefix><topic>-<partition>/<id>/index      the offset index
//	<Prefix><topic>-<partition>/<id>/timeindex  the time index
//	<Prefix><topic>-<partition>/<id>/txnindex   the transaction index
//	<Prefix><topic>-<partition>/<id>/snapshot   the producer snapshot
//	<Prefix><topic>-<partition>/<id>/epochs     the leader epoch slice
//
// The index files are written before the segment file, so that any copy
// that started uploading a segment is found by ListSegments, and
// DeleteSegment removes every object of a copy together with its
// unfinished multipart uploads.
package s3remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"

	plog "github.com/partlog/partlog/log"
)

// Defaults of the Config fields left zero.
const (
	// DefaultRequestTimeout is Config.RequestTimeout's default.
	DefaultRequestTimeout = 30 * time.Second
	// DefaultMaxRetries is Config.MaxRetries's default.
	DefaultMaxRetries = 3
	// DefaultPartSize is Config.PartSize's default.
	DefaultPartSize = 16 << 20
)

// Config says which bucket of which object store a Store uses and how long
// it waits for it.
type Config struct {
	// Endpoint is the store's host and port, such as
	// "s3.eu-west-1.amazonaws.com" or "127.0.0.1:8333".
	Endpoint string
	// Secure selects HTTPS instead of plain HTTP.
	Secure bool
	// Region is the bucket's region; "us-east-1" when empty.
	Region string
	// Bucket is the bucket holding the segments. It must exist
	// (CreateBucket creates it).
	Bucket string
	// Prefix is put before every object key, for instance "partlog/" to
	// share a bucket with other data. It may be empty.
	Prefix string
	// AccessKeyID and SecretAccessKey are the static credentials of
	// requests; both empty means anonymous requests.
	AccessKeyID     string
	SecretAccessKey string
	// RequestTimeout is the longest the Store waits for the store without
	// progress: for the answer to a request, for each read of a fetched
	// segment's bytes, and while a part of a copied segment is being
	// sent. A request that waits longer fails with an error wrapping
	// log.ErrRemoteUnavailable. DefaultRequestTimeout when zero.
	RequestTimeout time.Duration
	// MaxRetries is how many times a request that failed for a network
	// error or a server error is sent again (with a short backoff) before
	// the error is returned. DefaultMaxRetries when zero; negative means
	// no retry.
	MaxRetries int
	// PartSize is the size of the parts of a multipart upload; a segment
	// larger than PartSize is uploaded in parts, each held in memory while
	// it is sent. DefaultPartSize when zero; at least 5 MiB (S3's minimum).
	PartSize int64
	// Transport sends the HTTP requests; a transport like
	// http.DefaultTransport when nil.
	Transport http.RoundTripper
}

// Store is a log.RemoteStorage in an S3 bucket. It is safe for concurrent
// use.
type Store struct {
	client   *minio.Client
	bucket   string
	prefix   string
	timeout  time.Duration
	partSize uint64
}

var _ plog.RemoteStorage = (*Store)(nil)

// New returns a Store using the bucket cfg names. It sends no request.
func New(cfg Config) (*Store, error) {
	if cfg.Endpoint == "" {
		return nil, errors.New("s3remote: Config.Endpoint is empty")
	}
	if err := s3utils.CheckValidBucketName(cfg.Bucket); err != nil {
		return nil, fmt.Errorf("s3remote: Config.Bucket %q: %w", cfg.Bucket, err)
	}
	if cfg.RequestTimeout < 0 {
		return nil, fmt.Errorf("s3remote: Config.RequestTimeout %v is negative", cfg.RequestTimeout)
	}
	if cfg.PartSize != 0 && cfg.PartSize < 5<<20 {
		return nil, fmt.Errorf("s3remote: Config.PartSize %d is below S3's minimum of 5 MiB", cfg.PartSize)
	}
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	timeout := cfg.RequestTimeout
	if timeout == 0 {
		timeout = DefaultRequestTimeout
	}
	retries := cfg.MaxRetries
	switch {
	case retries == 0:
		retries = DefaultMaxRetries
	case retries < 0:
		retries = 0
	}
	partSize := cfg.PartSize
	if partSize == 0 {
		partSize = DefaultPartSize
	}
	var creds *credentials.Credentials
	if cfg.AccessKeyID != "" || cfg.SecretAccessKey != "" {
		creds = credentials.NewStaticV4(cfg.AccessKeyID, cfg.SecretAccessKey, "")
	} else {
		creds = credentials.New(&credentials.Static{Value: credentials.Value{SignerType: credentials.SignatureAnonymous}})
	}
	client, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:     creds,
		Secure:    cfg.Secure,
		Region:    region,
		Transport: cfg.Transport,
		// minio-go counts the first attempt among its retries.
		MaxRetries: retries + 1,
	})
	if err != nil {
		return nil, fmt.Errorf("s3remote: %w", err)
	}
	return &Store{
		client:   client,
		bucket:   cfg.Bucket,
		prefix:   cfg.Prefix,
		timeout:  timeout,
		partSize: uint64(partSize),
	}, nil
}

// CreateBucket creates the Store's bucket if it does not exist yet.
func (s *Store) CreateBucket(ctx context.Context) error {
	op := "creating bucket " + s.bucket
	err := s.withTimeout(ctx, func(ctx context.Context) error {
		return s.client.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{})
	})
	if err == nil {
		return nil
	}
	var resp minio.ErrorResponse
	if errors.As(err, &resp) && (resp.Code == "BucketAlreadyOwnedByYou" || resp.Code == "BucketAlreadyExists") {
		return nil
	}
	return s.mapErr(ctx, op, err)
}

// objectName returns the object name of each file of a copy: "log" for
// the segment (kind -1), Kafka's file extensions for the others.
func objectName(k plog.RemoteIndexKind) string {
	switch k {
	case plog.RemoteOffsetIndex:
		return "index"
	case plog.RemoteTimeIndex:
		return "timeindex"
	case plog.RemoteTxnIndex:
		return "txnindex"
	case plog.RemoteProducerSnapshot:
		return "snapshot"
	case plog.RemoteLeaderEpochIndex:
		return "epochs"
	}
	return ""
}

const segmentObject = "log"

func (s *Store) partitionPrefix(tp plog.TopicPartition) string {
	return s.prefix + tp.String() + "/"
}

func (s *Store) copyPrefix(id plog.RemoteSegmentID) string {
	return s.partitionPrefix(id.TopicPartition) + id.ID + "/"
}

func checkID(op string, id plog.RemoteSegmentID) error {
	if !id.Valid() {
		return fmt.Errorf("s3remote: %s %q: %w", op, id.String(), plog.ErrRemoteInvalidID)
	}
	return nil
}

// CopySegment uploads the segment and its files under md.ID: the five
// index files first, then the segment, streamed from data.Segment (a
// segment larger than Config.PartSize goes in parts).
func (s *Store) CopySegment(ctx context.Context, md plog.RemoteSegmentMetadata, data plog.RemoteSegmentData) error {
	op := "copying segment " + md.ID.String()
	if err := checkID("copying segment", md.ID); err != nil {
		return err
	}
	if md.Size < 0 {
		return fmt.Errorf("s3remote: %s: negative size %d", op, md.Size)
	}
	if data.Segment == nil {
		return fmt.Errorf("s3remote: %s: no segment reader", op)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("s3remote: %s: %w", op, err)
	}
	prefix := s.copyPrefix(md.ID)
	errs := make([]error, len(plog.RemoteIndexKinds))
	var wg sync.WaitGroup
	for i, k := range plog.RemoteIndexKinds {
		wg.Go(func() {
			b := data.Index(k)
			errs[i] = s.put(ctx, op+" ("+objectName(k)+")", prefix+objectName(k), bytes.NewReader(b), int64(len(b)))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	src := &exactReader{r: data.Segment, left: md.Size}
	if err := s.put(ctx, op, prefix+segmentObject, src, md.Size); err != nil {
		if src.err != nil {
			return fmt.Errorf("s3remote: %s: %w", op, src.err)
		}
		return err
	}
	if src.left != 0 {
		return fmt.Errorf("s3remote: %s: %w", op, errShortSegment)
	}
	// The segment reader must end where md.Size says.
	var one [1]byte
	if n, _ := io.ReadFull(data.Segment, one[:]); n != 0 {
		return fmt.Errorf("s3remote: %s: the segment reader holds more than the %d bytes of RemoteSegmentMetadata.Size", op, md.Size)
	}
	return nil
}

var errShortSegment = errors.New("the segment reader ended before RemoteSegmentMetadata.Size bytes")

// exactReader hands out the first left bytes of r and fails if r ends
// before them, so that a short segment is never stored as a complete one.
type exactReader struct {
	r    io.Reader
	left int64
	err  error // the error r returned, other than io.EOF
}

func (r *exactReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.r.Read(p)
	r.left -= int64(n)
	switch {
	case err == io.EOF && r.left > 0:
		r.err = errShortSegment
		return n, r.err
	case err == io.EOF:
		return n, nil
	case err != nil:
		r.err = err
	}
	return n, err
}

// put uploads size bytes of r to key. The request is canceled when
// neither r is read nor a part's bytes are sent (the store does not take
// the bytes) for the request timeout. A *bytes.Reader (an index file) goes
// to minio-go as it is: minio-go sends a body it can seek again after a
// network or server error (Config.MaxRetries), and sends any other body
// once.
func (s *Store) put(ctx context.Context, op, key string, r io.Reader, size int64) error {
	reqCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w := newWatchdog(s.timeout, cancel)
	defer w.stop()
	body := r
	if _, ok := r.(*bytes.Reader); !ok {
		body = &progressReader{r: r, w: w}
	}
	_, err := s.client.PutObject(reqCtx, s.bucket, key, body, size, minio.PutObjectOptions{
		PartSize:    s.partSize,
		ContentType: "application/octet-stream",
		// A part is read from r into a buffer whole, then sent from the
		// buffer: minio-go reports the buffer's bytes here as the HTTP
		// client reads them, so a part sent for longer than the timeout
		// is not canceled while its bytes go out.
		Progress: sendProgress{w},
	})
	if err != nil {
		return s.mapErr(ctx, op, withStall(reqCtx, err))
	}
	return nil
}

// progressReader resets its watchdog on every read: the HTTP client reads
// it as fast as the store takes the bytes.
type progressReader struct {
	r io.Reader
	w *watchdog
}

func (r *progressReader) Read(p []byte) (int, error) {
	r.w.reset()
	n, err := r.r.Read(p)
	r.w.reset()
	return n, err
}

// sendProgress resets its watchdog each time minio-go reports bytes of
// the request body read by the HTTP client (PutObjectOptions.Progress).
type sendProgress struct{ w *watchdog }

func (p sendProgress) Read(b []byte) (int, error) {
	p.w.reset()
	return len(b), nil
}

// FetchSegment returns the bytes [start, end) of the segment copied under
// id with one ranged GET (and a HEAD for empty ranges and ranges that end
// at the segment's end).
func (s *Store) FetchSegment(ctx context.Context, id plog.RemoteSegmentID, start, end int64) (io.ReadCloser, error) {
	op := fmt.Sprintf("fetching segment %s [%d, %d)", id, start, end)
	if err := checkID("fetching segment", id); err != nil {
		return nil, err
	}
	if start < 0 || (end >= 0 && end < start) {
		return nil, fmt.Errorf("s3remote: %s: %w", op, plog.ErrRemoteInvalidRange)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("s3remote: %s: %w", op, err)
	}
	key := s.copyPrefix(id) + segmentObject
	if start == end {
		// S3 ranges cannot be empty: only check the range.
		size, err := s.size(ctx, op, key)
		if err != nil {
			return nil, err
		}
		if start > size {
			return nil, fmt.Errorf("s3remote: %s: the segment has %d bytes: %w", op, size, plog.ErrRemoteInvalidRange)
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	var rng string
	switch {
	case end >= 0:
		rng = fmt.Sprintf("bytes=%d-%d", start, end-1)
	case start > 0:
		rng = fmt.Sprintf("bytes=%d-", start)
	}
	body, total, err := s.get(ctx, op, key, rng)
	var resp minio.ErrorResponse
	if errors.As(err, &resp) && (resp.StatusCode == http.StatusRequestedRangeNotSatisfiable || resp.Code == "InvalidRange") {
		// The range starts at or past the end: valid only for an empty
		// range at the end, read to the end.
		size, serr := s.size(ctx, op, key)
		if serr != nil {
			return nil, serr
		}
		if end < 0 && start == size {
			return io.NopCloser(strings.NewReader("")), nil
		}
		return nil, fmt.Errorf("s3remote: %s: the segment has %d bytes: %w", op, size, plog.ErrRemoteInvalidRange)
	}
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	if end > total {
		_ = body.Close()
		return nil, fmt.Errorf("s3remote: %s: the segment has %d bytes: %w", op, total, plog.ErrRemoteInvalidRange)
	}
	if end < 0 {
		end = total
	}
	body.left = end - start
	return body, nil
}

// FetchIndex returns the file of kind k copied with the segment under id.
func (s *Store) FetchIndex(ctx context.Context, id plog.RemoteSegmentID, k plog.RemoteIndexKind) (io.ReadCloser, error) {
	op := fmt.Sprintf("fetching %s index of segment %s", k, id)
	if err := checkID("fetching index", id); err != nil {
		return nil, err
	}
	name := objectName(k)
	if name == "" {
		return nil, fmt.Errorf("s3remote: %s: unknown index kind", op)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("s3remote: %s: %w", op, err)
	}
	body, total, err := s.get(ctx, op, s.copyPrefix(id)+name, "")
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	body.left = total
	return body, nil
}

// get sends a GET of key with the Range header rng (none when empty) and
// returns the body with the object's total size (-1 for a whole object
// whose answer has no Content-Length). The body's left is unset: the
// caller sets how many bytes it hands out.
func (s *Store) get(ctx context.Context, op, key, rng string) (*fetchReader, int64, error) {
	reqCtx, cancel := context.WithCancelCause(ctx)
	w := newWatchdog(s.timeout, cancel)
	opts := minio.GetObjectOptions{}
	if rng != "" {
		opts.Set("Range", rng)
	}
	core := minio.Core{Client: s.client}
	body, info, header, err := core.GetObject(reqCtx, s.bucket, key, opts)
	w.stop()
	if err != nil {
		w.stop()
		err = withStall(reqCtx, err)
		cancel(nil)
		return nil, 0, err
	}
	total := info.Size
	if cr := header.Get("Content-Range"); cr != "" {
		// "bytes <first>-<last>/<total>"
		i := strings.LastIndexByte(cr, '/')
		t, perr := strconv.ParseInt(cr[i+1:], 10, 64)
		if i < 0 || perr != nil {
			w.stop()
			cancel(nil)
			_ = body.Close()
			return nil, 0, fmt.Errorf("s3remote: %s: unexpected Content-Range %q", op, cr)
		}
		total = t
	} else if rng != "" {
		w.stop()
		cancel(nil)
		_ = body.Close()
		return nil, 0, fmt.Errorf("s3remote: %s: the store ignored the Range header %q", op, rng)
	}
	return &fetchReader{s: s, op: op, ctx: ctx, reqCtx: reqCtx, body: body, w: w, cancel: cancel}, total, nil
}

// size returns the size of the object key (a HEAD request).
func (s *Store) size(ctx context.Context, op, key string) (int64, error) {
	var size int64
	err := s.withTimeout(ctx, func(ctx context.Context) error {
		info, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
		size = info.Size
		return err
	})
	if err != nil {
		return 0, s.mapErr(ctx, op, err)
	}
	return size, nil
}

// fetchReader hands out left bytes of a GET's body, or the whole body
// when left is negative (a whole object whose answer had no
// Content-Length: a chunked one). Each read must make progress within the
// request timeout.
type fetchReader struct {
	s      *Store
	op     string
	ctx    context.Context // the caller's
	reqCtx context.Context // the request's, canceled by w
	body   io.ReadCloser
	left   int64
	w      *watchdog
	cancel context.CancelCauseFunc
	closed bool
}

func (r *fetchReader) Read(p []byte) (int, error) {
	if r.closed {
		return 0, fmt.Errorf("s3remote: %s: read after Close", r.op)
	}
	if r.left == 0 {
		return 0, io.EOF
	}
	if r.left > 0 && int64(len(p)) > r.left {
		p = p[:r.left]
	}
	r.w.reset()
	n, err := r.body.Read(p)
	r.w.stop()
	if r.left > 0 {
		r.left -= int64(n)
	}
	switch {
	case err == io.EOF && r.left > 0:
		return n, r.s.mapErr(r.ctx, r.op, fmt.Errorf("%w: the store sent %d bytes fewer than asked", io.ErrUnexpectedEOF, r.left))
	case err == io.EOF:
		r.left = 0
		return n, nil
	case err != nil:
		return n, r.s.mapErr(r.ctx, r.op, withStall(r.reqCtx, err))
	}
	return n, nil
}

func (r *fetchReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.w.stop()
	err := r.body.Close()
	r.cancel(nil)
	return err
}

// DeleteSegment removes every object of the copy under id and aborts the
// unfinished multipart upload of its segment, if any.
func (s *Store) DeleteSegment(ctx context.Context, id plog.RemoteSegmentID) error {
	op := "deleting segment " + id.String()
	if err := checkID("deleting segment", id); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("s3remote: %s: %w", op, err)
	}
	prefix := s.copyPrefix(id)
	names := []string{segmentObject}
	for _, k := range plog.RemoteIndexKinds {
		names = append(names, objectName(k))
	}
	err := s.withTimeout(ctx, func(ctx context.Context) error {
		if err := s.client.RemoveIncompleteUpload(ctx, s.bucket, prefix+segmentObject); err != nil {
			return err
		}
		objs := make(chan minio.ObjectInfo, len(names))
		for _, n := range names {
			objs <- minio.ObjectInfo{Key: prefix + n}
		}
		close(objs)
		var errs []error
		for rerr := range s.client.RemoveObjects(ctx, s.bucket, objs, minio.RemoveObjectsOptions{}) {
			var resp minio.ErrorResponse
			if errors.As(rerr.Err, &resp) && resp.Code == "NoSuchKey" {
				continue
			}
			errs = append(errs, fmt.Errorf("%s: %w", rerr.ObjectName, rerr.Err))
		}
		return errors.Join(errs...)
	})
	if err != nil {
		return s.mapErr(ctx, op, err)
	}
	return nil
}

// ListSegments lists the copies of tp's segments the bucket holds objects
// of. It lists every object (one LIST request per 1000 objects, about 166
// copies): some stores (SeaweedFS) keep listing a key prefix as a folder
// after its objects are deleted.
func (s *Store) ListSegments(ctx context.Context, tp plog.TopicPartition) ([]plog.RemoteSegmentID, error) {
	op := "listing segments of " + tp.String()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("s3remote: %s: %w", op, err)
	}
	prefix := s.partitionPrefix(tp)
	var ids []plog.RemoteSegmentID
	err := s.withTimeout(ctx, func(ctx context.Context) error {
		ids = ids[:0]
		seen := map[string]bool{}
		for obj := range s.client.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
			if obj.Err != nil {
				return obj.Err
			}
			name, _, ok := strings.Cut(strings.TrimPrefix(obj.Key, prefix), "/")
			if !ok || seen[name] {
				continue // not a copy's object, or a copy already listed
			}
			id := plog.RemoteSegmentID{TopicPartition: tp, ID: name}
			if id.Valid() {
				seen[name] = true
				ids = append(ids, id)
			}
		}
		return nil
	})
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	return ids, nil
}

// withTimeout runs f with ctx bounded by the request timeout.
func (s *Store) withTimeout(ctx context.Context, f func(ctx context.Context) error) error {
	reqCtx, cancel := context.WithTimeoutCause(ctx, s.timeout, errStalled{s.timeout})
	defer cancel()
	return withStall(reqCtx, f(reqCtx))
}

// withStall returns err joined with errStalled if reqCtx was canceled for
// lack of progress.
func withStall(reqCtx context.Context, err error) error {
	var stalled errStalled
	if err != nil && errors.As(context.Cause(reqCtx), &stalled) {
		return errors.Join(err, stalled)
	}
	return err
}
