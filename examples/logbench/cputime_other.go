//go:build !linux

package main

import "time"

// threadCPU is not measured outside Linux (no RUSAGE_THREAD): it returns
// 0, and the CPU figures are left out.
func threadCPU() time.Duration { return 0 }

// processUsage is not measured outside Linux: it returns zeros, and the
// CPU and page-fault figures that need it are left out.
func processUsage() (cpu time.Duration, faults int64) { return 0, 0 }
