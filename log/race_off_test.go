//go:build !race

package log_test

// raceEnabled reports a -race build: the longest randomized tests run
// fewer rounds there (the race detector slows them about tenfold).
const raceEnabled = false
