//go:build !amd64 || purego

package crc32c

// useFold is false: only amd64 has the folding code (left out with the
// purego build tag).
const useFold = false

// foldCRC is never called outside amd64 (useFold is false).
func foldCRC(s uint32, p []byte, k *[10]uint64) uint32 {
	panic("partlog/crc32c: foldCRC without the folding code")
}

// useSSE42 is false: only amd64 has the CRC32 instruction code.
const useSSE42 = false

// updateSSE42 is never called outside amd64 (useSSE42 is false).
func updateSSE42(crc uint32, p []byte) uint32 {
	panic("partlog/crc32c: updateSSE42 without the CRC32 instruction code")
}
