package log_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/segment"
)

// TestVerifyChecksTxnIndex: Verify reads each segment's .txnindex and
// checks it against the segment's batches: whole version-0 entries, in
// marker order, inside the segment's offsets, each at an ABORT marker of
// its producer, and an entry for every transaction the batches show
// aborted in the segment. Each damage is reported as a corruption error
// naming the .txnindex and the entry's position; the intact file passes.
func TestVerifyChecksTxnIndex(t *testing.T) {
	type layout struct {
		dir            string
		abortA, abortB int64 // marker offsets of the two aborted transactions
		firstA         int64 // first offset of the first one
		commit         int64 // a COMMIT marker's offset
		data           int64 // a plain data batch's offset
	}
	build := func(t *testing.T) (*plog.Partition, layout) {
		dir := t.TempDir()
		p, err := plog.Open(dir, plog.Config{})
		require.NoError(t, err)
		app := func(b []byte) int64 {
			off, err := p.AppendBatch(b)
			require.NoError(t, err)
			return off
		}
		mark := func(typ batch.ControlType, pid int64) int64 {
			off, err := p.AppendMarker(marker(typ, pid, 0, 0))
			require.NoError(t, err)
			return off
		}
		var l layout
		l.dir = dir
		l.data = app(prodBatch(t, -1, -1, -1, 2, pbNow(), false))
		l.firstA = app(txnBatch(t, 1, 0, 0, 3))
		app(txnBatch(t, 2, 0, 0, 2))
		l.abortA = mark(batch.ControlAbort, 1)
		l.commit = mark(batch.ControlCommit, 2)
		app(txnBatch(t, 1, 0, 3, 2))
		l.abortB = mark(batch.ControlAbort, 1)
		require.NoError(t, p.Verify(), "the intact .txnindex")
		return p, l
	}
	txnPath := func(dir string) string { return filepath.Join(dir, segment.FileName(0, segment.TxnIndexSuffix)) }
	entries := func(t *testing.T, dir string) []segment.AbortedTxn {
		data, err := os.ReadFile(txnPath(dir))
		require.NoError(t, err)
		es, err := segment.DecodeTxnIndex(txnPath(dir), data)
		require.NoError(t, err)
		require.Len(t, es, 2)
		return es
	}
	encode := func(es ...segment.AbortedTxn) []byte {
		var b []byte
		for _, e := range es {
			b = segment.AppendTxnIndexEntry(b, e)
		}
		return b
	}
	cases := []struct {
		name    string
		damage  func(l layout, es []segment.AbortedTxn) []byte
		pos     int64
		message string
	}{
		{"torn entry", func(l layout, es []segment.AbortedTxn) []byte { return encode(es...)[:50] }, 34, "after the last whole"},
		{"unknown version", func(l layout, es []segment.AbortedTxn) []byte {
			b := encode(es...)
			binary.BigEndian.PutUint16(b[34:], 3)
			return b
		}, 34, "version 3"},
		{"out of order", func(l layout, es []segment.AbortedTxn) []byte { return encode(es[1], es[0]) }, 34, "does not follow"},
		{"marker offset past the segment", func(l layout, es []segment.AbortedTxn) []byte {
			es[1].LastOffset = l.abortB + 100
			return encode(es...)
		}, 34, "outside the segment's offsets"},
		{"first offset after the marker", func(l layout, es []segment.AbortedTxn) []byte {
			es[0].FirstOffset = l.abortA + 1
			return encode(es...)
		}, 0, "first offset"},
		{"last stable offset past the marker", func(l layout, es []segment.AbortedTxn) []byte {
			es[0].LastStableOffset = l.abortA + 2
			return encode(es...)
		}, 0, "last stable offset"},
		{"entry at a COMMIT marker", func(l layout, es []segment.AbortedTxn) []byte {
			es[1].FirstOffset, es[1].LastOffset, es[1].LastStableOffset, es[1].ProducerID = l.firstA, l.commit, l.commit+1, 2
			return encode(es[0], es[1], segment.AbortedTxn{ProducerID: 1, FirstOffset: l.abortB, LastOffset: l.abortB, LastStableOffset: l.abortB + 1})
		}, 34, "not an ABORT marker"},
		{"entry of another producer", func(l layout, es []segment.AbortedTxn) []byte {
			es[0].ProducerID = 7
			return encode(es...)
		}, 0, "not an ABORT marker of producer 7"},
		{"entry at a data batch", func(l layout, es []segment.AbortedTxn) []byte {
			return encode(segment.AbortedTxn{ProducerID: 1, FirstOffset: l.data, LastOffset: l.data, LastStableOffset: l.data + 1}, es[0], es[1])
		}, 0, "not an ABORT marker"},
		{"missing entry", func(l layout, es []segment.AbortedTxn) []byte { return encode(es[0]) }, 34, "no entry for the transaction of producer 1 aborted at offset"},
		{"no .txnindex at all", func(l layout, es []segment.AbortedTxn) []byte { return nil }, 0, "no entry for the transaction"},
		{"first offset after the transaction's first batch", func(l layout, es []segment.AbortedTxn) []byte {
			es[0].FirstOffset = l.firstA + 1
			return encode(es...)
		}, 0, "the transaction's first batch is at"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, l := build(t)
			defer p.Close()
			data := c.damage(l, entries(t, l.dir))
			if data == nil {
				require.NoError(t, os.Remove(txnPath(l.dir)))
			} else {
				require.NoError(t, os.WriteFile(txnPath(l.dir), data, 0o644))
			}
			err := p.Verify()
			require.ErrorIs(t, err, base.ErrCorrupt)
			var ce *base.CorruptionError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, txnPath(l.dir), ce.File)
			require.Equal(t, c.pos, ce.Pos, "%v", err)
			require.Contains(t, err.Error(), c.message)
		})
	}
}
