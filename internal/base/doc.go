// Package base holds the error vocabulary the layers above package batch
// share (index, segment, log, compaction and their internal machinery):
// the one corruption marker of the module ([ErrCorrupt]), the typed error
// that says where the damage is ([CorruptionError], which is
// batch.CorruptionError, so that a caller reaches every corruption error
// of the module with errors.As and that one type), the torn-tail marker
// that recovery treats as normal after a crash ([ErrTornTail]), and
// assertion errors for bugs ([AssertionFailedf]).
//
// The markers are declared in internal/corrupt, below package batch, and
// the assertions in internal/invariants: the values here are those, under
// the names the layers above batch use.
//
// Corruption and torn tails are different things. A short or zeroed tail on
// the active segment is what a crash leaves behind and recovery cuts it off;
// a bad CRC in the middle of a sealed segment is corruption and is reported.
//
// Example:
//
//	err := base.CorruptionErrorf("00000000000000000000.log", 4096, "crc",
//		"stored %#x, computed %#x", stored, computed)
//	errors.Is(err, base.ErrCorrupt) // true
//
// Everything here is safe for concurrent use.
package base
