//go:build linux

package log_test

import "golang.org/x/sys/unix"

// threadCPUNanos returns the CPU time the calling thread has used so far,
// or 0 when it cannot be read.
func threadCPUNanos() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return ts.Nano()
}
