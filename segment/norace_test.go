//go:build !race

package segment

// raceEnabled is false without the race detector.
const raceEnabled = false
