package segment

import (
	"sync"

	"github.com/partlog/partlog/internal/base"
)

// Tracker counts the segments of one owner that are not released yet: a
// segment created or opened with a Config whose Tracker it is counts from
// the moment Create, CreateWithSuffix, CreateSpare, Open or OpenClean
// returns it until the Unref that drops its last reference has closed its
// files (and, after MarkDeleted, removed them). An owner that shares its
// segments with readers learns from it when the last reader let go of the
// last of its files, e.g. to keep its directory locked until then (package
// log does, after Close). The zero value is ready to use; a nil *Tracker
// counts nothing.
type Tracker struct {
	mu sync.Mutex
	// liveCount is the number of segments counted.
	liveCount int
	// onIdle is what WhenIdle registered, run when liveCount drops to 0.
	onIdle func()
}

// addSegment counts a segment Create or Open is about to return.
func (t *Tracker) addSegment() {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.liveCount++
	t.mu.Unlock()
}

// segmentReleased uncounts a released segment and runs the registered function when
// it was the last.
func (t *Tracker) segmentReleased() {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.liveCount--
	if t.liveCount < 0 {
		t.mu.Unlock()
		panic(base.AssertionFailedf("partlog/segment: Tracker released more segments than it counted"))
	}
	var fn func()
	if t.liveCount == 0 {
		fn, t.onIdle = t.onIdle, nil
	}
	t.mu.Unlock()
	if fn != nil {
		fn()
	}
}

// Live returns the number of segments counted now.
func (t *Tracker) Live() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.liveCount
}

// WhenIdle arranges for fn to run once no segment is counted, and reports
// whether it had to wait: when none is counted now it returns false and
// never runs fn (the caller goes on at once); otherwise fn runs once, in
// the goroutine of the Unref that releases the last segment counted, after
// that segment's files are closed. A later call replaces fn. The owner
// calls it when it creates and opens no more segments with the tracker (a
// segment counted after fn ran would not run it again).
func (t *Tracker) WhenIdle(fn func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.liveCount == 0 {
		return false
	}
	t.onIdle = fn
	return true
}
