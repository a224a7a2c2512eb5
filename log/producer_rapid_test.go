package log_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"pgregory.net/rapid"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// TestProducerStateMachine drives a partition and logtest.Model (which
// knows the producer and transaction rules) with the same random
// operations: next batches (plain and transactional), transaction markers
// (ABORT, COMMIT, stale or new producer and coordinator epochs, a control
// type that is no marker), retries of any earlier batch, arbitrary
// (epoch, sequence) batches (each appended with AppendBatchInfo or, from
// the same Builder, AppendBuilder), rolls, clean reopens and truncations
// (at a batch or at a marker, after which the model reloads its producer
// state from the newest snapshot left, as the partition does),
// DeleteRecordsBefore, restarts (TruncateFullyAndStartAt), syncs and
// crashes on the in-memory filesystem (a random part of what was not
// synced kept, then a clean reopen so that the model knows the producer
// state again: the producers and transactions of the batches that
// survived must too, laws 10 and 11). Half the
// runs replicate (Config.DisableAutoHighWatermark) and move the high
// watermark anywhere in the log, so markers lie above it and truncations
// cut markers it has not reached: a transaction stays unstable until the
// high watermark passes its marker (issue 27 case 2, Kafka's
// unreplicatedTxns). Every outcome (accepted at the log end, recognised as a
// retry of the same batch, or refused with the same sentinel) must agree,
// a retry or a refusal never changes the log, and logtest.Check compares
// the whole partition with the model after every step (with the last
// stable offset, the open transactions, read_committed reads and the
// aborted transactions they report: DESIGN law 11). Rerun a failure
// with -rapid.seed=N.
func TestProducerStateMachine(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		mem := vfs.NewMem()
		cfg := plog.Config{FS: mem, SegmentBytes: int64(rapid.IntRange(200, 3000).Draw(rt, "segmentBytes")), SegmentIndexBytes: memIndexBytes,
			DisableAutoHighWatermark: rapid.Bool().Draw(rt, "manualHighWatermark")}
		const dir = "/sm/p-0"
		p, err := plog.Open(dir, cfg)
		require.NoError(rt, err)
		defer func() { _ = p.Close() }()
		m := logtest.NewModel(0, cfg.DisableAutoHighWatermark)
		var sent []sentBatch // the batches the log holds, for retries
		var markers []int64  // the offsets of the markers the log holds
		ts := time.Now().UnixMilli()
		try := func(rt *rapid.T, pid int64, epoch int16, first int32, n int, txn bool) {
			bt := prodBatch(rt, pid, epoch, first, n, ts, txn)
			want, wantErr := m.ExpectAppend(bt)
			end := m.LogEndOffset()
			var info plog.AppendInfo
			var err error
			if rapid.Bool().Draw(rt, "viaBuilder") {
				info, err = p.AppendBuilder(prodBuilder(rt, pid, epoch, first, n, ts, txn))
			} else {
				info, err = p.AppendBatchInfo(append([]byte(nil), bt...))
			}
			what := fmt.Sprintf("producer %d epoch %d seq %d+%d", pid, epoch, first, n)
			switch {
			case wantErr != nil:
				var kind error
				for _, k := range []error{plog.ErrInvalidProducerEpoch, plog.ErrOutOfOrderSequence, plog.ErrInvalidBatch, plog.ErrInvalidTxnState} {
					if errors.Is(wantErr, k) {
						kind = k
					}
				}
				require.False(rt, kind == nil || !errors.Is(err, kind), "%s: want %v, got %+v, %v", what, wantErr, info, err)
			case want.Duplicate:
				require.False(rt, err != nil || info != want, "%s: want a retry of [%d, %d], got %+v, %v", what, want.Base, want.LastOffset, info, err)
				require.NoError(rt, m.AppendBatch(bt, info.Base)) // a no-op for a retry
			default:
				require.False(rt, err != nil || info != want || info.Base != end, "%s: want accepted as %+v, got %+v, %v", what, want, info, err)
				require.NoError(rt, m.AppendBatch(bt, info.Base))
				sent = append(sent, sentBatch{pid: pid, epoch: epoch, first: first, last: first + int32(n) - 1,
					base: info.Base, end: info.LastOffset + 1, bytes: bt, txn: txn})
			}
			if !want.Duplicate && wantErr == nil {
				return
			}
			require.False(rt, p.LogEndOffset() != end || m.LogEndOffset() != end, "%s: log end %d, model %d, before %d", what, p.LogEndOffset(), m.LogEndOffset(), end)
		}
		rt.Repeat(map[string]func(*rapid.T){
			"next": func(rt *rapid.T) {
				pid := rapid.Int64Range(0, 3).Draw(rt, "pid")
				epoch, first := m.NextSequence(pid)
				try(rt, pid, epoch, first, rapid.IntRange(1, 4).Draw(rt, "n"), false)
			},
			"txnNext": func(rt *rapid.T) {
				pid := rapid.Int64Range(0, 3).Draw(rt, "pid")
				epoch, first := m.NextSequence(pid)
				try(rt, pid, epoch, first, rapid.IntRange(1, 4).Draw(rt, "n"), true)
			},
			"marker": func(rt *rapid.T) {
				pid := rapid.Int64Range(0, 3).Draw(rt, "pid")
				epoch, _ := m.NextSequence(pid)
				mk := marker(rapid.SampledFrom([]batch.ControlType{batch.ControlAbort, batch.ControlCommit, batch.ControlLeaderChange}).Draw(rt, "type"),
					pid, epoch+int16(rapid.IntRange(-1, 1).Draw(rt, "epochDelta")), int32(rapid.IntRange(-2, 2).Draw(rt, "coordinatorEpoch")))
				want, wantErr := m.ExpectMarker(mk)
				end := m.LogEndOffset()
				off, err := p.AppendMarker(mk)
				if wantErr != nil {
					var kind error
					for _, k := range []error{plog.ErrInvalidProducerEpoch, plog.ErrTransactionCoordinatorFenced, plog.ErrInvalidBatch} {
						if errors.Is(wantErr, k) {
							kind = k
						}
					}
					require.False(rt, kind == nil || !errors.Is(err, kind) || p.LogEndOffset() != end, "%+v: want %v, got %d, %v (log end %d, before %d)", mk, wantErr, off, err, p.LogEndOffset(), end)
					return
				}
				require.NoError(rt, err, "%+v", mk)
				require.Equal(rt, want, off, "%+v: written at", mk)
				recs, err := p.ReadFromFollower(off, 0)
				require.NoError(rt, err)
				stored := append([]byte(nil), recs.Bytes()...)
				_ = recs.Close()
				require.NoError(rt, m.AppendMarker(mk, stored))
				markers = append(markers, off)
			},
			"highWatermark": func(rt *rapid.T) {
				if !cfg.DisableAutoHighWatermark {
					rt.Skip("the high watermark follows the log end")
				}
				o := rapid.Int64Range(m.LogStartOffset(), m.LogEndOffset()).Draw(rt, "highWatermark")
				require.NoError(rt, p.SetHighWatermark(o))
				require.NoError(rt, m.SetHighWatermark(o))
			},
			"retry": func(rt *rapid.T) {
				if len(sent) == 0 {
					rt.Skip("nothing sent")
				}
				b := sent[rapid.IntRange(max(0, len(sent)-12), len(sent)-1).Draw(rt, "batch")]
				try(rt, b.pid, b.epoch, b.first, int(b.last-b.first)+1, b.txn)
			},
			"retryRecent": func(rt *rapid.T) {
				// One of a producer's last seven batches: the five newest
				// are recognised, the older ones are refused.
				pid := rapid.Int64Range(0, 3).Draw(rt, "pid")
				var mine []sentBatch
				for _, b := range sent {
					if b.pid == pid {
						mine = append(mine, b)
					}
				}
				if len(mine) == 0 {
					rt.Skip("nothing sent by the producer")
				}
				b := mine[rapid.IntRange(max(0, len(mine)-7), len(mine)-1).Draw(rt, "batch")]
				try(rt, b.pid, b.epoch, b.first, int(b.last-b.first)+1, b.txn)
			},
			"arbitrary": func(rt *rapid.T) {
				try(rt, rapid.Int64Range(0, 3).Draw(rt, "pid"), int16(rapid.IntRange(0, 3).Draw(rt, "epoch")),
					int32(rapid.IntRange(-1, 20).Draw(rt, "seq")), rapid.IntRange(1, 4).Draw(rt, "n"), rapid.Bool().Draw(rt, "txn"))
			},
			"roll": func(rt *rapid.T) {
				require.NoError(rt, p.Roll())
			},
			"reopen": func(rt *rapid.T) {
				require.NoError(rt, p.Close())
				p, err = plog.Open(dir, cfg)
				require.NoError(rt, err)
				m.Reopen() // Close wrote the snapshot at the log end
			},
			"truncate": func(rt *rapid.T) {
				cuts := slices.Clone(markers)
				for _, b := range sent {
					cuts = append(cuts, b.base)
				}
				if len(cuts) == 0 {
					rt.Skip("nothing sent")
				}
				o := rapid.SampledFrom(cuts).Draw(rt, "cut")
				require.NoError(rt, p.TruncateTo(o))
				require.NoError(rt, m.TruncateTo(o))
				for len(sent) > 0 && sent[len(sent)-1].end > o {
					sent = sent[:len(sent)-1]
				}
				for len(markers) > 0 && markers[len(markers)-1] >= o {
					markers = markers[:len(markers)-1]
				}
				require.False(rt, p.LogEndOffset() != o || m.LogEndOffset() != o, "truncate to %d: log end %d, model %d", o, p.LogEndOffset(), m.LogEndOffset())
				names, err := mem.List(dir)
				require.NoError(rt, err)
				for _, n := range names {
					var off int64
					if k, _ := fmtSscan(n, &off); k == 1 {
						require.LessOrEqual(rt, off, o, "snapshot %s left past the new end", n)
					}
				}
				// The partition reloaded from its newest snapshot at or
				// below o (from its first segment when none).
				require.NoError(rt, m.ReloadProducers(mem, p))
			},
			"sync": func(rt *rapid.T) {
				require.NoError(rt, p.Sync())
				m.Sync()
			},
			"crash": func(rt *rapid.T) {
				// A crash keeping a random part of what was not synced,
				// then a clean reopen (the model knows the producer state
				// again): the batches that survived are known as before,
				// their retries get their offsets, and the open
				// transactions and aborted ones survive (laws 10, 11).
				clone := mem.CrashClone(vfs.CrashOptions{
					UnsyncedDataPercent: rapid.IntRange(0, 100).Draw(rt, "unsyncedDataPercent"),
					TornPercent:         rapid.IntRange(0, 100).Draw(rt, "tornPercent"),
					Seed:                rapid.Uint64().Draw(rt, "crashSeed"),
				})
				_ = p.Close()
				mem, cfg.FS = clone, clone
				p, err = plog.Open(dir, cfg)
				require.NoError(rt, err)
				end := p.LogEndOffset()
				require.NoError(rt, m.Crash(end, p.HighWatermark()))
				require.NoError(rt, logtest.Check(p, m))
				for len(sent) > 0 && sent[len(sent)-1].end > end {
					sent = sent[:len(sent)-1]
				}
				for len(markers) > 0 && markers[len(markers)-1] >= end {
					markers = markers[:len(markers)-1]
				}
				require.NoError(rt, p.Close())
				p, err = plog.Open(dir, cfg)
				require.NoError(rt, err)
				m.Reopen()
			},
			"deleteRecords": func(rt *rapid.T) {
				o := rapid.Int64Range(m.LogStartOffset(), m.HighWatermark()).Draw(rt, "deleteBefore")
				require.NoError(rt, p.DeleteRecordsBefore(o))
				require.NoError(rt, m.DeleteRecordsBefore(o))
			},
			"truncateFullyAndStartAt": func(rt *rapid.T) {
				o := m.LogEndOffset() + rapid.Int64Range(-3, 5).Draw(rt, "restartAt")
				if o < 0 {
					rt.Skip("below 0")
				}
				require.NoError(rt, p.TruncateFullyAndStartAt(o))
				require.NoError(rt, m.TruncateFullyAndStartAt(o))
				sent, markers = nil, nil
			},
			"": func(rt *rapid.T) { require.NoError(rt, logtest.Check(p, m)) },
		})
	})
}
