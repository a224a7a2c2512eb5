// Package vfs gives partlog's tests one package to name for filesystems:
// the public interface of github.com/partlog/partlog/index/vfs (FS, File,
// Default, ...) and the test filesystems of
// github.com/partlog/partlog/index/vfs/vfstest (MemFS, Injector, ...),
// re-exported under the same names. The implementations live in those
// public packages, so that importers' tests can use them too; library
// code imports index/vfs itself, not this package, so that it does not
// depend on the test filesystems.
//
// Example:
//
//	fs := vfs.NewMem()
//	f, err := fs.Create("/p/00000000000000000000.log")
//	if err != nil {
//		return err
//	}
//	if _, err := f.Write(b); err != nil {
//		return err
//	}
//	if err := f.Sync(); err != nil {
//		return err
//	}
//	crashed := fs.CrashClone(vfs.CrashOptions{}) // what a crash now leaves
package vfs

import (
	pvfs "github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/index/vfs/vfstest"
)

// FS is the public filesystem interface (index/vfs.FS).
type FS = pvfs.FS

// File is an open file of an FS (index/vfs.File).
type File = pvfs.File

// VectorWriterAt is the optional vectored write of a File
// (index/vfs.VectorWriterAt); the test filesystems do not offer it.
type VectorWriterAt = pvfs.VectorWriterAt

// FilesystemSyncer is the optional sync of whole filesystems of an FS
// (index/vfs.FilesystemSyncer); MemFS and Injector implement it.
type FilesystemSyncer = pvfs.FilesystemSyncer

// FilesystemSync is a FilesystemSyncer's open handle
// (index/vfs.FilesystemSync).
type FilesystemSync = pvfs.FilesystemSync

// MapHook is the optional mapping hook of a File (index/vfs.MapHook);
// the Injector's files implement it to fail mappings.
type MapHook = pvfs.MapHook

// InvalidFd is what File.Fd returns for a file without an operating-system
// descriptor (index/vfs.InvalidFd): every MemFS file.
const InvalidFd = pvfs.InvalidFd

// ErrLocked is wrapped by the error Lock returns when another owner holds
// the lock (index/vfs.ErrLocked); MemFS and Injector wrap it too.
var ErrLocked = pvfs.ErrLocked

// Default is the operating system's filesystem (index/vfs.Default).
var Default = pvfs.Default

// MemFS is the crash-simulating in-memory filesystem (vfstest.MemFS).
type MemFS = vfstest.MemFS

// CrashOptions configures MemFS.CrashClone (vfstest.CrashOptions).
type CrashOptions = vfstest.CrashOptions

// NewMem returns an empty MemFS (vfstest.NewMem).
func NewMem() *MemFS { return vfstest.NewMem() }

// Injector is the error-injecting filesystem (vfstest.Injector).
type Injector = vfstest.Injector

// NewInjector returns an Injector over fs with no rules
// (vfstest.NewInjector).
func NewInjector(fs FS) *Injector { return vfstest.NewInjector(fs) }

// Rule says which operations an Injector fails (vfstest.Rule).
type Rule = vfstest.Rule

// Op describes one operation, as rules and hooks see it (vfstest.Op).
type Op = vfstest.Op

// OpKind names an operation of the FS or File interface (vfstest.OpKind).
type OpKind = vfstest.OpKind

// OpSet is a set of operation kinds (vfstest.OpSet).
type OpSet = vfstest.OpSet

// Kinds returns the set of the given kinds (vfstest.Kinds).
func Kinds(kinds ...OpKind) OpSet { return vfstest.Kinds(kinds...) }

// OpenFiles is vfstest.OpenFiles: this process's descriptors and mappings
// of files under dir.
func OpenFiles(dir string) (fds, maps int, err error) { return vfstest.OpenFiles(dir) }

// MappedBytes is vfstest.MappedBytes: the resident bytes of this
// process's mappings of the files whose path starts with prefix.
func MappedBytes(prefix string) (int64, error) { return vfstest.MappedBytes(prefix) }

// InjectedError is the error an Injector returns (vfstest.InjectedError).
type InjectedError = vfstest.InjectedError

// ErrInjected marks every error an Injector makes up (vfstest.ErrInjected).
var ErrInjected = vfstest.ErrInjected

// The operation kinds (vfstest's).
const (
	OpCreate          = vfstest.OpCreate
	OpOpen            = vfstest.OpOpen
	OpOpenReadWrite   = vfstest.OpOpenReadWrite
	OpOpenDir         = vfstest.OpOpenDir
	OpRemove          = vfstest.OpRemove
	OpRemoveAll       = vfstest.OpRemoveAll
	OpRename          = vfstest.OpRename
	OpMkdirAll        = vfstest.OpMkdirAll
	OpList            = vfstest.OpList
	OpStat            = vfstest.OpStat
	OpClose           = vfstest.OpClose
	OpRead            = vfstest.OpRead
	OpReadAt          = vfstest.OpReadAt
	OpWrite           = vfstest.OpWrite
	OpWriteAt         = vfstest.OpWriteAt
	OpFileStat        = vfstest.OpFileStat
	OpSync            = vfstest.OpSync
	OpTruncate        = vfstest.OpTruncate
	OpPreallocate     = vfstest.OpPreallocate
	OpMap             = vfstest.OpMap
	OpLock            = vfstest.OpLock
	OpSyncFilesystems = vfstest.OpSyncFilesystems
)

// Sets of operation kinds (vfstest's).
const (
	AllOps      = vfstest.AllOps
	MutatingOps = vfstest.MutatingOps
)
