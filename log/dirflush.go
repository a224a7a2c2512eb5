package log

import (
	"container/heap"
	"sync"
	"time"
)

// flushScheduler runs the FlushInterval flushes (flush.ms) of every
// partition of a Dir: one goroutine keeps the partitions by due time and
// hands the due ones to at most workers goroutines (Kafka's one flush
// scheduler per log manager, instead of a goroutine per partition). A
// partition is flushed, then due again one interval after that flush
// ended; a closed partition is dropped when it comes due. The same
// workers run the background flush a roll leaves (flushNow, then
// Partition.flushRolled), due at once, so that a Dir's rolls never run
// more flushes at a time than it has workers. It sees each partition
// through its durability part, and the part's durabilityCore.
type flushScheduler struct {
	workers int
	// work carries due entries to the workers.
	work chan flushEntry
	// wake interrupts the scheduler's wait when an earlier partition was
	// added; stop ends it.
	wake, stop chan struct{}
	// done is closed when the scheduler and its workers have ended.
	wg sync.WaitGroup

	mu sync.Mutex
	// due holds every scheduled partition, earliest first.
	due flushHeap
}

// newFlushScheduler starts a scheduler with workers workers (at least 1).
func newFlushScheduler(workers int) *flushScheduler {
	s := &flushScheduler{workers: max(workers, 1), work: make(chan flushEntry),
		wake: make(chan struct{}, 1), stop: make(chan struct{})}
	s.wg.Go(s.run)
	for range s.workers {
		s.wg.Go(func() {
			for e := range s.work {
				if e.roll {
					_ = e.d.core.flushRolled() // a failure fails the partition (logged)
					continue
				}
				e.d.core.periodicFlush()
				s.schedule(e.d)
			}
		})
	}
	return s
}

// flushNow makes d's background flush after a roll due at once.
func (s *flushScheduler) flushNow(d *durability) {
	s.push(flushEntry{at: time.Now(), d: d, roll: true})
}

// add schedules d's first flush one FlushInterval from now (nothing
// without a FlushInterval).
func (s *flushScheduler) add(d *durability) {
	if d.flushInterval > 0 {
		s.schedule(d)
	}
}

// schedule makes d due one FlushInterval from now, unless its partition
// is closed.
func (s *flushScheduler) schedule(d *durability) {
	if d.closed.Load() {
		return
	}
	s.push(flushEntry{at: time.Now().Add(d.flushInterval), d: d})
}

// push adds e to the due entries and wakes the scheduler when e comes
// first.
func (s *flushScheduler) push(e flushEntry) {
	s.mu.Lock()
	heap.Push(&s.due, e)
	first := s.due[0] == e
	s.mu.Unlock()
	if first {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// run hands due partitions to the workers until close.
func (s *flushScheduler) run() {
	defer close(s.work)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		var next flushEntry
		wait := time.Hour
		if len(s.due) > 0 {
			if d := time.Until(s.due[0].at); d <= 0 {
				next = heap.Pop(&s.due).(flushEntry)
			} else {
				wait = d
			}
		}
		s.mu.Unlock()
		if next.d != nil {
			if next.d.closed.Load() {
				continue
			}
			select {
			case s.work <- next:
			case <-s.stop:
				return
			}
			continue
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-s.wake:
		case <-s.stop:
			return
		}
	}
}

// close stops the scheduler and waits for the flushes running.
func (s *flushScheduler) close() {
	close(s.stop)
	s.wg.Wait()
}

// flushEntry is a partition, by its durability part, due for a flush at
// at: its FlushInterval flush, or (roll) the background flush after a
// roll.
type flushEntry struct {
	at   time.Time
	d    *durability
	roll bool
}

// flushHeap is a min-heap of flushEntry by due time (container/heap).
type flushHeap []flushEntry

func (h flushHeap) Len() int           { return len(h) }
func (h flushHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h flushHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *flushHeap) Push(x any)        { *h = append(*h, x.(flushEntry)) }
func (h *flushHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = flushEntry{}
	*h = old[:len(old)-1]
	return e
}
