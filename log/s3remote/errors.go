package s3remote

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/minio/minio-go/v7"

	plog "github.com/partlog/partlog/log"
)

// errStalled is the cause of a request the Store canceled because the
// store made no progress for the request timeout.
type errStalled struct{ d time.Duration }

func (e errStalled) Error() string {
	return fmt.Sprintf("no progress from the object store within %v", e.d)
}

// mapErr returns err, from the operation op, wrapping the log's sentinel
// that says what the caller can do about it:
//   - ctx's own error when the caller canceled the operation;
//   - log.ErrRemoteSegmentNotFound for a missing object;
//   - log.ErrRemoteUnavailable when the store did not answer (network
//     errors, a stalled transfer) or answered with an error that may go
//     away (5xx, 429 and 408 statuses, SlowDown);
//   - no sentinel for the store's other refusals (denied access, a
//     missing bucket), which a retry does not cure.
func (s *Store) mapErr(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("s3remote: %s: %w (%v)", op, cerr, err)
	}
	var stalled errStalled
	if errors.As(err, &stalled) {
		// err also wraps the canceled request's context.Canceled, which
		// the caller did not ask for: keep it out of the chain.
		return fmt.Errorf("s3remote: %s: %w: %v", op, plog.ErrRemoteUnavailable, err)
	}
	var resp minio.ErrorResponse
	if errors.As(err, &resp) && (resp.StatusCode != 0 || resp.Code != "") {
		switch {
		case resp.Code == "NoSuchKey" || resp.Code == "NoSuchUpload":
			return fmt.Errorf("s3remote: %s: %w: %w", op, plog.ErrRemoteSegmentNotFound, err)
		case retryable(resp):
			return fmt.Errorf("s3remote: %s: %w: %w", op, plog.ErrRemoteUnavailable, err)
		}
		return fmt.Errorf("s3remote: %s: %w", op, err)
	}
	// No answer from the store: a refused or broken connection, a name
	// that does not resolve, a response cut short.
	return fmt.Errorf("s3remote: %s: %w: %w", op, plog.ErrRemoteUnavailable, err)
}

// retryable reports whether the store's error answer may go away.
func retryable(resp minio.ErrorResponse) bool {
	switch resp.StatusCode {
	case http.StatusRequestTimeout, http.StatusTooManyRequests:
		return true
	}
	if resp.StatusCode >= 500 {
		return true
	}
	switch resp.Code {
	case "SlowDown", "RequestTimeout", "ServiceUnavailable", "InternalError":
		return true
	}
	return false
}

// watchdog cancels a request, with errStalled as the cause, when it is
// left running for d after its last reset.
type watchdog struct {
	d time.Duration
	t *time.Timer
}

func newWatchdog(d time.Duration, cancel context.CancelCauseFunc) *watchdog {
	return &watchdog{d: d, t: time.AfterFunc(d, func() { cancel(errStalled{d}) })}
}

// reset starts the watchdog's d anew.
func (w *watchdog) reset() { w.t.Reset(w.d) }

// stop stops the watchdog until the next reset.
func (w *watchdog) stop() { w.t.Stop() }
