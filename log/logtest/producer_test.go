package logtest_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// send is one producer batch: producer id, epoch, first sequence, records.
type send struct {
	pid   int64
	epoch int16
	seq   int32
	n     int
}

func (s send) bytes(t *testing.T) []byte {
	now := time.Now().UnixMilli() // not expired by Config.ProducerIDExpiration
	bld := batch.NewBuilder(batch.BuilderOptions{Producer: &batch.Producer{ID: s.pid, Epoch: s.epoch, BaseSequence: s.seq}})
	for i := range s.n {
		require.NoError(t, bld.Add(batch.Record{Timestamp: now + int64(i), Value: []byte("v")}))
	}
	bt, err := bld.Build()
	require.NoError(t, err)
	return slices.Clone(bt)
}

// TestModelProducerRules checks each producer rule of Model.ExpectAppend
// against a real Partition: the earlier batches are accepted by both, and
// the last one gets the same outcome from both (appended at the log end, a
// retry with the original offsets, or the same sentinel), leaving both
// logs as they were when it is not appended.
func TestModelProducerRules(t *testing.T) {
	const max32 = 1<<31 - 1
	tests := []struct {
		name    string
		before  []send
		reopen  bool // close and reopen the partition before last
		last    send
		wantDup bool
		wantErr error
	}{
		{name: "unknown producer, any sequence", last: send{1, 0, 42, 2}},
		{name: "unknown producer, no epoch", last: send{1, -1, 42, 2}},
		{name: "unknown producer, epoch below no epoch", last: send{1, -2, 0, 1}, wantErr: plog.ErrInvalidProducerEpoch},
		{name: "next in sequence", before: []send{{1, 0, 0, 3}}, last: send{1, 0, 3, 1}},
		{name: "retry of the last batch", before: []send{{1, 0, 0, 3}}, last: send{1, 0, 0, 3}, wantDup: true},
		{name: "retry of the fifth newest", before: []send{{1, 0, 0, 1}, {1, 0, 1, 1}, {1, 0, 2, 1}, {1, 0, 3, 1}, {1, 0, 4, 1}},
			last: send{1, 0, 0, 1}, wantDup: true},
		{name: "retry of the sixth newest is stale", before: []send{{1, 0, 0, 1}, {1, 0, 1, 1}, {1, 0, 2, 1}, {1, 0, 3, 1}, {1, 0, 4, 1}, {1, 0, 5, 1}},
			last: send{1, 0, 0, 1}, wantErr: plog.ErrOutOfOrderSequence},
		{name: "same first, other last sequence", before: []send{{1, 0, 0, 3}}, last: send{1, 0, 0, 2}, wantErr: plog.ErrOutOfOrderSequence},
		{name: "gap", before: []send{{1, 0, 0, 3}}, last: send{1, 0, 5, 1}, wantErr: plog.ErrOutOfOrderSequence},
		{name: "older epoch", before: []send{{1, 2, 0, 1}}, last: send{1, 1, 1, 1}, wantErr: plog.ErrInvalidProducerEpoch},
		{name: "new epoch at 0", before: []send{{1, 0, 0, 3}}, last: send{1, 1, 0, 1}},
		{name: "new epoch not at 0", before: []send{{1, 0, 0, 3}}, last: send{1, 1, 3, 1}, wantErr: plog.ErrOutOfOrderSequence},
		{name: "MaxInt32 wraps to 0", before: []send{{1, 0, max32 - 1, 2}}, last: send{1, 0, 0, 1}},
		{name: "negative base sequence", last: send{1, 0, -1, 1}, wantErr: plog.ErrInvalidBatch},
		{name: "other producers are independent", before: []send{{1, 0, 0, 3}, {2, 0, 7, 1}}, last: send{1, 0, 3, 1}},
		{name: "after a reopen only the last batch is known", before: []send{{1, 0, 0, 1}, {1, 0, 1, 1}},
			reopen: true, last: send{1, 0, 0, 1}, wantErr: plog.ErrOutOfOrderSequence},
		{name: "after a reopen the last batch is a retry", before: []send{{1, 0, 0, 1}, {1, 0, 1, 1}},
			reopen: true, last: send{1, 0, 1, 1}, wantDup: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			p, err := plog.Open(dir, plog.Config{})
			require.NoError(t, err)
			defer func() { require.NoError(t, p.Close()) }()
			m := logtest.NewModel(0, false)
			for _, s := range tt.before {
				b := s.bytes(t)
				want, err := m.ExpectAppend(b)
				require.NoError(t, err)
				got, err := p.AppendBatchInfo(slices.Clone(b))
				require.NoError(t, err)
				require.Equal(t, want, got)
				require.NoError(t, m.AppendBatch(b, got.Base))
			}
			if tt.reopen {
				require.NoError(t, p.Close())
				p, err = plog.Open(dir, plog.Config{})
				require.NoError(t, err)
				m.Reopen()
			}
			end := m.LogEndOffset()
			b := tt.last.bytes(t)
			want, wantErr := m.ExpectAppend(b)
			got, err := p.AppendBatchInfo(slices.Clone(b))
			if tt.wantErr != nil {
				require.ErrorIs(t, wantErr, tt.wantErr)
				require.ErrorIs(t, err, tt.wantErr)
				require.ErrorContains(t, m.AppendBatch(b, end), "refuses")
			} else {
				require.NoError(t, wantErr)
				require.NoError(t, err)
				require.Equal(t, want, got)
				require.Equal(t, tt.wantDup, got.Duplicate)
				require.NoError(t, m.AppendBatch(b, got.Base))
			}
			if tt.wantErr != nil || tt.wantDup {
				require.Equal(t, end, p.LogEndOffset())
				require.Equal(t, end, m.LogEndOffset())
			}
			require.NoError(t, logtest.Check(p, m))
		})
	}
}

// TestModelProducerTruncateAndCrash: a truncation reloads the producer
// state from the snapshots the partition left (ReloadProducers), and after
// Crash the model refuses to guess until Reopen.
func TestModelProducerTruncateAndCrash(t *testing.T) {
	dir := t.TempDir()
	p, err := plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	m := logtest.NewModel(0, false)
	for _, s := range []send{{1, 0, 0, 1}, {1, 0, 1, 1}, {1, 0, 2, 1}} {
		b := s.bytes(t)
		base, err := p.AppendBatch(b)
		require.NoError(t, err)
		require.NoError(t, m.AppendBatch(b, base))
	}
	require.NoError(t, p.TruncateTo(2))
	require.NoError(t, m.TruncateTo(2))
	require.NoError(t, m.ReloadProducers(nil, p))
	// No snapshot: the partition replayed the log, both batches are known.
	for _, s := range []send{{1, 0, 0, 1}, {1, 0, 1, 1}} {
		want, err := m.ExpectAppend(s.bytes(t))
		require.NoError(t, err)
		require.True(t, want.Duplicate)
		got, err := p.AppendBatchInfo(s.bytes(t))
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	// The cut batch is not a retry any more: it is the next one.
	want, err := m.ExpectAppend(send{1, 0, 2, 1}.bytes(t))
	require.NoError(t, err)
	require.Equal(t, plog.AppendInfo{Base: 2, LastOffset: 2}, want)

	require.NoError(t, m.Crash(2, 2))
	_, err = m.ExpectAppend(send{1, 0, 2, 1}.bytes(t))
	require.True(t, errors.Is(err, logtest.ErrProducerStateUnknown), "%v", err)
	m.Reopen()
	_, err = m.ExpectAppend(send{1, 0, 2, 1}.bytes(t))
	require.NoError(t, err)
}
