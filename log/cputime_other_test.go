//go:build !linux

package log_test

// threadCPUNanos is 0 where the thread's CPU time is not read.
func threadCPUNanos() int64 { return 0 }
