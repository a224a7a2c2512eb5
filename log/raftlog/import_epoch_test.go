package raftlog

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"

	"github.com/partlog/partlog/log"
)

// A partition that held batches before it was replicated keeps them as its
// first entries, their leader epochs as terms. Raft's terms then start
// above them, so terms only grow along every log: otherwise a node holding
// only the old batches (whose last term is their epoch) would count as more
// up to date than one holding entries committed since, win an election,
// and overwrite them.
func TestImportedBatchesEpochsBelowNewTerms(t *testing.T) {
	g := newTestGroupWith(t, 3, func(part *log.Partition) {
		_, err := part.AppendAssigned(dataEntry(t, 1, 5, 0, 2).GetData())
		require.NoError(t, err)
		require.NoError(t, part.Sync())
	})
	// Node 3 hears nothing: nodes 1 and 2 commit a batch.
	g.elect(1, among(1, 2))
	p := g.propose(1, 1)
	g.deliver(among(1, 2))
	res := <-p.res
	require.NoError(t, res.Err)
	require.Greater(t, g.parts[2].HighWatermark(), res.Base)
	ackedEnd := g.parts[2].LogEndOffset()

	// Node 1 is gone; node 3 campaigns with node 2 once node 2's lease on
	// node 1 ran out.
	for range 10 {
		g.turn(2, g.cores[2].rn.Tick)
		g.deliver(among(2, 3))
	}
	require.NotPanics(t, func() {
		for range 3 { // a rejected campaign teaches node 3 the term
			g.turn(3, func() { _ = g.cores[3].rn.Campaign() })
			g.deliver(among(2, 3))
		}
	})
	require.NotEqual(t, raft.StateLeader, g.cores[3].rn.BasicStatus().RaftState, "node 3 lacks the committed entries")
	require.GreaterOrEqual(t, g.parts[2].LogEndOffset(), ackedEnd, "node 2 keeps the acknowledged batch")
}
