package log

import "github.com/partlog/partlog/segment"

// SegmentBudget returns the counters of the segment budget the Dir's
// partitions share (DirConfig.MaxOpenSegments): the sealed segments open
// now that may be closed, and how many closes and reopens it did. The zero
// BudgetStats without one.
func (d *Dir) SegmentBudget() segment.BudgetStats {
	if d.budget == nil {
		return segment.BudgetStats{}
	}
	return d.budget.Stats()
}
