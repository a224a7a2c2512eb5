//go:build amd64 && !purego

package crc32c

import "golang.org/x/sys/cpu"

// useFold: the CPU and the OS support the AVX-512 folding of foldCRC
// (AVX512F and VL for the 512-bit registers and VPTERNLOGD, VPCLMULQDQ and
// PCLMULQDQ for the carry-less multiplies, SSE 4.2 for the final CRC32).
var useFold = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VPCLMULQDQ &&
	cpu.X86.HasPCLMULQDQ && cpu.X86.HasSSE42

// foldCRC returns the raw CRC-32C register (no pre- or post-inversion)
// after p, starting from the raw register s. len(p) must be a multiple of
// 64 and at least 256; k is foldConsts. Written in crc_amd64.s.
//
//go:noescape
func foldCRC(s uint32, p []byte, k *[10]uint64) uint32

// useSSE42: the CPU has the CRC32 instruction UpdateSmall uses.
var useSSE42 = cpu.X86.HasSSE42

// updateSSE42 is UpdateSmall with the CRC32 instruction, 8 bytes at a
// time. Written in crc_amd64.s; p does not escape.
//
//go:noescape
func updateSSE42(crc uint32, p []byte) uint32
