package vfs

// FilesystemSyncer is implemented by an FS that can make durable, in one
// call, everything written to the filesystems that hold some directories:
// the data and size of every file and every directory entry created,
// renamed or removed (syncfs(2) on Linux). A Dir opening after a crash uses
// it to make every partition it recovered durable with one call a
// filesystem, and a Dir's Close to make what its partitions wrote durable,
// where each partition would otherwise sync its segments, its producer
// snapshot and its directory in turn, one device cache flush each.
//
// It is optional: callers check for it with a type assertion and fall back
// to syncing each file and directory when the FS lacks it or it returns
// an error wrapping errors.ErrUnsupported. Default implements it on Linux;
// on kernels before 5.8, whose syncfs does not report write-back errors,
// it returns such an error. A filesystem of your own that embeds FS does
// not implement it unless it says so, which is also how to turn it off:
// syncfs waits for every dirty page of the filesystem, other programs'
// included.
type FilesystemSyncer interface {
	// SyncFilesystems makes durable at least everything written before
	// the call to the files and directories below each of dirs, each dir
	// included (its own entry in its parent is not promised). After a
	// crash, every byte and entry it covered is there. An error means
	// some of it may not be durable. With no dirs it syncs nothing and
	// returns nil when it can sync, or an error wrapping
	// errors.ErrUnsupported when it cannot: callers ask so before they
	// leave anything unsynced for it.
	SyncFilesystems(dirs []string) error
}
