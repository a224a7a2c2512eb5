//go:build !linux

package main

import "time"

// threadCPU is not measured outside Linux (no RUSAGE_THREAD): it returns
// 0, and the CPU figures are left out.
func threadCPU() time.Duration { return 0 }
