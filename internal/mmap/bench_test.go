package mmap

import "testing"

//go:noinline
func plainRead(b []byte, i int) (byte, error) { return b[i], nil }

//go:noinline
func protectedRead(b []byte, i int) (_ byte, err error) {
	defer Recover(Protect(), &err)
	return b[i], nil
}

// BenchmarkProtect measures what Protect and a deferred Recover add to a
// call that reads one byte.
func BenchmarkProtect(b *testing.B) {
	buf := make([]byte, 4096)
	b.Run("plain", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			_, _ = plainRead(buf, i&4095)
		}
	})
	b.Run("protected", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			_, _ = protectedRead(buf, i&4095)
		}
	})
}
