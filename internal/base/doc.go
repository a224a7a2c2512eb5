// Package base holds the vocabulary every layer of partlog shares: the one
// corruption marker of the module ([ErrCorrupt]) and the typed error that
// says where the damage is ([CorruptionError]), the torn-tail marker that
// recovery treats as normal after a crash ([ErrTornTail]), and assertion
// errors for bugs ([AssertionFailedf]).
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
