//go:build !invariants

package invariants

// Enabled is true when the module is built with -tags invariants. Code
// guarded by it runs extra consistency checks that are too slow, or too
// strict, for release builds.
const Enabled = false
