// Package invariants tells whether the module was built with the
// invariants build tag (go test -tags invariants ./...), and reports broken
// invariants (AssertionFailedf). Under that tag assertion failures panic
// instead of returning errors, and lifetime checks (double close, use
// after release) are active.
//
// Example:
//
//	if invariants.Enabled && pos%entrySize != 0 {
//		panic(base.AssertionFailedf("index: position %d not aligned", pos))
//	}
package invariants
