package batch

import (
	"runtime"
	"testing"
)

// cpuPerOp pins the benchmark's goroutine to its thread and returns the
// function that reports, once the loop is done, the thread's CPU time per
// iteration as cpu-ns/op (Linux): on a shared machine it is much steadier
// than ns/op, which also counts the time other processes held the core.
// Call it right before the loop, and the returned function right after.
func cpuPerOp(b *testing.B) func() {
	runtime.LockOSThread()
	c0 := threadCPUNanos()
	return func() {
		c1 := threadCPUNanos()
		runtime.UnlockOSThread()
		if c0 > 0 && c1 > c0 && b.N > 0 {
			b.ReportMetric(float64(c1-c0)/float64(b.N), "cpu-ns/op")
		}
	}
}
