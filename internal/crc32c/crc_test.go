package crc32c

import (
	"fmt"
	stdcrc "hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/crc32"
	"github.com/stretchr/testify/require"
)

// stdCastagnoli is the standard library's CRC-32C table, the reference
// Update is checked against.
var stdCastagnoli = stdcrc.MakeTable(stdcrc.Castagnoli)

// TestUpdateCRC: Update (the folding code where the CPU has it) gives
// hash/crc32's CRC-32C for every length around the folding thresholds and
// block sizes, every alignment and starting CRC.
func TestUpdateCRC(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	buf := make([]byte, 20_000)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	lengths := []int{0, 1, 15, 16, 63, 64, 255, 256, 257, 319, 320, 511, 512, 513, 575, 576, 767, 768, 1023, 1024,
		1025, 4096, 10_800, 16_384, 16_384 + 61, 19_000}
	for _, n := range lengths {
		for _, off := range []int{0, 1, 7, 61} {
			for _, crc := range []uint32{0, 0xffffffff, 0x12345678} {
				p := buf[off : off+n]
				require.Equal(t, stdcrc.Update(crc, stdCastagnoli, p), Update(crc, p), "len %d, offset %d, crc %#x", n, off, crc)
			}
		}
	}
	// Every length up to 2 KiB: each path of the loops and the tail.
	for n := 0; n <= 2048; n++ {
		p := buf[3 : 3+n]
		require.Equal(t, stdcrc.Checksum(p, stdCastagnoli), Update(0, p), "len %d", n)
	}
}

// FuzzUpdateCRC compares Update with hash/crc32 on any input and
// starting CRC.
func FuzzUpdateCRC(f *testing.F) {
	f.Add(uint32(0), make([]byte, 600))
	f.Add(uint32(0xdeadbeef), make([]byte, 4096+17))
	f.Fuzz(func(t *testing.T, crc uint32, p []byte) {
		require.Equal(t, stdcrc.Update(crc, stdCastagnoli, p), Update(crc, p))
	})
}

// TestFoldCRC checks foldCRC itself, where the CPU runs it: the raw
// register after each multiple of 64 bytes from 256 on is hash/crc32's.
func TestFoldCRC(t *testing.T) {
	if !useFold {
		t.Skip("no AVX-512 VPCLMULQDQ on this machine: Update uses klauspost/crc32 alone")
	}
	rng := rand.New(rand.NewPCG(3, 5))
	buf := make([]byte, 8192+64)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for n := 256; n <= 8192; n += 64 {
		for _, s := range []uint32{0, 0xffffffff, 0x9abcdef0} {
			want := ^stdcrc.Update(^s, stdCastagnoli, buf[1:1+n])
			require.Equal(t, want, foldCRC(s, buf[1:1+n], &foldConsts), "len %d, register %#x", n, s)
		}
	}
}

// sink keeps the benchmarks' results alive.
var sink int

// BenchmarkCRC compares Update with klauspost/crc32 and hash/crc32
// (CRC-32C) at the sizes of a small-record batch and of logbench's 16 KiB
// batches.
func BenchmarkCRC(b *testing.B) {
	for _, n := range []int{256, 512, 1024, 4096, 10_800, 16_384} {
		p := make([]byte, n)
		b.Run(fmt.Sprintf("Update/%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				sink += int(Update(0, p))
			}
		})
		b.Run(fmt.Sprintf("klauspost/%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				sink += int(crc32.Update(0, castagnoli, p))
			}
		})
		b.Run(fmt.Sprintf("std/%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				sink += int(stdcrc.Update(0, stdCastagnoli, p))
			}
		})
	}
}

// BenchmarkCRCCold is BenchmarkCRC's 16 KiB case over a 64 MiB ring of
// batches, so that each batch comes from memory rather than the caches,
// as the batches a program appends usually do (logbench's rolls and
// append scenarios cycle through 4 MiB of them; the write call and
// whatever else the machine runs move them out of the caches between
// appends).
func BenchmarkCRCCold(b *testing.B) {
	const n, ring = 16 << 10, 64 << 20
	buf := make([]byte, ring)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	b.Run("Update", func(b *testing.B) {
		b.SetBytes(n)
		off := 0
		for b.Loop() {
			sink += int(Update(0, buf[off:off+n]))
			off = (off + n) % ring
		}
	})
	b.Run("klauspost", func(b *testing.B) {
		b.SetBytes(n)
		off := 0
		for b.Loop() {
			sink += int(crc32.Update(0, castagnoli, buf[off:off+n]))
			off = (off + n) % ring
		}
	})
}

// TestUpdateSmall: UpdateSmall (the CRC32 instruction where the CPU has
// it) gives hash/crc32's CRC-32C for every length up to 100 bytes, every
// alignment within a word and several starting CRCs, and its argument
// stays on the caller's stack (no allocation).
func TestUpdateSmall(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	buf := make([]byte, 128)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for n := 0; n <= 100; n++ {
		for off := range 8 {
			for _, crc := range []uint32{0, 0xffffffff, 0x12345678} {
				p := buf[off : off+n]
				require.Equal(t, stdcrc.Update(crc, stdCastagnoli, p), UpdateSmall(crc, p), "len %d, offset %d, crc %#x", n, off, crc)
			}
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		var h [61]byte
		h[30] = byte(rng.Uint32())
		_ = UpdateSmall(0, h[21:])
	})
	require.Zero(t, allocs)
}
