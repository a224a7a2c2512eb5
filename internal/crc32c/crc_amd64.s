//go:build amd64 && !purego

#include "textflag.h"

// func foldCRC(s uint32, p []byte, k *[10]uint64) uint32
//
// The reflected CRC-32C of p from the raw register s, folded with
// carry-less multiplies (see foldPair in crc.go for the constants): s is
// XORed into the first 4 bytes, four 64-byte accumulators (Z0-Z3, four
// 16-byte lanes each) move 256 bytes at a time over the input, are folded
// into one (Z0), which then moves 64 bytes at a time; its four lanes are
// folded into one 16-byte block, whose CRC from a zero register (two
// CRC32Q) is the result. len(p) is a multiple of 64, at least 256.
TEXT ·foldCRC(SB), NOSPLIT, $0-44
	MOVL s+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX
	MOVQ k+32(FP), DX

	VMOVDQU64 0(SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQU64 128(SI), Z2
	VMOVDQU64 192(SI), Z3
	VMOVD     AX, X4
	VPXORQ    Z4, Z0, Z0
	ADDQ      $256, SI
	SUBQ      $256, CX
	VBROADCASTI32X4 0(DX), Z4

loop256:
	CMPQ CX, $256
	JB   fold4
	VMOVDQU64  0(SI), Z10
	VMOVDQU64  64(SI), Z11
	VMOVDQU64  128(SI), Z12
	VMOVDQU64  192(SI), Z13
	VPCLMULQDQ $0x00, Z4, Z0, Z6
	VPCLMULQDQ $0x11, Z4, Z0, Z0
	VPCLMULQDQ $0x00, Z4, Z1, Z7
	VPCLMULQDQ $0x11, Z4, Z1, Z1
	VPCLMULQDQ $0x00, Z4, Z2, Z8
	VPCLMULQDQ $0x11, Z4, Z2, Z2
	VPCLMULQDQ $0x00, Z4, Z3, Z9
	VPCLMULQDQ $0x11, Z4, Z3, Z3
	VPTERNLOGD $0x96, Z6, Z10, Z0
	VPTERNLOGD $0x96, Z7, Z11, Z1
	VPTERNLOGD $0x96, Z8, Z12, Z2
	VPTERNLOGD $0x96, Z9, Z13, Z3
	ADDQ       $256, SI
	SUBQ       $256, CX
	JMP        loop256

fold4:
	// Z0 onto Z1, then onto Z2, then onto Z3: 64 bytes each time.
	VBROADCASTI32X4 16(DX), Z5
	VPCLMULQDQ $0x00, Z5, Z0, Z6
	VPCLMULQDQ $0x11, Z5, Z0, Z0
	VPTERNLOGD $0x96, Z6, Z1, Z0
	VPCLMULQDQ $0x00, Z5, Z0, Z6
	VPCLMULQDQ $0x11, Z5, Z0, Z0
	VPTERNLOGD $0x96, Z6, Z2, Z0
	VPCLMULQDQ $0x00, Z5, Z0, Z6
	VPCLMULQDQ $0x11, Z5, Z0, Z0
	VPTERNLOGD $0x96, Z6, Z3, Z0

loop64:
	CMPQ CX, $64
	JB   lanes
	VMOVDQU64  0(SI), Z10
	VPCLMULQDQ $0x00, Z5, Z0, Z6
	VPCLMULQDQ $0x11, Z5, Z0, Z0
	VPTERNLOGD $0x96, Z6, Z10, Z0
	ADDQ       $64, SI
	SUBQ       $64, CX
	JMP        loop64

lanes:
	// Lane 0 moves 48 bytes, lane 1 32 and lane 2 16, onto lane 3.
	VEXTRACTI32X4 $1, Z0, X1
	VEXTRACTI32X4 $2, Z0, X2
	VEXTRACTI32X4 $3, Z0, X3
	VMOVDQU    32(DX), X7
	VPCLMULQDQ $0x00, X7, X0, X6
	VPCLMULQDQ $0x11, X7, X0, X0
	VPTERNLOGD $0x96, X6, X3, X0
	VMOVDQU    48(DX), X7
	VPCLMULQDQ $0x00, X7, X1, X6
	VPCLMULQDQ $0x11, X7, X1, X1
	VPTERNLOGD $0x96, X6, X1, X0
	VMOVDQU    64(DX), X7
	VPCLMULQDQ $0x00, X7, X2, X6
	VPCLMULQDQ $0x11, X7, X2, X2
	VPTERNLOGD $0x96, X6, X2, X0

	// The CRC of the remaining 16 bytes from a zero register.
	XORL   AX, AX
	VMOVQ  X0, BX
	CRC32Q BX, AX
	VPEXTRQ $1, X0, BX
	CRC32Q BX, AX
	VZEROUPPER
	MOVL AX, ret+40(FP)
	RET

// func updateSSE42(crc uint32, p []byte) uint32
//
// The CRC-32C of p continuing crc (pre- and post-inverted), with the
// CRC32 instruction: 8 bytes at a time, then the last 0-7 one by one.
TEXT ·updateSSE42(SB), NOSPLIT, $0-36
	MOVL crc+0(FP), AX
	NOTL AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX

words:
	CMPQ CX, $8
	JB   bytes
	CRC32Q (SI), AX
	ADDQ $8, SI
	SUBQ $8, CX
	JMP  words

bytes:
	TESTQ CX, CX
	JZ    done
	CRC32B (SI), AX
	INCQ SI
	DECQ CX
	JMP  bytes

done:
	NOTL AX
	MOVL AX, ret+32(FP)
	RET
