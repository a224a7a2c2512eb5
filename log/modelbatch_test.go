package log_test

import (
	"slices"

	"github.com/partlog/partlog/log/logtest"
)

// batchFrom returns the model's batch a read at offset starts with: the
// first whose last offset is at or above offset (Kafka's rule, so for an
// offset in a gap the first batch after it), found in Model.Batches.
func batchFrom(m *logtest.Model, offset int64) (logtest.Batch, bool) {
	bs := m.Batches()
	i, _ := slices.BinarySearchFunc(bs, offset, func(b logtest.Batch, off int64) int {
		if b.LastOffset < off {
			return -1
		}
		return 1
	})
	if i < len(bs) {
		return bs[i], true
	}
	return logtest.Batch{}, false
}
