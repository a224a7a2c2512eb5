//go:build !linux

package index

// fileWritesCoherent is false off Linux: the index writes every entry
// through its mapping (or, unmapped, through its heap copy and the file),
// not assuming that file writes and a shared mapping see each other. See
// fileWriteEntries.
const fileWritesCoherent = false
