//go:build linux

package index

// fileWritesCoherent reports whether a write to a file through its
// descriptor is seen at once through a shared mapping of it, and a store
// into the mapping by a read of the file: on Linux both go to the same
// page cache pages. See fileWriteEntries.
const fileWritesCoherent = true
