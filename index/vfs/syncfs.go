package vfs

import "io"

// FilesystemSyncer is implemented by an FS that can make durable, in one
// call, everything written to the filesystems that hold some directories:
// the data and size of every file and every directory entry created,
// renamed or removed (syncfs(2) on Linux). A Dir opening after a crash uses
// it to make every partition it recovered durable with one call a
// filesystem, and a Dir's Close to make what its partitions wrote durable,
// where each partition would otherwise sync its segments, its producer
// snapshot and its directory in turn, one device cache flush each.
//
// It is optional: callers check for it with a type assertion and sync each
// file and directory themselves when the FS lacks it or OpenFilesystemSync
// returns an error wrapping errors.ErrUnsupported. Default implements it
// on Linux; on kernels before 5.8, whose syncfs does not report write-back
// errors, it declines so. A filesystem of your own that embeds FS does not
// implement it unless it says so, which is also how to turn it off: syncfs
// waits for every dirty page of the filesystem, other programs' included.
type FilesystemSyncer interface {
	// OpenFilesystemSync returns a handle on the filesystem that holds
	// dir, from which on its Sync reports every write-back error the
	// filesystem meets (a handle opened for each call could miss one that
	// another program's sync saw first). An error wrapping
	// errors.ErrUnsupported means the FS cannot sync whole filesystems.
	OpenFilesystemSync(dir string) (FilesystemSync, error)
}

// FilesystemSync is an open handle of a FilesystemSyncer. Its methods may
// be called from any goroutine, one at a time.
type FilesystemSync interface {
	// Sync makes durable at least everything written before the call to
	// the files and directories below each of dirs, each dir included
	// (its own entry in its parent is not promised). After a crash,
	// every byte and entry it covered is there. An error means some of
	// it may not be durable; one wrapping errors.ErrUnsupported means
	// that this handle cannot sync one of dirs (it lies on another
	// filesystem that cannot be synced whole) and synced nothing.
	Sync(dirs []string) error
	io.Closer
}
