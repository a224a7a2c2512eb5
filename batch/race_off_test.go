//go:build !race

package batch

// raceEnabled is true under -race, where sync.Pool drops items at random
// and allocation counts mean nothing.
const raceEnabled = false
