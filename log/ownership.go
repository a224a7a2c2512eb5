package log

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
)

// ownership is a directory lock (the lockFile of a partition opened alone,
// the dirLockFile of a Dir) held from the open until the owner closed and
// the last of its holders let go. The holders are the owner's partitions
// (the partition itself, or every partition the Dir opened), and each
// holds from its open until it is closed and no reference on its segments
// is left (Partition.segTracker, a segment.Tracker): a Records or another
// read result kept across Close keeps the directory owned, so that no
// second owner truncates or rewrites the files it maps (DESIGN.md law 9:
// the cut of a mapped file waits for its readers; here, a whole new owner
// does). Until the lock is released a new Open or OpenDir of the
// directory fails with ErrLocked, which says so (heldBy). Within an open
// Dir, whose lock stays held anyway, Dir.OpenPartition refuses the reopen
// of a closed partition the same way while its segTracker counts segments.
type ownership struct {
	// lock is the directory lock, name its file, dir the directory and
	// what names the owner in ErrLocked's messages ("the closed
	// partition"). Set by newOwnership, never changed.
	lock   io.Closer
	name   string
	dir    string
	what   string
	logger *slog.Logger

	mu sync.Mutex
	// holders counts the partitions that hold (hold, letGo).
	holders int
	// closed is set by close: the last letGo releases the lock.
	closed bool
}

// newOwnership returns the ownership of dir through lock, the lock file
// name's lock, for an owner what names (see ownership).
func newOwnership(lock io.Closer, name, dir, what string, logger *slog.Logger) *ownership {
	return &ownership{lock: lock, name: name, dir: dir, what: what, logger: logger}
}

// hold adds a holder: a partition of the owner was opened.
func (o *ownership) hold() {
	o.mu.Lock()
	o.holders++
	o.mu.Unlock()
}

// letGo drops a holder: a partition closed and no reference on its
// segments is left. After close, the last one releases the lock (a failure
// is logged: nobody waits for it).
func (o *ownership) letGo() {
	o.mu.Lock()
	o.holders--
	last := o.closed && o.holders == 0
	o.mu.Unlock()
	if !last {
		return
	}
	if err := o.unlock(); err != nil {
		o.logger.Warn("partlog/log: releasing the directory lock after the last reader failed", "dir", o.dir, "err", err)
		return
	}
	o.logger.Info("partlog/log: the last reader closed; directory lock released", "dir", o.dir)
}

// close ends the owner's own use (Partition.Close, Dir.Close): with no
// holder left the lock is released now and the error of that returned;
// otherwise the last letGo releases it, and until then the lock file is
// listed as held by readers of a closed owner (heldBy).
func (o *ownership) close() error {
	o.mu.Lock()
	o.closed = true
	now := o.holders == 0
	if !now {
		lingering.add(o.name, o.what)
	}
	o.mu.Unlock()
	if now {
		return o.unlock()
	}
	o.logger.Info("partlog/log: closed with readers still open; the directory stays locked until they close", "dir", o.dir)
	return nil
}

// unlock releases the lock, after removing the lock file from lingering.
func (o *ownership) unlock() error {
	lingering.remove(o.name)
	if err := o.lock.Close(); err != nil {
		return fmt.Errorf("partlog/log: close %s: unlock: %w", o.dir, err)
	}
	return nil
}

// lingering lists the lock files of this process that closed owners keep
// for their readers (ownership.close), by absolute path, with what names
// the owner, so that ErrLocked's message says why the lock is held.
var lingering lingeringLocks

// lingeringLocks is the type of lingering.
type lingeringLocks struct {
	mu    sync.Mutex
	names map[string]string
}

// key is the map key of the lock file name.
func (l *lingeringLocks) key(name string) string {
	if abs, err := filepath.Abs(name); err == nil {
		return abs
	}
	return filepath.Clean(name)
}

// add lists name as held by the readers of what.
func (l *lingeringLocks) add(name, what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.names == nil {
		l.names = make(map[string]string)
	}
	l.names[l.key(name)] = what
}

// remove takes name off the list.
func (l *lingeringLocks) remove(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.names, l.key(name))
}

// heldBy describes who holds the lock file name, for the message of an
// ErrLocked error: the readers of a closed owner of this process when
// lingering lists it, else other.
func heldBy(name, other string) string {
	lingering.mu.Lock()
	what, ok := lingering.names[lingering.key(name)]
	lingering.mu.Unlock()
	if ok {
		return fmt.Sprintf("%s is held by readers of %s: close what they read from it first", name, what)
	}
	return other
}
