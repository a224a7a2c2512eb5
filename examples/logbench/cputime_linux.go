//go:build linux

package main

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU returns the CPU time (user + system) the calling thread has
// used so far.
func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processUsage returns the CPU time (user + system) of the whole process
// so far, every thread and the runtime's included, and its page faults
// (minor and major).
func processUsage() (cpu time.Duration, faults int64) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Minflt + ru.Majflt
}
