package log

import "github.com/partlog/partlog/internal/segment"

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

// SegmentBudget returns the counters of the segment budget the partition's
// segments belong to (its own with Config.MaxOpenSegments, its Dir's in a
// Dir); the zero BudgetStats without one.
func (p *Partition) SegmentBudget() segment.BudgetStats {
	if p.segCfg.Budget == nil {
		return segment.BudgetStats{}
	}
	return p.segCfg.Budget.Stats()
}
