//go:build race

package segment

// raceEnabled shrinks the randomized tests under the race detector, which
// slows them tenfold; the plain run covers the full sizes.
const raceEnabled = true
