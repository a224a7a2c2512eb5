package log_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/producer"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/segment"
)

// TestAppendMarkerRules is Kafka's appendEndTxnMarker on the leader path,
// case by case: after the setup (data batches and markers, all accepted),
// the probe marker is written at the log end or refused with the sentinel
// (nothing written, the log end unchanged).
func TestAppendMarkerRules(t *testing.T) {
	const pid = 9
	type step struct {
		data   bool // a transactional batch of producer pid, epoch 1 (else the marker)
		marker batch.TxnMarker
	}
	commit := func(epoch int16, coord int32) step {
		return step{marker: marker(batch.ControlCommit, pid, epoch, coord)}
	}
	data := step{data: true}
	tests := []struct {
		name    string
		setup   []step
		probe   batch.TxnMarker
		wantErr error
		// wantLSO is the last stable offset after the probe; wantOpen
		// whether the producer's transaction is still open.
		wantLSO  int64
		wantOpen bool
	}{
		{name: "commit ends the open transaction", setup: []step{data}, probe: marker(batch.ControlCommit, pid, 1, 0), wantLSO: 2},
		{name: "abort ends the open transaction", setup: []step{data}, probe: marker(batch.ControlAbort, pid, 1, 0), wantLSO: 2},
		{name: "marker without an open transaction is written", setup: []step{data, commit(1, 0)}, probe: marker(batch.ControlAbort, pid, 1, 0), wantLSO: 3},
		{name: "marker for an unknown producer is written", probe: marker(batch.ControlCommit, 77, 0, 0), wantLSO: 1},
		{name: "marker for an unknown producer with coordinator epoch -1 is written", probe: marker(batch.ControlCommit, 77, 0, -1), wantLSO: 1},
		{name: "marker for an unknown producer with coordinator epoch below -1 is fenced", probe: marker(batch.ControlCommit, 77, 0, -2),
			wantErr: plog.ErrTransactionCoordinatorFenced, wantLSO: 0},
		{name: "coordinator epoch below -1 is fenced before the first marker", setup: []step{data}, probe: marker(batch.ControlCommit, pid, 1, -2),
			wantErr: plog.ErrTransactionCoordinatorFenced, wantLSO: 0, wantOpen: true},
		{name: "newer producer epoch ends the transaction (coordinator bumped it)", setup: []step{data}, probe: marker(batch.ControlAbort, pid, 2, 0), wantLSO: 2},
		{name: "older producer epoch is fenced", setup: []step{data}, probe: marker(batch.ControlCommit, pid, 0, 0),
			wantErr: plog.ErrInvalidProducerEpoch, wantLSO: 0, wantOpen: true},
		{name: "older coordinator epoch is fenced", setup: []step{data, commit(1, 5), data}, probe: marker(batch.ControlCommit, pid, 1, 4),
			wantErr: plog.ErrTransactionCoordinatorFenced, wantLSO: 2, wantOpen: true},
		{name: "same coordinator epoch is accepted", setup: []step{data, commit(1, 5), data}, probe: marker(batch.ControlCommit, pid, 1, 5), wantLSO: 4},
		{name: "not a marker type", setup: []step{data}, probe: marker(batch.ControlLeaderChange, pid, 1, 0),
			wantErr: plog.ErrInvalidBatch, wantLSO: 0, wantOpen: true},
		{name: "negative producer id", probe: marker(batch.ControlCommit, -1, 1, 0), wantErr: plog.ErrInvalidBatch, wantLSO: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := plog.Open(t.TempDir(), plog.Config{})
			require.NoError(t, err)
			defer p.Close()
			seq := int32(0)
			for _, s := range tc.setup {
				if s.data {
					_, err := p.AppendBatch(txnBatch(t, pid, 1, seq, 1))
					require.NoError(t, err)
					seq++
					continue
				}
				_, err := p.AppendMarker(s.marker)
				require.NoError(t, err)
			}
			end := p.LogEndOffset()
			off, err := p.AppendMarker(tc.probe)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.Equal(t, int64(-1), off)
				assert.Equal(t, end, p.LogEndOffset(), "nothing written")
			} else {
				require.NoError(t, err)
				assert.Equal(t, end, off)
				assert.Equal(t, end+1, p.LogEndOffset())
			}
			assert.Equal(t, tc.wantLSO, p.LastStableOffset())
			open, err := p.OpenTransactions()
			require.NoError(t, err)
			assert.Equal(t, tc.wantOpen, len(open) == 1, "open transactions %v", open)
		})
	}
}

// TestReadCommittedStopsAtLSOAndReportsAborts: an open transaction holds
// read_committed reads back at its first offset (read_uncommitted reads
// past it); an abort is reported with the range it covers, a commit is not.
func TestReadCommittedStopsAtLSOAndReportsAborts(t *testing.T) {
	p, err := plog.Open(t.TempDir(), plog.Config{})
	require.NoError(t, err)
	defer p.Close()
	app := func(b []byte) int64 {
		off, err := p.AppendBatch(b)
		require.NoError(t, err)
		return off
	}
	app(prodBatch(t, -1, -1, -1, 2, pbNow(), false)) // 0-1 plain
	a1 := app(txnBatch(t, 1, 0, 0, 3))               // 2-4 producer 1 (will abort)
	c1 := app(txnBatch(t, 2, 0, 0, 2))               // 5-6 producer 2 (will commit)
	app(prodBatch(t, -1, -1, -1, 1, pbNow(), false)) // 7 plain
	assert.Equal(t, a1, p.LastStableOffset())
	assert.Equal(t, int64(8), p.HighWatermark())

	bases, aborted := readCommittedAll(t, p, 0)
	assert.Equal(t, []int64{0}, bases, "nothing at or past the LSO")
	assert.Empty(t, aborted)
	to, found, err := p.OffsetForTimestampCommitted(plog.LatestTimestamp)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, a1, to.Offset, "latest for read_committed is the LSO")

	abortAt, err := p.AppendMarker(marker(batch.ControlAbort, 1, 0, 0))
	require.NoError(t, err)
	assert.Equal(t, c1, p.LastStableOffset(), "producer 2 still open")
	commitAt, err := p.AppendMarker(marker(batch.ControlCommit, 2, 0, 0))
	require.NoError(t, err)
	assert.Equal(t, p.HighWatermark(), p.LastStableOffset())

	bases, aborted = readCommittedAll(t, p, 0)
	assert.Equal(t, []int64{0, a1, c1, 7, abortAt, commitAt}, bases)
	assert.Equal(t, []plog.AbortedTxn{{ProducerID: 1, FirstOffset: a1, LastOffset: abortAt, LastStableOffset: c1}}, aborted)
	_, aborted = readCommittedAll(t, p, commitAt)
	assert.Empty(t, aborted, "no aborted transaction overlaps a read past its marker")
	open, err := p.OpenTransactions()
	require.NoError(t, err)
	assert.Empty(t, open)
}

// TestTxnStateAcrossReopen: an open transaction survives Close and Open
// (the producer snapshot at the log end carries its first offset) and
// still holds the LSO back; its ABORT after the reopen is reported with
// the LSO the reopened state gives; an aborted transaction's .txnindex
// entry survives a reopen. Both with and without the snapshot (deleted:
// the log is replayed).
func TestTxnStateAcrossReopen(t *testing.T) {
	for _, dropSnapshots := range []bool{false, true} {
		t.Run(fmt.Sprintf("dropSnapshots=%v", dropSnapshots), func(t *testing.T) {
			dir := t.TempDir()
			cfg := plog.Config{SegmentBytes: 2048}
			p, err := plog.Open(dir, cfg)
			require.NoError(t, err)
			var seq [3]int32
			app := func(pid int64) int64 {
				off, err := p.AppendBatch(txnBatch(t, pid, 0, seq[pid], 4))
				require.NoError(t, err)
				seq[pid] += 4
				return off
			}
			a := app(1)
			b := app(2)
			for range 20 { // several segments
				app(2)
			}
			abortA, err := p.AppendMarker(marker(batch.ControlAbort, 1, 0, 0))
			require.NoError(t, err)
			c := app(1) // a new transaction of producer 1, left open
			commitB, err := p.AppendMarker(marker(batch.ControlCommit, 2, 0, 0))
			require.NoError(t, err)
			require.Equal(t, c, p.LastStableOffset())
			require.NoError(t, p.Close())
			if dropSnapshots {
				names, err := os.ReadDir(dir)
				require.NoError(t, err)
				for _, n := range names {
					if strings.HasSuffix(n.Name(), producer.SnapshotSuffix) {
						require.NoError(t, os.Remove(filepath.Join(dir, n.Name())))
					}
				}
			}
			p, err = plog.Open(dir, cfg)
			require.NoError(t, err)
			defer p.Close()
			assert.Equal(t, c, p.LastStableOffset(), "the open transaction holds the LSO after a reopen")
			open, err := p.OpenTransactions()
			require.NoError(t, err)
			require.Len(t, open, 1)
			assert.Equal(t, int64(1), open[0].ProducerID)
			assert.Equal(t, c, open[0].FirstOffset)

			_, aborted := readCommittedAll(t, p, 0)
			wantA := plog.AbortedTxn{ProducerID: 1, FirstOffset: a, LastOffset: abortA, LastStableOffset: b}
			assert.Equal(t, []plog.AbortedTxn{wantA}, aborted)
			abortC, err := p.AppendMarker(marker(batch.ControlAbort, 1, 0, 0))
			require.NoError(t, err)
			assert.Equal(t, p.HighWatermark(), p.LastStableOffset())
			_, aborted = readCommittedAll(t, p, commitB)
			assert.Equal(t, []plog.AbortedTxn{{ProducerID: 1, FirstOffset: c, LastOffset: abortC, LastStableOffset: abortC + 1}}, aborted)
		})
	}
}

// TestFollowerKeepsTxnState: a follower copying the leader's batches with
// AppendAssigned (markers included) gets the same last stable offset and
// reports the same aborted transactions as the leader.
func TestFollowerKeepsTxnState(t *testing.T) {
	leader, err := plog.Open(t.TempDir(), plog.Config{SegmentBytes: 1024})
	require.NoError(t, err)
	defer leader.Close()
	follower, err := plog.Open(t.TempDir(), plog.Config{SegmentBytes: 1024})
	require.NoError(t, err)
	defer follower.Close()
	var seq [3]int32
	copyAll := func() {
		for off := follower.LogEndOffset(); off < leader.LogEndOffset(); {
			r, err := leader.ReadFromFollower(off, 1<<20)
			require.NoError(t, err)
			_, err = follower.AppendAssigned(r.Bytes())
			require.NoError(t, err)
			off = r.NextOffset()
			require.NoError(t, r.Close())
		}
		assert.Equal(t, leader.LastStableOffset(), follower.LastStableOffset())
		lb, la := readCommittedAll(t, leader, 0)
		fb, fa := readCommittedAll(t, follower, 0)
		assert.Equal(t, lb, fb)
		assert.Equal(t, la, fa)
	}
	for i := range 30 {
		pid := int64(i % 3)
		_, err := leader.AppendBatch(txnBatch(t, pid, 0, seq[pid], 2))
		require.NoError(t, err)
		seq[pid] += 2
		if i%4 == 3 {
			typ := []batch.ControlType{batch.ControlAbort, batch.ControlCommit}[i%8/4]
			_, err := leader.AppendMarker(marker(typ, pid, 0, 0))
			require.NoError(t, err)
		}
		copyAll()
	}
	_, aborted := readCommittedAll(t, follower, 0)
	assert.NotEmpty(t, aborted)
}

// TestAppendMarkerBatch: the stored marker is Kafka's control batch: the
// assigned offset, the stamped leader epoch, the partition's clock (and
// the LogAppendTime bit under LogAppendTime), baseSequence -1, a valid CRC.
func TestAppendMarkerBatch(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_123)
	for _, lat := range []bool{false, true} {
		p, err := plog.Open(t.TempDir(), plog.Config{Now: func() time.Time { return now }, LogAppendTime: lat,
			StampLeaderEpoch: true, LeaderEpoch: 4, MessageTimestampBeforeMax: plog.NoTimestampLimit})
		require.NoError(t, err)
		_, err = p.AppendBatch(prodBatch(t, -1, -1, -1, 3, now.UnixMilli(), false))
		require.NoError(t, err)
		off, err := p.AppendMarker(batch.TxnMarker{Type: batch.ControlAbort, ProducerID: 5, ProducerEpoch: 2, CoordinatorEpoch: 7,
			BaseOffset: 99, PartitionLeaderEpoch: 99, Timestamp: 99})
		require.NoError(t, err)
		r, err := p.ReadFrom(off, 0)
		require.NoError(t, err)
		bt, _, err := batch.Parse(r.Bytes())
		require.NoError(t, err)
		require.NoError(t, bt.Validate())
		assert.Equal(t, int64(3), bt.BaseOffset())
		assert.Equal(t, int32(4), bt.PartitionLeaderEpoch())
		assert.Equal(t, now.UnixMilli(), bt.MaxTimestamp())
		assert.Equal(t, lat, bt.Attributes().LogAppendTime())
		assert.True(t, bt.Attributes().IsControl() && bt.Attributes().IsTransactional())
		assert.Equal(t, int32(-1), bt.BaseSequence())
		require.NoError(t, r.Close())
		require.NoError(t, p.Close())
	}
}

// TestTruncationNeverExposesReopenedTxn: TruncateTo cutting a COMMIT
// marker reopens its transaction; at no filesystem operation of the
// truncation after the lowered log end is published (a reader may look at
// any moment: LastStableOffset takes no lock) is the last stable offset
// past the transaction's first offset.
// Before the hold (txnState.hold), the lowered bounds were published while the
// producer state still said the transaction was committed, so the last
// stable offset briefly equalled the new log end.
func TestTruncationNeverExposesReopenedTxn(t *testing.T) {
	in := vfs.NewInjector(vfs.NewMem())
	p, err := plog.Open("/p", plog.Config{FS: in})
	require.NoError(t, err)
	defer p.Close()
	_, err = p.AppendBatch(prodBatch(t, -1, -1, -1, 2, pbNow(), false)) // 0-1
	require.NoError(t, err)
	first, err := p.AppendBatch(txnBatch(t, 3, 0, 0, 2)) // 2-3
	require.NoError(t, err)
	commit, err := p.AppendMarker(marker(batch.ControlCommit, 3, 0, 0)) // 4
	require.NoError(t, err)
	require.Equal(t, p.HighWatermark(), p.LastStableOffset())

	var worst int64 = -1
	in.SetHook(func(vfs.Op) error {
		if p.LogEndOffset() <= commit { // the cut is published
			worst = max(worst, p.LastStableOffset())
		}
		return nil
	})
	require.NoError(t, p.TruncateTo(commit))
	in.SetHook(nil)
	assert.LessOrEqual(t, worst, first, "the last stable offset passed the reopened transaction during the truncation")
	assert.Equal(t, first, p.LastStableOffset())
	open, err := p.OpenTransactions()
	require.NoError(t, err)
	require.Len(t, open, 1)
	assert.Equal(t, first, open[0].FirstOffset)
}

// TestTruncateFullyAndStartAtEndsOpenTransactions: a restart at or past
// the log end forgets the producer state, open transactions included, so
// the last stable offset follows the high watermark again: after the
// restart, appends of plain batches are read_committed visible.
// Regression: the restart above the log end emptied the producer state
// without publishing it, and the last stable offset stayed at the restart
// offset until the next transactional batch.
func TestTruncateFullyAndStartAtEndsOpenTransactions(t *testing.T) {
	p, _ := openT(t, plog.Config{})
	_, err := p.AppendBatch(txnBatch(t, 3, 0, 0, 2)) // 0-1, left open
	require.NoError(t, err)
	require.Equal(t, int64(0), p.LastStableOffset())
	require.NoError(t, p.TruncateFullyAndStartAt(10))
	for i := range 3 {
		_, err := p.AppendBatch(pb{pid: 9, seq: int32(i)}.bytes(t))
		require.NoError(t, err)
	}
	open, err := p.OpenTransactions()
	require.NoError(t, err)
	assert.Empty(t, open)
	assert.Equal(t, int64(13), p.HighWatermark())
	assert.Equal(t, p.HighWatermark(), p.LastStableOffset())
	recs, aborted, err := p.ReadCommitted(10, 1<<20)
	require.NoError(t, err)
	defer recs.Close()
	assert.Len(t, batchesIn(t, recs.Bytes()), 3)
	assert.Empty(t, aborted)
}

// TestReadCommittedConcurrent: readers run ReadCommitted while a writer
// appends transactional batches, markers and plain batches (under the
// race detector in CI). Every read returns nothing at or past the last
// stable offset loaded after it, and every batch of an aborted
// transaction a read returns is covered by an aborted transaction that
// read reported: the .txnindex entry is published before the last stable
// offset moves past its transaction.
func TestReadCommittedConcurrent(t *testing.T) {
	p, err := plog.Open(t.TempDir(), plog.Config{SegmentBytes: 4096})
	require.NoError(t, err)
	defer p.Close()
	type seen struct {
		base, pid int64
		aborted   []plog.AbortedTxn
	}
	const writes = 400
	done := make(chan struct{})
	results := make(chan []seen, 2)
	for range 2 {
		go func() {
			var out []seen
			off := int64(0)
			for {
				select {
				case <-done:
					results <- out
					return
				default:
				}
				recs, ab, err := p.ReadCommitted(off, 1500)
				if !assert.NoError(t, err) {
					results <- out
					return
				}
				lso := p.LastStableOffset()
				if len(recs.Bytes()) != 0 {
					assert.LessOrEqual(t, recs.NextOffset(), lso, "read at %d returned past the LSO", off)
				}
				for rest := recs.Bytes(); len(rest) > 0; {
					bt, r, err := batch.Parse(rest)
					if !assert.NoError(t, err) {
						break
					}
					if bt.Attributes().IsTransactional() && !bt.Attributes().IsControl() {
						out = append(out, seen{base: bt.BaseOffset(), pid: bt.ProducerID(), aborted: ab})
					}
					rest = r
				}
				if len(recs.Bytes()) != 0 {
					off = recs.NextOffset()
				}
				_ = recs.Close()
			}
		}()
	}
	var seq [3]int32
	for i := range writes {
		pid := int64(i % 3)
		switch i % 7 {
		case 5, 6:
			typ := []batch.ControlType{batch.ControlAbort, batch.ControlCommit}[i%2]
			_, err := p.AppendMarker(marker(typ, pid, 0, 0))
			require.NoError(t, err)
		default:
			_, err := p.AppendBatch(txnBatch(t, pid, 0, seq[pid], 3))
			require.NoError(t, err)
			seq[pid] += 3
		}
	}
	close(done)
	_, truth := readCommittedAll(t, p, 0)
	require.NotEmpty(t, truth)
	for range 2 {
		for _, s := range <-results {
			for _, a := range truth {
				if a.ProducerID != s.pid || s.base < a.FirstOffset || s.base > a.LastOffset {
					continue
				}
				require.Contains(t, s.aborted, a, "a read returned producer %d's aborted batch at %d without reporting it", s.pid, s.base)
			}
		}
	}
}

// TestOpenRefusesDamagedTxnIndex: a .txnindex entry damaged below where
// the producer replay starts (a synced entry) refuses Open under every
// policy, naming the file, and changes nothing; the same damage in the
// part the replay rewrites (an unsynced entry a crash tore) is rebuilt.
func TestOpenRefusesDamagedTxnIndex(t *testing.T) {
	for _, replayed := range []bool{false, true} {
		t.Run(fmt.Sprintf("replayed=%v", replayed), func(t *testing.T) {
			dir := t.TempDir()
			cfg := plog.Config{SegmentBytes: 2048}
			p, err := plog.Open(dir, cfg)
			require.NoError(t, err)
			var seq int32
			for range 3 {
				_, err := p.AppendBatch(txnBatch(t, 1, 0, seq, 4))
				require.NoError(t, err)
				seq += 4
				_, err = p.AppendMarker(marker(batch.ControlAbort, 1, 0, 0))
				require.NoError(t, err)
			}
			_, err = p.AppendBatch(txnBatch(t, 2, 0, 0, 4))
			require.NoError(t, err)
			_, err = p.AppendMarker(marker(batch.ControlCommit, 2, 0, 0))
			require.NoError(t, err)
			require.NoError(t, p.Roll()) // the snapshot at the roll is past every entry
			_, wantAborted := readCommittedAll(t, p, 0)
			require.Len(t, wantAborted, 3)
			require.NoError(t, p.Close())

			txn := filepath.Join(dir, "00000000000000000000.txnindex")
			data, err := os.ReadFile(txn)
			require.NoError(t, err)
			require.Len(t, data, 3*34)
			data[34] = 0x7f // the second entry's version
			require.NoError(t, os.WriteFile(txn, data, 0o644))
			if replayed {
				// No snapshot: the replay starts at the log start and
				// rewrites every entry.
				names, err := os.ReadDir(dir)
				require.NoError(t, err)
				for _, n := range names {
					if strings.HasSuffix(n.Name(), producer.SnapshotSuffix) {
						require.NoError(t, os.Remove(filepath.Join(dir, n.Name())))
					}
				}
			}
			before := dirContents(t, dir)
			p, err = plog.Open(dir, cfg)
			if !replayed {
				require.ErrorIs(t, err, plog.ErrRecoveryRefused)
				require.ErrorIs(t, err, batch.ErrCorrupt)
				require.Contains(t, err.Error(), txn)
				// Open consumes the clean-shutdown marker before it
				// recovers (the next Open checks everything again);
				// nothing else changes.
				delete(before, ".kafka_cleanshutdown")
				assert.Equal(t, before, dirContents(t, dir), "a refused Open changes no data")
				return
			}
			require.NoError(t, err)
			defer p.Close()
			_, aborted := readCommittedAll(t, p, 0)
			assert.Equal(t, wantAborted, aborted)
		})
	}
}

// TestMarkerAboveHighWatermarkKeepsLSO is issue 27 case 2. Kafka's
// ProducerStateManager keeps a transaction whose marker lies at or above
// the high watermark as unstable ("one that is decided, but may not have
// been replicated (i.e. any transaction which has a COMMIT/ABORT marker
// written at a higher offset than the current high watermark)",
// firstUnstableOffset), and removes it only when the high watermark
// passes the marker (onHighWatermarkUpdated). The partition used to end it
// at the marker: with the marker at 3 and the high watermark at 3 the last
// stable offset was 3 and a read_committed read returned the three
// records of a transaction whose commit a leader change could still cut,
// and after TruncateTo(3) cut it the last stable offset went back to 0.
func TestMarkerAboveHighWatermarkKeepsLSO(t *testing.T) {
	p, _ := openT(t, plog.Config{DisableAutoHighWatermark: true})
	_, err := p.AppendBatch(txnBatch(t, 1, 0, 0, 3)) // 0-2
	require.NoError(t, err)
	commit, err := p.AppendMarker(marker(batch.ControlCommit, 1, 0, 0))
	require.NoError(t, err)
	require.Equal(t, int64(3), commit)
	require.NoError(t, p.SetHighWatermark(3))

	assert.Equal(t, int64(0), p.LastStableOffset(), "the marker at 3 is not below the high watermark 3")
	recs, _, err := p.ReadCommitted(0, 1<<20)
	require.NoError(t, err)
	assert.Empty(t, recs.Bytes(), "read_committed passed a marker the high watermark has not reached")
	require.NoError(t, recs.Close())
	got, _, err := p.OffsetForTimestampCommitted(plog.LatestTimestamp)
	require.NoError(t, err)
	assert.Equal(t, int64(0), got.Offset)

	// The leader changes and the new one never had the marker: the
	// transaction reopens, and the last stable offset did not go back.
	require.NoError(t, p.TruncateTo(commit))
	assert.Equal(t, int64(0), p.LastStableOffset())
	open, err := p.OpenTransactions()
	require.NoError(t, err)
	require.Len(t, open, 1)
	assert.Equal(t, int64(0), open[0].FirstOffset)

	// The marker written again and replicated: the high watermark passing
	// it releases the transaction, and a lower one does not hold it again.
	commit, err = p.AppendMarker(marker(batch.ControlCommit, 1, 0, 0))
	require.NoError(t, err)
	require.NoError(t, p.SetHighWatermark(commit))
	assert.Equal(t, int64(0), p.LastStableOffset())
	require.NoError(t, p.SetHighWatermark(commit+1))
	assert.Equal(t, commit+1, p.LastStableOffset())
	recs, _, err = p.ReadCommitted(0, 1<<20)
	require.NoError(t, err)
	assert.Equal(t, commit+1, recs.NextOffset())
	require.NoError(t, recs.Close())
	require.NoError(t, p.SetHighWatermark(commit))
	assert.Equal(t, commit, p.LastStableOffset(), "the high watermark bounds it; the transaction stays replicated")
}

// TestKafkaEmptyAbortEntry: a directory whose .txnindex holds an entry
// Kafka before 2.8 wrote for an ABORT marker of a producer with no data in
// the partition (first offset = marker offset; KAFKA-10702 stopped that)
// still reports every aborted transaction after the entry to
// read_committed reads, and an abort appended after the reopen keeps the
// entries before it (law 11; law 12: nothing old is cut).
func TestKafkaEmptyAbortEntry(t *testing.T) {
	dir := t.TempDir()
	p, err := plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	first, err := p.AppendBatch(txnBatch(t, 7, 0, 0, 2)) // 0-1, producer 7's transaction
	require.NoError(t, err)
	empty, err := p.AppendMarker(marker(batch.ControlAbort, 8, 0, 0)) // 2: producer 8 wrote nothing here
	require.NoError(t, err)
	end7, err := p.AppendMarker(marker(batch.ControlAbort, 7, 0, 0)) // 3
	require.NoError(t, err)
	require.NoError(t, p.Close())
	aborted7 := plog.AbortedTxn{ProducerID: 7, FirstOffset: first, LastOffset: end7, LastStableOffset: end7 + 1}

	// The index as such a Kafka writes it: producer 8's entry (its last
	// stable offset is producer 7's open transaction), then producer 7's.
	idx := segment.AppendTxnIndexEntry(nil, segment.AbortedTxn{ProducerID: 8, FirstOffset: empty, LastOffset: empty, LastStableOffset: first})
	idx = segment.AppendTxnIndexEntry(idx, segment.AbortedTxn(aborted7))
	path := filepath.Join(dir, "00000000000000000000.txnindex")
	require.NoError(t, os.WriteFile(path, idx, 0o644))

	p, err = plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	defer p.Close()
	_, aborted := readCommittedAll(t, p, 0)
	require.Contains(t, aborted, aborted7)

	// A later abort in the same segment adds its entry after both.
	second, err := p.AppendBatch(txnBatch(t, 7, 0, 2, 1))
	require.NoError(t, err)
	end, err := p.AppendMarker(marker(batch.ControlAbort, 7, 0, 0))
	require.NoError(t, err)
	require.NoError(t, p.Sync())
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	want := segment.AppendTxnIndexEntry(idx, segment.AbortedTxn{ProducerID: 7, FirstOffset: second, LastOffset: end, LastStableOffset: end + 1})
	require.Equal(t, want, got)
}

// TestReplayDropsTornTxnEntry: after a crash, a .txnindex entry below the
// producer snapshot the replay starts from must name an ABORT marker of
// its producer at its marker offset. An unsynced entry that a crash tore
// can fail that: its marker offset loses its low bytes (zeroed or garbage)
// and lands inside its own transaction, below the snapshot, while the
// marker it named was lost from the .log. The transaction is then open
// again; the entry would report its records aborted even after they
// commit. Open drops such an entry and keeps sound ones.
func TestReplayDropsTornTxnEntry(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before []segment.AbortedTxn // written into segment 0's .txnindex before entry
		entry  segment.AbortedTxn
		open   bool              // producer 7's transaction is open after the crash
		want   []plog.AbortedTxn // reported after producer 7's marker
	}{
		{
			name:  "marker offset torn into the open transaction",
			entry: segment.AbortedTxn{ProducerID: 7, FirstOffset: 0, LastOffset: 1, LastStableOffset: 0x55},
			open:  true,
		},
		{
			name:  "marker offset torn onto another batch",
			entry: segment.AbortedTxn{ProducerID: 7, FirstOffset: 0, LastOffset: 2, LastStableOffset: 0x55},
			open:  true,
		},
		{
			name:  "sound entry",
			entry: segment.AbortedTxn{ProducerID: 7, FirstOffset: 0, LastOffset: 2, LastStableOffset: 3},
			want:  []plog.AbortedTxn{{ProducerID: 7, FirstOffset: 0, LastOffset: 2, LastStableOffset: 3}},
		},
		{
			// An entry whose marker is gone (compaction removes a marker
			// once its transaction's data is gone) is not torn when a
			// sound entry follows it: both stay.
			name:   "entry naming no marker before a sound one",
			before: []segment.AbortedTxn{{ProducerID: 9, FirstOffset: 0, LastOffset: 1, LastStableOffset: 2}},
			entry:  segment.AbortedTxn{ProducerID: 7, FirstOffset: 0, LastOffset: 2, LastStableOffset: 3},
			want: []plog.AbortedTxn{{ProducerID: 9, FirstOffset: 0, LastOffset: 1, LastStableOffset: 2},
				{ProducerID: 7, FirstOffset: 0, LastOffset: 2, LastStableOffset: 3}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p, err := plog.Open(dir, plog.Config{})
			require.NoError(t, err)
			_, err = p.AppendBatch(txnBatch(t, 7, 0, 0, 2)) // 0-1
			require.NoError(t, err)
			if !tc.open {
				_, err = p.AppendMarker(marker(batch.ControlAbort, 7, 0, 0)) // 2
			} else {
				_, err = p.AppendBatch(prodBatch(t, -1, -1, -1, 1, pbNow(), false)) // 2
			}
			require.NoError(t, err)
			require.NoError(t, p.Close()) // the producer snapshot at 3
			// After it: a plain batch at 3, and producer 7's ABORT marker at
			// 4, lost in the crash, with its torn entry kept.
			p, err = plog.Open(dir, plog.Config{})
			require.NoError(t, err)
			_, err = p.AppendBatch(prodBatch(t, -1, -1, -1, 1, pbNow(), false)) // 3
			require.NoError(t, err)
			require.NoError(t, p.Close())
			require.NoError(t, os.Remove(filepath.Join(dir, "00000000000000000004.snapshot")))
			var idx []byte
			for _, e := range append(tc.before, tc.entry) {
				idx = segment.AppendTxnIndexEntry(idx, e)
			}
			require.NoError(t, os.WriteFile(filepath.Join(dir, "00000000000000000000.txnindex"), idx, 0o644))
			makeUnclean(t, dir)

			p, err = plog.Open(dir, plog.Config{})
			require.NoError(t, err)
			defer p.Close()
			if tc.open {
				require.Equal(t, int64(0), p.LastStableOffset(), "producer 7's transaction is open")
				_, err = p.AppendMarker(marker(batch.ControlCommit, 7, 0, 0))
				require.NoError(t, err)
			}
			_, aborted := readCommittedAll(t, p, 0)
			require.Equal(t, tc.want, aborted)
		})
	}
}

// TestAssignedMarkerWithoutTransactionalBit: a follower's record set whose
// ABORT control batch lacks the transactional attribute bit. Kafka's
// producer state takes every control batch of a producer as a marker
// (ProducerAppendInfo.append looks at the control bit only), and so do the
// partition's producer state and its replay: the batch ends the
// transaction. The append used to skip the .txnindex entry for it (it
// looked at the transactional bit), so read_committed served the aborted
// record as committed until a replay after a crash wrote the entry, which
// Verify then called corruption. Now the entry is written at once, the
// replay writes the same one, and Verify takes the batch as the marker it
// is.
func TestAssignedMarkerWithoutTransactionalBit(t *testing.T) {
	dir := t.TempDir()
	p, err := plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	bld := batch.NewBuilder(batch.BuilderOptions{BaseOffset: 0, Transactional: true,
		Producer: &batch.Producer{ID: 5, Epoch: 0, BaseSequence: 0}})
	require.NoError(t, bld.Add(batch.Record{Key: []byte("k"), Value: []byte("aborted"), Timestamp: 1000}))
	set, err := bld.AppendTo(nil)
	require.NoError(t, err)
	ctl, err := batch.AppendControlBatch(nil, batch.TxnMarker{Type: batch.ControlAbort, ProducerID: 5, BaseOffset: 1, Timestamp: 1000})
	require.NoError(t, err)
	cb := batch.Batch(ctl)
	attrs := binary.BigEndian.Uint16(cb[21:]) // attributes
	binary.BigEndian.PutUint16(cb[21:], attrs&^(1<<4))
	cb.SetCRC()
	require.False(t, cb.Attributes().IsTransactional())
	require.NoError(t, cb.ValidateHeader())
	_, err = p.AppendAssigned(append(set, ctl...))
	require.NoError(t, err)

	want := []plog.AbortedTxn{{ProducerID: 5, FirstOffset: 0, LastOffset: 1, LastStableOffset: 2}}
	open, err := p.OpenTransactions()
	require.NoError(t, err)
	assert.Empty(t, open, "the control batch ended the transaction")
	assert.Equal(t, int64(2), p.LastStableOffset())
	_, aborted := readCommittedAll(t, p, 0)
	assert.Equal(t, want, aborted, "read_committed reports the aborted transaction")
	require.NoError(t, p.Verify())
	require.NoError(t, p.Close())

	// Without the snapshots the reopen replays the log, rebuilding the
	// .txnindex: the same entry.
	removeSnapshots(t, dir)
	p, err = plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	defer p.Close()
	_, aborted = readCommittedAll(t, p, 0)
	assert.Equal(t, want, aborted, "after a replay")
	require.NoError(t, p.Verify())
}

// TestOpenRefusesDamagedTxnIndexInReplayedSegment: the producer replay
// after a crash starts at a snapshot inside the segment whose .txnindex
// has a damaged entry, and a sound entry after the damaged one names a
// marker below that snapshot: the damaged entry lies below it too, was
// synced, and no replay rewrites it. Open refuses, naming the file and
// changing nothing in it, as for damage in a segment the replay does not
// walk (TestOpenRefusesDamagedTxnIndex), also when the replay meets an
// ABORT whose entry it writes again. The replay's cut of the entries at or
// past its start used to count only the entries before the damage, so it
// cut the file there: the damaged entry and the sound one after it went,
// Open succeeded, and read_committed reported both aborted transactions'
// records as committed.
func TestOpenRefusesDamagedTxnIndexInReplayedSegment(t *testing.T) {
	for _, abortAfter := range []bool{false, true} {
		t.Run(fmt.Sprintf("abortAfter=%v", abortAfter), func(t *testing.T) {
			dir := t.TempDir()
			p, err := plog.Open(dir, plog.Config{})
			require.NoError(t, err)
			var seq int32
			for range 3 {
				_, err := p.AppendBatch(txnBatch(t, 1, 0, seq, 2))
				require.NoError(t, err)
				seq += 2
				_, err = p.AppendMarker(marker(batch.ControlAbort, 1, 0, 0)) // 2, 5, 8
				require.NoError(t, err)
			}
			require.NoError(t, p.Close()) // the snapshot at 9, inside segment 0
			p, err = plog.Open(dir, plog.Config{})
			require.NoError(t, err)
			if abortAfter {
				_, err = p.AppendBatch(txnBatch(t, 2, 0, 0, 1)) // 9
				require.NoError(t, err)
				_, err = p.AppendMarker(marker(batch.ControlAbort, 2, 0, 0)) // 10
			} else {
				_, err = p.AppendBatch(prodBatch(t, -1, -1, -1, 1, pbNow(), false)) // 9
			}
			require.NoError(t, err)
			end := p.LogEndOffset()
			require.NoError(t, p.Close())
			// A crash after the batches past 9: no snapshot at the end, the
			// replay starts at 9.
			require.NoError(t, os.Remove(filepath.Join(dir, fmt.Sprintf("%020d.snapshot", end))))
			txn := filepath.Join(dir, "00000000000000000000.txnindex")
			data, err := os.ReadFile(txn)
			require.NoError(t, err)
			data = data[:3*34] // the entry of the ABORT at 10, if any, was never synced
			data[34] = 0x7f    // the second entry's version (marker 5)
			require.NoError(t, os.WriteFile(txn, data, 0o644))
			makeUnclean(t, dir)

			p, err = plog.Open(dir, plog.Config{})
			if err == nil {
				_, aborted := readCommittedAll(t, p, 0)
				_ = p.Close()
				require.Fail(t, "Open took the damaged .txnindex", "aborted transactions reported: %v", aborted)
			}
			require.ErrorIs(t, err, plog.ErrRecoveryRefused)
			require.ErrorIs(t, err, batch.ErrCorrupt)
			require.Contains(t, err.Error(), txn)
			after, err := os.ReadFile(txn)
			require.NoError(t, err)
			assert.Equal(t, data, after, "the .txnindex is kept as it was")
		})
	}
}

// TestAssignedUnreadableMarkerEndsNothing: a follower's control batch
// whose record does not decode (AppendAssigned checks the header and the
// CRC, not the records) is not known to be a marker, so it ends no
// transaction, live and after a replay: the last stable offset stays at
// the open transaction's first offset. The producer state used to end the
// transaction as a COMMIT, letting read_committed readers past records
// whose outcome no marker gave (Verify's replay kept it open).
func TestAssignedUnreadableMarkerEndsNothing(t *testing.T) {
	dir := t.TempDir()
	p, err := plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	set := txnBatch(t, 5, 0, 0, 1)
	ctl, err := batch.AppendControlBatch(nil, batch.TxnMarker{Type: batch.ControlAbort, ProducerID: 5, BaseOffset: 1, Timestamp: pbNow()})
	require.NoError(t, err)
	cb := batch.Batch(ctl)
	cb[batch.HeaderSize] = 0x7e // the record's length: more bytes than the batch holds
	cb.SetCRC()
	require.NoError(t, cb.ValidateHeader())
	_, err = p.AppendAssigned(append(set, ctl...))
	require.NoError(t, err)
	require.Equal(t, int64(2), p.LogEndOffset())
	require.NoError(t, p.SetHighWatermark(2))

	check := func(when string) {
		open, err := p.OpenTransactions()
		require.NoError(t, err)
		require.Len(t, open, 1, "%s: the transaction is still open", when)
		assert.Equal(t, int64(0), open[0].FirstOffset, when)
		assert.Equal(t, int64(0), p.LastStableOffset(), when)
	}
	check("live")
	require.NoError(t, p.Close())

	removeSnapshots(t, dir)
	p, err = plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, p.SetHighWatermark(2))
	check("after a replay")
}

// removeSnapshots deletes the producer snapshots of the closed partition
// in dir, so that the next Open replays the log from its start.
func removeSnapshots(t *testing.T, dir string) []string {
	t.Helper()
	snaps, err := filepath.Glob(filepath.Join(dir, "*.snapshot"))
	require.NoError(t, err)
	for _, f := range snaps {
		require.NoError(t, os.Remove(f))
	}
	return snaps
}
