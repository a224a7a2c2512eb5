package segment

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/partlog/partlog/internal/base"
)

// Budget bounds how many sealed segments keep their files open while no
// one uses them (Kafka's lazy index idea, taken to the whole segment). An
// open segment holds at most three descriptors (.log, .index, .timeindex)
// and three mappings; a segment closed at rest holds none and keeps in
// memory only what its readers ask without reading (base and next
// offsets, size, largest timestamp, index entry counts).
//
// Segments opened or created with Config.Budget join it: a sealed segment
// whose files are open, that no one pins, and that carries no temporary
// suffix may be closed whenever more than Max of them are open, least
// recently used first (a CLOCK approximation of LRU: a segment used since
// the last sweep gets a second chance). Every method that reads the files
// reopens a closed segment first, with a clean open that reads no batch
// data (the .log must have the length, and the indexes the entry counts,
// it had when it was closed; anything else is reported as corruption).
// AcquireRead and Pin keep the files open until ReleaseRead and Unpin, so
// bytes Bytes returned stay mapped while the caller holds either. The
// active segment is never closed (it is not sealed), nor is one being
// deleted (MarkDeleted) or renamed by compaction (a suffix).
//
// Max bounds the segments open at rest; segments in use are open beyond
// it until they are released. Active segments written lately count
// against it as their owner reports them (AddActive): sealed segments
// are closed to keep the total within Max, and the owner returns the
// coldest active segments to rest (Rest) when they alone exceed Max. One Budget may be shared by any number of
// partitions (a log directory's); it is safe for concurrent use.
type Budget struct {
	max int
	// count is len(ring), for the lock-free check in unpin.
	count atomic.Int64
	// reopens and closes count what Stats reports.
	reopens, closes atomic.Int64
	// nActive counts the active segments the owner holds open for
	// writing outside the ring (AddActive): they take room from it.
	nActive atomic.Int64

	mu sync.Mutex
	// ring holds the open segments that may be closed (sealed, no
	// suffix, not deleted); each knows its slot (lz.slot). hand is the
	// CLOCK hand. Guarded by mu.
	ring []*Segment
	hand int
}

// NewBudget returns a Budget that keeps at most maxOpen sealed segments
// open while they are unused; 0 closes every sealed segment as soon as no
// one uses it. A negative maxOpen is taken as 0.
func NewBudget(maxOpen int) *Budget {
	return &Budget{max: max(maxOpen, 0)}
}

// BudgetStats is a snapshot of a Budget's counters.
type BudgetStats struct {
	// Max is the budget: sealed segments kept open at rest.
	Max int
	// Open is the number of sealed segments open now that may be closed
	// (segments in use and active segments are open beyond it).
	Open int
	// Reopens counts the opens of segments closed at rest.
	Reopens int64
	// Closes counts the segments closed at rest.
	Closes int64
	// Active is the number of active segments held open for writing
	// that count against Max (AddActive).
	Active int
}

// Stats returns the budget's counters.
func (b *Budget) Stats() BudgetStats {
	return BudgetStats{Max: b.max, Open: int(b.count.Load()), Reopens: b.reopens.Load(), Closes: b.closes.Load(),
		Active: int(b.nActive.Load())}
}

// AddActive adds delta to the active segments counted against Max: those
// whose files their owner holds open for writing (a partition appended to
// since its active segment was last at rest). Raising the count closes
// unused sealed segments to make room for them.
func (b *Budget) AddActive(delta int) {
	if b.nActive.Add(int64(delta)) < 0 {
		panic(base.AssertionFailedf("partlog/segment: budget's active count below zero"))
	}
	if delta > 0 && b.overBudget() {
		b.evict()
	}
}

// overBudget reports whether the ring holds segments and more are open
// (closable ones and the active ones counted) than Max allows.
func (b *Budget) overBudget() bool {
	n := b.count.Load()
	return n > 0 && n+b.nActive.Load() > int64(b.max)
}

// add puts s, open and closable, in the ring and closes the least
// recently used segments over the budget. REQUIRES: s.lz.mu held (s
// itself is then skipped: the sweep only tries its lock).
func (b *Budget) add(s *Segment) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.lz.slot >= 0 {
		return
	}
	s.lz.slot = len(b.ring)
	b.ring = append(b.ring, s)
	b.count.Store(int64(len(b.ring)))
	b.evictLocked()
}

// remove takes s out of the ring (if there).
func (b *Budget) remove(s *Segment) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.removeLocked(s)
}

// removeLocked takes s out of the ring, moving the last segment into its
// slot. REQUIRES: b.mu held.
func (b *Budget) removeLocked(s *Segment) {
	i := s.lz.slot
	if i < 0 {
		return
	}
	last := len(b.ring) - 1
	b.ring[i] = b.ring[last]
	b.ring[i].lz.slot = i
	b.ring[last] = nil
	b.ring = b.ring[:last]
	s.lz.slot = -1
	if b.hand >= len(b.ring) {
		b.hand = 0
	}
	b.count.Store(int64(len(b.ring)))
}

// evict closes unused segments while more than max are open.
func (b *Budget) evict() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.evictLocked()
}

// evictLocked sweeps the ring at most twice: a segment used since the
// last sweep loses its mark and stays; an unmarked one whose lock is free
// and that no one pins is closed and leaves the ring. The ring's room is
// Max less the active segments counted (AddActive). REQUIRES: b.mu held.
func (b *Budget) evictLocked() {
	for steps := 2 * len(b.ring); int64(len(b.ring))+b.nActive.Load() > int64(b.max) && len(b.ring) > 0 && steps > 0; steps-- {
		if b.hand >= len(b.ring) {
			b.hand = 0
		}
		s := b.ring[b.hand]
		if s.lz.referenced.Load() {
			s.lz.referenced.Store(false)
			b.hand++
			continue
		}
		if s.lz.mu.TryLock() {
			closed := s.closeAtRestLocked()
			s.lz.mu.Unlock()
			if closed {
				b.removeLocked(s) // the last segment moved to the hand
				b.closes.Add(1)
				continue
			}
		}
		b.hand++
	}
}

// lazyState is a segment's part in a Budget. Without a budget the files
// stay open until the last Unref and pin does nothing.
type lazyState struct {
	budget *Budget
	// mu serializes closing at rest and reopening (and guards the fields
	// below it). Lock order: mu, then budget.mu; the sweep only tries mu.
	mu sync.Mutex
	// pins counts the users that need the files open: methods reading
	// them, read leases, Pin. resident is set while the files are open.
	// A closer sets resident false and then checks pins again; a pinner
	// adds its pin and then checks resident (see pin): one of them sees
	// the other.
	pins     atomic.Int32
	resident atomic.Bool
	// referenced is set by every pin, cleared by the budget's sweep.
	referenced atomic.Bool
	// mapped tells whether the .log is read through a mapping while open.
	mapped atomic.Bool
	// offEntries and timeEntries are the index entry counts when the
	// segment was closed at rest (what IndexEntries answers then, and
	// what a reopen must find).
	offEntries, timeEntries atomic.Int64
	// closable is set by the writer when the segment may be closed at
	// rest: sealed, no suffix, not deleted, not closed, the .log exactly
	// Size bytes long. Guarded by mu.
	closable bool
	// dropIdle is set by the writer (under mu) for a deleted segment
	// that may be closed like a closable one: it is closed whenever no
	// one pins it, outside the ring (see MarkDeleted).
	dropIdle atomic.Bool
	// fileID identifies the .log the segment had open when it was first
	// closed at rest (device and inode; idKnown false where the platform
	// does not tell, MemFS): a reopen must find that same file, not one
	// a later segment's rename put under the name. Guarded by mu.
	fileID  [2]uint64
	idKnown bool
	// restLen is the .log's length when closed at rest. Guarded by mu.
	restLen int64
	// slot is the segment's index in budget.ring, -1 when not there.
	// Guarded by budget.mu.
	slot int
}

// initLazy sets up the segment's part in cfg.Budget (open files, not yet
// closable).
func (s *Segment) initLazy() {
	s.lz.budget = s.cfg.Budget
	s.lz.slot = -1
	s.lz.resident.Store(true)
}

// Pin keeps the segment's files open (a sealed segment under a Budget is
// otherwise closed when unused) until Unpin, reopening them if they were
// closed: bytes Bytes returned alias the mapping only while the caller
// holds a pin or a read lease. Every Pin needs an Unpin, also when Pin
// returns an error (the files could not be reopened; the methods that
// read them then return that error too). Without a Budget it does
// nothing.
func (s *Segment) Pin() error { return s.pin() }

// Unpin releases a Pin.
func (s *Segment) Unpin() { s.unpin() }

// pin adds a pin and makes sure the files are open. The pin is taken even
// on an error: the caller always unpins.
func (s *Segment) pin() error {
	if s.lz.budget == nil {
		return nil
	}
	s.lz.pins.Add(1)
	if !s.lz.referenced.Load() {
		s.lz.referenced.Store(true)
	}
	if s.lz.resident.Load() {
		return nil
	}
	return s.reopen()
}

// unpin drops a pin; the last one closes a deleted segment (dropIdle) and
// lets the budget close segments over it.
func (s *Segment) unpin() {
	b := s.lz.budget
	if b == nil {
		return
	}
	if s.lz.pins.Add(-1) != 0 {
		return
	}
	if s.lz.dropIdle.Load() {
		s.lz.mu.Lock()
		if s.lz.dropIdle.Load() {
			s.closeAtRestLocked()
		}
		s.lz.mu.Unlock()
	}
	if b.overBudget() {
		b.evict()
	}
}

// unpinWriter is unpin for the writer-side methods: it first records
// whether what they did left the segment closable.
func (s *Segment) unpinWriter() {
	if s.lz.budget == nil {
		return
	}
	s.updateClosable()
	s.unpin()
}

// updateClosable records whether the segment may be closed at rest, and
// puts it in its budget's ring or takes it out. Writer side.
func (s *Segment) updateClosable() {
	b := s.lz.budget
	if b == nil {
		return
	}
	rest := s.sealed.Load() && !s.closed.Load() && s.w.fileSize == s.size.Load()
	deleted := s.deleteOnRelease.Load()
	on := rest && s.w.suffix == "" && !deleted
	drop := rest && deleted && s.w.suffix == DeletedSuffix
	s.lz.mu.Lock()
	defer s.lz.mu.Unlock()
	if s.lz.closable != on {
		s.lz.closable = on
		if s.lz.resident.Load() {
			if on {
				b.add(s)
			} else {
				b.remove(s)
			}
		}
	}
	s.lz.dropIdle.Store(drop)
	if drop {
		s.closeAtRestLocked() // unless pinned: the last unpin does it
	}
}

// renameIfClosed renames the files of a segment a Budget closed at rest
// from the suffix they carry to newSuffix by their names, without opening
// them, and reports true. When the files are open (or there is no Budget)
// it reports false and changes nothing, having pinned the segment under
// the lock that closing takes, so that its files stay open for the caller,
// which unpins. On a failed rename the ones done are undone (best effort),
// and true is returned with the error. Writer side.
func (s *Segment) renameIfClosed(newSuffix string) (bool, error) {
	if s.lz.budget == nil {
		return false, nil
	}
	s.lz.mu.Lock()
	defer s.lz.mu.Unlock()
	if s.lz.resident.Load() {
		s.lz.pins.Add(1)
		s.lz.referenced.Store(true)
		return false, nil
	}
	oldSuffix := s.w.suffix
	if oldSuffix == newSuffix {
		return true, nil
	}
	// By name: the closed index objects (none for a segment opened at
	// rest) are not used again; Unref removes the files by their names
	// and a reopen opens new ones.
	rename := func(kind, from, to string) error { return s.fs.Rename(s.path(kind, from), s.path(kind, to)) }
	if err := rename(LogSuffix, oldSuffix, newSuffix); err != nil {
		return true, err
	}
	if err := rename(IndexSuffix, oldSuffix, newSuffix); err != nil {
		_ = rename(LogSuffix, newSuffix, oldSuffix)
		return true, err
	}
	if err := rename(TimeIndexSuffix, oldSuffix, newSuffix); err != nil {
		_ = rename(IndexSuffix, newSuffix, oldSuffix)
		_ = rename(LogSuffix, newSuffix, oldSuffix)
		return true, err
	}
	if err := s.renameCompanions(oldSuffix, newSuffix); err != nil {
		_ = rename(TimeIndexSuffix, newSuffix, oldSuffix)
		_ = rename(IndexSuffix, newSuffix, oldSuffix)
		_ = rename(LogSuffix, newSuffix, oldSuffix)
		return true, err
	}
	newLog := s.path(LogSuffix, newSuffix)
	s.w.suffix = newSuffix
	s.logPath.Store(&newLog)
	return true, nil
}

// closeAtRestLocked closes the files of a closable (or dropIdle) segment no
// one pins and reports whether it did. REQUIRES: s.lz.mu held.
func (s *Segment) closeAtRestLocked() bool {
	if !(s.lz.closable || s.lz.dropIdle.Load()) || !s.lz.resident.Load() || s.lz.pins.Load() != 0 || s.adopt.pending.Load() {
		// A segment whose adoption is pending is reopened by names it
		// does not carry yet: it stays open until settled.
		return false
	}
	s.lz.offEntries.Store(int64(s.offIdx.Entries()))
	s.lz.timeEntries.Store(int64(s.timeIdx.Entries()))
	s.lz.resident.Store(false)
	if s.lz.pins.Load() != 0 {
		// A pinner came in between: it may have seen resident set.
		s.lz.resident.Store(true)
		return false
	}
	s.lz.restLen = s.size.Load()
	if !s.lz.idKnown {
		if st, err := s.logFile.Stat(); err == nil {
			s.lz.fileID, s.lz.idKnown = fileIdentity(st)
		}
	}
	if err := s.releaseFiles(); err != nil {
		s.log.Warn("partlog/segment: closing an unused segment failed", "segment", s.LogPath(), "err", err)
	}
	return true
}

// reopen opens the files of a segment closed at rest.
func (s *Segment) reopen() error {
	s.lz.mu.Lock()
	defer s.lz.mu.Unlock()
	if s.lz.resident.Load() {
		return nil
	}
	if s.released.Load() {
		return ErrClosed
	}
	if err := s.openAtRestLocked(); err != nil {
		if s.deleteOnRelease.Load() {
			return fmt.Errorf("partlog/segment: reopen %s: %w: %w", s.LogPath(), ErrDeleted, err)
		}
		return fmt.Errorf("partlog/segment: reopen %s: %w", s.LogPath(), err)
	}
	s.lz.resident.Store(true)
	s.lz.budget.reopens.Add(1)
	if s.lz.closable {
		s.lz.budget.add(s)
	}
	return nil
}

// openAtRestLocked opens the .log and both indexes of a segment closed at
// rest without reading batch data: the .log must have the length it had
// and the indexes the entry counts they had when it was closed.
// REQUIRES: s.lz.mu held, the files closed.
func (s *Segment) openAtRestLocked() (err error) {
	logPath := s.LogPath()
	f, err := s.fs.OpenReadWrite(logPath)
	if err != nil {
		return err
	}
	s.logFile = f
	s.region, s.retired = nil, nil
	defer func() {
		if err != nil {
			_ = s.releaseFiles()
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if id, ok := fileIdentity(st); ok && s.lz.idKnown && id != s.lz.fileID {
		return base.CorruptionErrorf(logPath, 0, "identity",
			"another file than the one closed while unused (device and inode %v, were %v)", id, s.lz.fileID)
	}
	if st.Size() != s.lz.restLen {
		return base.CorruptionErrorf(logPath, min(st.Size(), s.lz.restLen), "size",
			"log of %d bytes, %d when it was closed while unused", st.Size(), s.lz.restLen)
	}
	if err := s.openFiles(s.lz.restLen, true); err != nil {
		return err
	}
	if err := s.offIdx.TrimToValidSize(); err != nil {
		return err
	}
	if err := s.timeIdx.TrimToValidSize(); err != nil {
		return err
	}
	if n, want := s.offIdx.Entries(), s.lz.offEntries.Load(); int64(n) != want {
		return base.CorruptionErrorf(s.offIdx.Path(), 0, "length",
			"%d entries, %d when the segment was closed while unused", n, want)
	}
	if n, want := s.timeIdx.Entries(), s.lz.timeEntries.Load(); int64(n) != want {
		return base.CorruptionErrorf(s.timeIdx.Path(), 0, "length",
			"%d entries, %d when the segment was closed while unused", n, want)
	}
	if err := s.offIdx.SanityCheck(); err != nil {
		return err
	}
	return s.timeIdx.SanityCheck()
}

// Resident reports whether the segment's files are open now (always,
// without a Budget, until the last Unref).
func (s *Segment) Resident() bool { return s.lz.resident.Load() && !s.released.Load() }

// use pins the segment for one method call: on success the caller defers
// unpin (or unpinWriter); on an error nothing is left pinned.
func (s *Segment) use() error {
	if err := s.pin(); err != nil {
		s.unpin()
		return err
	}
	return nil
}
