//go:build !linux

package batch

// threadCPUNanos is 0 where the thread's CPU time is not read.
func threadCPUNanos() int64 { return 0 }
