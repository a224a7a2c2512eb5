package invariants

import (
	"errors"
	"fmt"
)

// ErrAssertionFailed marks a broken internal invariant: a bug in partlog,
// never bad input.
var ErrAssertionFailed = errors.New("partlog: assertion failed")

// AssertionFailedf returns an error that wraps ErrAssertionFailed. Under
// the invariants build tag (Enabled) it panics instead, so that tests stop
// at the bug.
func AssertionFailedf(format string, args ...any) error {
	err := fmt.Errorf("%w: %s", ErrAssertionFailed, fmt.Sprintf(format, args...))
	if Enabled {
		panic(err)
	}
	return err
}
