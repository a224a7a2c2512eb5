package vfs

// VectorWriterAt is implemented by Files that can write several buffers,
// back to back, at an offset in one call (on Linux pwritev, or, for 512
// bytes or fewer in all, one pwrite of a gathered copy): what a
// segment uses to write a patched batch header and the caller's records
// with one system call instead of two. It is optional: callers check for
// it with a type assertion and fall back to one WriteAt per buffer, which
// is what a File of your own gets unless it implements this too. Default's
// files implement it on Linux.
//
// WriteVAt writes every byte of bufs, in order, starting at off, and
// returns the number of bytes written; on an error it may have written
// part of them, like WriteAt. It may modify the elements of bufs (it
// advances them past what was written); it never writes into the buffers'
// bytes or keeps them.
type VectorWriterAt interface {
	WriteVAt(bufs [][]byte, off int64) (int, error)
}
