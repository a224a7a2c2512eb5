package legacy

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/partlog/partlog/internal/corrupt"
)

// The LZ4 frame header of a magic 0 wrapper (KAFKA-3160). An LZ4 frame
// starts with the magic number 0x184D2204 (little-endian), the frame
// descriptor (FLG, BD, an 8-byte content size when FLG bit 3 is set, a
// 4-byte dictionary id when FLG bit 0 is set) and the header checksum HC:
// the second byte of the XXH32 (seed 0) of the descriptor. Kafka before
// 0.10 computed HC over the magic number and the descriptor instead, and
// Kafka keeps that for magic 0: its writer puts the broken HC in magic 0
// wrappers and its reader ignores HC in them. Magic 1 wrappers carry the
// HC of the frame format.
const (
	lz4FrameMagic  = 0x184D2204
	lz4MagicSize   = 4
	lz4FlagSize    = 1 << 3 // FLG bit 3: an 8-byte content size follows BD
	lz4FlagDictID  = 1 << 0 // FLG bit 0: a 4-byte dictionary id follows
	lz4MinHeader   = lz4MagicSize + 2 + 1
	lz4ContentSize = 8
	lz4DictIDSize  = 4

	lz4FlagVersion       = 0xc0   // FLG bits 7-6: the format version, 01
	lz4FlagIndependent   = 1 << 5 // FLG bit 5: blocks are independent
	lz4FlagBlockChecksum = 1 << 4 // FLG bit 4: each block has a checksum
	lz4FlagChecksum      = 1 << 2 // FLG bit 2: a content checksum ends the frame
	lz4FlagReserved      = 1 << 1 // FLG bit 1: reserved, 0
	lz4BlockUncompressed = 1 << 31
)

// LZ4FrameEnd returns the length of the LZ4 frame at the start of b: the
// part of a compressed payload Kafka's reader (Lz4BlockInputStream) reads.
// That reader reads one frame and stops at its end mark, whatever follows,
// and refuses a frame whose descriptor has a version other than 01, blocks
// that are not independent, or a reserved bit set (it counts the
// dictionary id bit among them). A frame that breaks one of those rules,
// does not parse or ends early is an error saying why, for the caller to
// report as damage of its own field. The header checksum is not checked
// here. (A decoder that checks the content checksum and content size,
// which Kafka's reader skips, refuses a little more than Kafka does: only
// damaged frames, as Kafka's writer sets neither field.)
func LZ4FrameEnd(b []byte) (int, error) {
	hc, err := lz4HeaderEnd(b)
	if err != nil {
		return 0, err
	}
	switch flg := b[lz4MagicSize]; {
	case flg&lz4FlagVersion != 0x40:
		return 0, fmt.Errorf("LZ4 frame version %d, want 1", flg>>6)
	case flg&lz4FlagIndependent == 0:
		return 0, fmt.Errorf("LZ4 frame of dependent blocks, which Kafka does not read")
	case flg&(lz4FlagReserved|lz4FlagDictID) != 0:
		return 0, fmt.Errorf("LZ4 frame descriptor %#02x sets a bit Kafka reserves", flg)
	}
	flg := b[lz4MagicSize]
	pos := hc + 1
	for {
		if len(b)-pos < 4 {
			return 0, fmt.Errorf("LZ4 frame ends before its end mark")
		}
		size := binary.LittleEndian.Uint32(b[pos:])
		pos += 4
		if size == 0 {
			break
		}
		if size == lz4BlockUncompressed {
			// Kafka clears the uncompressed bit before it looks for the
			// end mark, so this word ends the frame for Kafka and is an
			// empty block for the decoder. No writer emits it.
			return 0, fmt.Errorf("LZ4 block size word %#08x, an end mark to Kafka only", size)
		}
		n := int64(size &^ lz4BlockUncompressed)
		if flg&lz4FlagBlockChecksum != 0 {
			n += 4
		}
		if n > int64(len(b)-pos) {
			return 0, fmt.Errorf("LZ4 block of %d bytes, %d left", n, len(b)-pos)
		}
		pos += int(n)
	}
	if flg&lz4FlagChecksum != 0 {
		if len(b)-pos < 4 {
			return 0, fmt.Errorf("LZ4 frame ends before its content checksum")
		}
		pos += 4
	}
	return pos, nil
}

// lz4HeaderChecksumAt returns the position of the HC byte of the LZ4 frame
// at the start of frame; an error wraps corrupt.ErrCorrupt.
func lz4HeaderChecksumAt(frame []byte) (int, error) {
	at, err := lz4HeaderEnd(frame)
	if err != nil {
		return 0, corrupt.Errorf(0, "value", "%v", err)
	}
	return at, nil
}

// lz4HeaderEnd returns the position of the HC byte of the LZ4 frame at the
// start of frame, or an error saying why the header does not parse.
func lz4HeaderEnd(frame []byte) (int, error) {
	if len(frame) < lz4MinHeader {
		return 0, fmt.Errorf("LZ4 frame of %d bytes, its header needs %d", len(frame), lz4MinHeader)
	}
	if m := binary.LittleEndian.Uint32(frame); m != lz4FrameMagic {
		return 0, fmt.Errorf("LZ4 frame magic %#08x, want %#08x", m, lz4FrameMagic)
	}
	at := lz4MagicSize + 2
	flg := frame[lz4MagicSize]
	if flg&lz4FlagSize != 0 {
		at += lz4ContentSize
	}
	if flg&lz4FlagDictID != 0 {
		at += lz4DictIDSize
	}
	if at >= len(frame) {
		return 0, fmt.Errorf("LZ4 frame of %d bytes, its header needs %d", len(frame), at+1)
	}
	return at, nil
}

// SetLZ4HeaderChecksum sets the header checksum of the LZ4 frame at the
// start of frame to the one Kafka writes in a wrapper of the given magic:
// under magic 0 the XXH32 of the magic number and the descriptor
// (KAFKA-3160), under magic 1 (and in the frame format) of the descriptor
// alone. A frame header that does not parse is an error wrapping
// corrupt.ErrCorrupt and frame is left as it was.
func SetLZ4HeaderChecksum(frame []byte, magic int8) error {
	at, err := lz4HeaderChecksumAt(frame)
	if err != nil {
		return err
	}
	from := lz4MagicSize
	if magic == MagicV0 {
		from = 0
	}
	frame[at] = byte(xxh32(frame[from:at]) >> 8)
	return nil
}

// LZ4HeaderChecksumOK reports whether the header checksum of the LZ4
// frame at the start of frame is the one Kafka writes for magic (see
// SetLZ4HeaderChecksum).
func LZ4HeaderChecksumOK(frame []byte, magic int8) (bool, error) {
	at, err := lz4HeaderChecksumAt(frame)
	if err != nil {
		return false, err
	}
	from := lz4MagicSize
	if magic == MagicV0 {
		from = 0
	}
	if got, want := frame[at], byte(xxh32(frame[from:at])>>8); got != want {
		return false, nil
	}
	return true, nil
}

// XXH32 (seed 0), the hash of the LZ4 frame header checksum.
const (
	xxhPrime1 uint32 = 2654435761
	xxhPrime2 uint32 = 2246822519
	xxhPrime3 uint32 = 3266489917
	xxhPrime4 uint32 = 668265263
	xxhPrime5 uint32 = 374761393
)

// xxh32 returns the XXH32 hash of b with seed 0.
func xxh32(b []byte) uint32 {
	n := uint32(len(b))
	var h uint32
	if len(b) >= 16 {
		p1, p2 := xxhPrime1, xxhPrime2 // variables: the sums wrap
		v1, v2, v3, v4 := p1+p2, p2, uint32(0), -p1
		for ; len(b) >= 16; b = b[16:] {
			v1 = xxhRound(v1, binary.LittleEndian.Uint32(b))
			v2 = xxhRound(v2, binary.LittleEndian.Uint32(b[4:]))
			v3 = xxhRound(v3, binary.LittleEndian.Uint32(b[8:]))
			v4 = xxhRound(v4, binary.LittleEndian.Uint32(b[12:]))
		}
		h = bits.RotateLeft32(v1, 1) + bits.RotateLeft32(v2, 7) + bits.RotateLeft32(v3, 12) + bits.RotateLeft32(v4, 18)
	} else {
		h = xxhPrime5
	}
	h += n
	for ; len(b) >= 4; b = b[4:] {
		h += binary.LittleEndian.Uint32(b) * xxhPrime3
		h = bits.RotateLeft32(h, 17) * xxhPrime4
	}
	for _, c := range b {
		h += uint32(c) * xxhPrime5
		h = bits.RotateLeft32(h, 11) * xxhPrime1
	}
	h ^= h >> 15
	h *= xxhPrime2
	h ^= h >> 13
	h *= xxhPrime3
	h ^= h >> 16
	return h
}

// xxhRound is one XXH32 accumulator step.
func xxhRound(acc, lane uint32) uint32 {
	acc += lane * xxhPrime2
	return bits.RotateLeft32(acc, 13) * xxhPrime1
}
