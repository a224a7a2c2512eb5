//go:build !amd64 || purego

package crc32c

// useFold is false: only amd64 has the folding code (left out with the
// purego build tag).
const useFold = false

// foldCRC is never called outside amd64 (useFold is false).
func foldCRC(s uint32, p []byte, k *[10]uint64) uint32 {
	panic("partlog/crc32c: foldCRC without the folding code")
}
