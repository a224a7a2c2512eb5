package crc32c

import (
	"math/bits"

	"github.com/klauspost/crc32"
)

// Table is the CRC-32C table, shared by every checksum in the module.
var Table = crc32.MakeTable(crc32.Castagnoli)

// castagnoli is Table under the name the folding code's comments use.
var castagnoli = Table

// Update is crc32.Update(crc, Table, p).
func Update(crc uint32, p []byte) uint32 {
	if useFold && len(p) >= foldMinLen {
		n := len(p) &^ 63
		s := foldCRC(^crc, p[:n], &foldConsts)
		return crc32.Update(^s, castagnoli, p[n:])
	}
	return crc32.Update(crc, castagnoli, p)
}

// foldMinLen is the shortest input folded: below it the setup and the
// final reduction cost more than the CRC32 instruction loop. foldCRC
// itself needs at least 256 bytes.
const foldMinLen = 512

// castagnoliPoly is CRC-32C's generator without its x^32 term, in the
// normal (not reflected) bit order: bit i is the coefficient of x^i.
const castagnoliPoly = 0x1EDC6F41

// xPowMod returns x^n mod P (P the CRC-32C generator) in the normal bit
// order.
func xPowMod(n int) uint32 {
	r := uint64(1)
	for range n {
		r <<= 1
		if r&(1<<32) != 0 {
			r ^= 1<<32 | castagnoliPoly
		}
	}
	return uint32(r)
}

// foldPair returns the two constants that move a 16-byte block of the
// reflected CRC d bytes further along the message. The block is the
// polynomial H·x^64 + L, H its first 8 bytes (the higher degrees, bit j
// of the little-endian qword the coefficient of x^(63-j)) and L its last
// 8; moving it d bytes on multiplies it by x^(8d), so H is multiplied by
// x^(8d+64) mod P and L by x^(8d) mod P. A carry-less multiply of two
// bit-reflected qwords yields the reflected product one bit short of the
// 128-bit block's order (its bit k is the coefficient of x^(126-k)), so
// each exponent is one less; the constants are stored reflected, as the
// data is.
func foldPair(d int) [2]uint64 {
	return [2]uint64{
		bits.Reverse64(uint64(xPowMod(8*d + 63))),
		bits.Reverse64(uint64(xPowMod(8*d - 1))),
	}
}

// foldConsts holds, for foldCRC, the pairs for 256 bytes (the loop over
// four 64-byte accumulators), 64 (folding the accumulators into one and
// the 64-byte loop), then 48, 32 and 16 (folding the four 16-byte lanes of
// the last accumulator into one).
var foldConsts = func() (k [10]uint64) {
	for i, d := range []int{256, 64, 48, 32, 16} {
		p := foldPair(d)
		k[2*i], k[2*i+1] = p[0], p[1]
	}
	return k
}()

// UpdateSmall is Update for a few bytes (a batch header's 40 checksummed
// bytes), written so that p does not escape (a header copy on the
// caller's stack stays there): the CRC32 instruction 8 bytes at a time
// where the CPU has it (five instructions for a header, against 40 table
// lookups), else one table lookup a byte, the reflected CRC-32C with the
// same pre- and post-inversion.
func UpdateSmall(crc uint32, p []byte) uint32 {
	if useSSE42 {
		return updateSSE42(crc, p)
	}
	crc = ^crc
	for _, v := range p {
		crc = Table[byte(crc)^v] ^ crc>>8
	}
	return ^crc
}
