// Package vfstest holds filesystems for tests of code that stores a
// partition: an in-memory filesystem that simulates machine crashes
// ([MemFS]) and a wrapper that injects errors into any filesystem
// ([Injector]). Both implement [vfs.FS], so a test passes them where a
// partition takes a filesystem (log.Config.FS, segment and index options).
// partlog's own tests use them; they are public so that a program that
// embeds partlog can run the same crash and fault tests.
//
// A crash test writes through a MemFS, takes what a crash would leave at
// some instant with [MemFS.CrashClone] (the synced state, plus what a
// random share of the unsynced writes left, whole, cut or torn), reopens
// the partition on that clone and checks what it finds:
//
//	mem := vfstest.NewMem()
//	p, err := log.Open("/p", log.Config{FS: mem})
//	// ... append, sync, append more ...
//	crashed := mem.CrashClone(vfstest.CrashOptions{UnsyncedDataPercent: 50, TornPercent: 50, Seed: seed})
//	q, err := log.Open("/p", log.Config{FS: crashed})
//	// everything acknowledged as synced is in q
//
// An Injector fails the operations its rules select (the k-th write, every
// sync of one file, writes past a disk-full threshold), with errors that
// wrap [ErrInjected], and can call a hook before every operation: taking a
// crash clone from the hook at the k-th operation crashes a scenario at
// each of its filesystem operations in turn. log/logtest's CrashFS does
// that for a property test.
//
// # Concurrency
//
// MemFS and Injector are safe for concurrent use, with the File contract
// of package vfs: concurrent ReadAt calls and one writer at a time on a
// File; Close overlaps no other call.
package vfstest
