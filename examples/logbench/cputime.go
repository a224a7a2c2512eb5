package main

import (
	"runtime"
	"time"
)

// On a shared machine the wall time of a loop also counts the time its
// thread waited for a core. The append measurements therefore also take
// the CPU time (user + system) of the thread that runs the loop, which
// other processes do not inflate: the loop is pinned to its OS thread
// (runtime.LockOSThread) and the thread's CPU time is read before and
// after it (threadCPU: getrusage RUSAGE_THREAD on Linux; elsewhere the
// process's CPU time, which also counts the runtime's other threads).

// cost is what one run of a measured loop took.
type cost struct {
	wall time.Duration // elapsed time
	cpu  time.Duration // CPU time of the loop's thread
}

// clock is a started measurement of a loop; the loop's goroutine stays on
// its OS thread until stop.
type clock struct {
	wall time.Time
	cpu  time.Duration
}

// startClock pins the calling goroutine to its thread and starts the
// clocks.
func startClock() clock {
	runtime.LockOSThread()
	return clock{cpu: threadCPU(), wall: time.Now()}
}

// stop returns what the loop cost since startClock and unpins the
// goroutine.
func (c clock) stop() cost {
	wall := time.Since(c.wall)
	cpu := threadCPU() - c.cpu
	runtime.UnlockOSThread()
	return cost{wall: wall, cpu: cpu}
}

// bestPair runs base and cand in turn, reps times each (base first, so
// that neither gets all the quiet moments), and returns the smallest wall
// time and the smallest CPU time each of them had.
func (b *bench) bestPair(base, cand func() (cost, error)) (bb, cb cost, err error) {
	keep := func(best *cost, c cost, first bool) {
		if first || c.wall < best.wall {
			best.wall = c.wall
		}
		if first || c.cpu < best.cpu {
			best.cpu = c.cpu
		}
	}
	for i := 0; i < b.reps; i++ {
		c, err := base()
		if err != nil {
			return bb, cb, err
		}
		keep(&bb, c, i == 0)
		if c, err = cand(); err != nil {
			return bb, cb, err
		}
		keep(&cb, c, i == 0)
	}
	return bb, cb, nil
}

// ratio returns base ÷ cand, or 0 when cand took no measurable time.
func ratio(base, cand time.Duration) float64 {
	if cand <= 0 {
		return 0
	}
	return base.Seconds() / cand.Seconds()
}
