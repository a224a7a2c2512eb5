package main

import (
	"runtime"
	"slices"
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

// pairRounds is what rounds of a baseline and a candidate taking turns
// gave: each one's least wall and least CPU time, and the ratios base ÷
// cand of each round (the two runs of a round saw the same machine).
type pairRounds struct {
	base, cand cost
	wall, cpu  []float64 // base ÷ cand per round; cpu empty where threadCPU reads nothing
}

// medianWall returns the median of the rounds' wall-time ratios.
func (r pairRounds) medianWall() float64 { return median(r.wall) }

// medianCPU returns the median of the rounds' CPU-time ratios, 0 where
// the thread's CPU time cannot be read.
func (r pairRounds) medianCPU() float64 { return median(r.cpu) }

// rounds runs base and cand in turn, reps times each (base first, so
// that neither gets all the quiet moments).
func (b *bench) rounds(base, cand func() (cost, error)) (pairRounds, error) {
	var r pairRounds
	keep := func(best *cost, c cost, first bool) {
		if first || c.wall < best.wall {
			best.wall = c.wall
		}
		if first || c.cpu < best.cpu {
			best.cpu = c.cpu
		}
	}
	for i := 0; i < b.reps; i++ {
		bc, err := base()
		if err != nil {
			return r, err
		}
		keep(&r.base, bc, i == 0)
		cc, err := cand()
		if err != nil {
			return r, err
		}
		keep(&r.cand, cc, i == 0)
		r.wall = append(r.wall, ratio(bc.wall, cc.wall))
		if bc.cpu > 0 && cc.cpu > 0 {
			r.cpu = append(r.cpu, ratio(bc.cpu, cc.cpu))
		}
	}
	return r, nil
}

// bestPair runs base and cand in turn, reps times each, and returns the
// smallest wall time and the smallest CPU time each of them had.
func (b *bench) bestPair(base, cand func() (cost, error)) (bb, cb cost, err error) {
	r, err := b.rounds(base, cand)
	return r.base, r.cand, err
}

// median returns the median of xs (the mean of the middle two for an
// even count), or 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// timed returns f as a measured loop: its wall time and the CPU time of
// its thread, pinned for the run.
func timed(f func() (time.Duration, error)) func() (cost, error) {
	return func() (cost, error) {
		c := startClock()
		_, err := f()
		return c.stop(), err
	}
}

// ratio returns base ÷ cand, or 0 when cand took no measurable time.
func ratio(base, cand time.Duration) float64 {
	if cand <= 0 {
		return 0
	}
	return base.Seconds() / cand.Seconds()
}
