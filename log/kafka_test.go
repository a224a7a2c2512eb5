package log_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/producer"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// copyFixture copies testdata/kafka-2.7.1/<name> into a fresh directory.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	return copyFixtureFrom(t, "kafka-2.7.1", name)
}

// TestOpenKafkaPartition opens directories a Kafka broker wrote: a
// compacted partition with offset gaps and a 0-byte index, and a partition
// whose data retention deleted. Reads return Kafka's bytes unchanged, the
// time index answers, and appends continue at Kafka's log end offset.
func TestOpenKafkaPartition(t *testing.T) {
	t.Run("compacted __consumer_offsets-39", func(t *testing.T) {
		dir := copyFixture(t, "__consumer_offsets-39")
		seg0, err := os.ReadFile(filepath.Join(dir, "00000000000000000000.log"))
		require.NoError(t, err)
		p, err := plog.Open(dir, plog.Config{})
		require.NoError(t, err)
		defer p.Close()
		require.Equal(t, int64(0), p.LogStartOffset())
		require.Equal(t, int64(20), p.LogEndOffset())

		r, err := p.ReadFrom(0, 1<<20) // offsets 0-3 were compacted away
		require.NoError(t, err)
		require.Equal(t, seg0, r.Bytes())
		require.Equal(t, [][2]int64{{4, 4}, {16, 16}, {17, 17}}, batchesIn(t, r.Bytes()))
		require.NoError(t, r.Close())
		r, err = p.ReadFrom(5, 1) // inside the gap: the next batch
		require.NoError(t, err)
		require.Equal(t, [][2]int64{{16, 16}}, batchesIn(t, r.Bytes()))
		require.NoError(t, r.Close())
		r, err = p.ReadFrom(18, 1<<20)
		require.NoError(t, err)
		require.Equal(t, [][2]int64{{18, 19}}, batchesIn(t, r.Bytes()))
		require.NoError(t, r.Close())

		to, ok, err := p.OffsetForTimestamp(1685814551582)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, int64(17), to.Offset)

		b := logtest.MakeBatch(2, 10, 1685814560000, 0)
		base, err := p.AppendBatch(b)
		require.NoError(t, err)
		require.Equal(t, int64(20), base)
		require.Equal(t, int64(22), p.LogEndOffset())

		// Truncating into the gap 5-15 keeps batch 4: the log ends at 5.
		require.NoError(t, p.TruncateTo(10))
		require.Equal(t, int64(5), p.LogEndOffset())
		require.Equal(t, 1, len(p.SegmentInfos()))
		base, err = p.AppendBatch(logtest.MakeBatch(1, 10, 1685814570000, 0))
		require.NoError(t, err)
		require.Equal(t, int64(5), base)
		r, err = p.ReadFrom(0, 1<<20)
		require.NoError(t, err)
		require.Equal(t, [][2]int64{{4, 4}, {5, 5}}, batchesIn(t, r.Bytes()))
		require.NoError(t, r.Close())
	})
	t.Run("emptied myTopic-0", func(t *testing.T) {
		dir := copyFixture(t, "myTopic-0")
		p, err := plog.Open(dir, plog.Config{})
		require.NoError(t, err)
		defer p.Close()
		require.Equal(t, int64(38), p.LogStartOffset())
		require.Equal(t, int64(38), p.LogEndOffset())
		_, err = p.ReadFrom(37, 1)
		require.ErrorIs(t, err, plog.ErrOffsetOutOfRange)
		base, err := p.AppendBatch(logtest.MakeBatch(3, 10, 0, 0))
		require.NoError(t, err)
		require.Equal(t, int64(38), base)
		r, err := p.ReadFrom(39, 1)
		require.NoError(t, err)
		require.Equal(t, int64(38), batch.Batch(r.Bytes()).BaseOffset())
		require.NoError(t, r.Close())
		require.NoError(t, p.Verify())
	})
}

// TestOpenEveryKafkaPartition opens every partition directory of the
// Kafka fixtures (testdata/PROVENANCE.md): compacted segments whose first
// batch lies above their base offset, offset gaps, an empty segment,
// missing and 0-byte indexes, Kafka's leader-epoch-checkpoint (which Open
// reads and has no reason to rewrite) and producer snapshots beside the
// segments (loaded, and owned: see TestKafkaProducerSnapshot). No clean-shutdown marker is there, so
// Open recovers every segment (validating each batch, rebuilding the
// indexes), under the strict policy too since the data is valid. Reads
// return Kafka's bytes record for record, Verify passes, files partlog
// does not own are left alone, and a clean reopen reads the same.
// epochsBelowEnd returns the leader-epoch-checkpoint text b (Kafka's
// format: version, count, then "epoch startOffset" lines) without the
// entries that start at or past end.
func epochsBelowEnd(t *testing.T, b []byte, end int64) []byte {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	require.GreaterOrEqual(t, len(lines), 2, "leader-epoch-checkpoint %q", b)
	var kept []string
	for _, l := range lines[2:] {
		var epoch int32
		var start int64
		_, err := fmt.Sscanf(l, "%d %d", &epoch, &start)
		require.NoError(t, err, "leader-epoch-checkpoint line %q", l)
		if start < end {
			kept = append(kept, l)
		}
	}
	out := lines[0] + "\n" + strconv.Itoa(len(kept)) + "\n"
	for _, l := range kept {
		out += l + "\n"
	}
	return []byte(out)
}

func TestOpenEveryKafkaPartition(t *testing.T) {
	for _, set := range []string{"kafka-2.7.1", "kafka-source-code"} {
		entries, err := os.ReadDir(filepath.Join("testdata", set))
		require.NoError(t, err)
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			t.Run(set+"/"+e.Name(), func(t *testing.T) {
				dir := copyFixtureFrom(t, set, e.Name())
				// What Kafka wrote: every .log in base offset order.
				var want []byte
				var firstBase int64 = -1
				names, err := os.ReadDir(dir)
				require.NoError(t, err)
				foreign := map[string][]byte{}
				for _, n := range names {
					b, err := os.ReadFile(filepath.Join(dir, n.Name()))
					require.NoError(t, err)
					switch base, suffix, ok := segment.ParseFileName(n.Name()); {
					case ok && suffix == segment.LogSuffix:
						if firstBase < 0 {
							firstBase = base
						}
						want = append(want, b...) // ReadDir sorts: 20-digit names
					case ok && (suffix == segment.IndexSuffix || suffix == segment.TimeIndexSuffix):
					case strings.HasSuffix(n.Name(), producer.SnapshotSuffix):
						// Producer snapshots are the partition's own: Open
						// loads them and Close rewrites the one at the log
						// end (without producers expired since).
					default:
						foreign[n.Name()] = b
					}
				}
				firstEnd := int64(-1)
				for round, cfg := range []plog.Config{{Recovery: plog.StrictRecovery{}}, {}} {
					p, err := plog.Open(dir, cfg)
					require.NoError(t, err)
					require.NoError(t, p.Verify())
					require.Equal(t, firstBase, p.LogStartOffset())
					var got []byte
					records := 0
					for o := p.LogStartOffset(); o < p.LogEndOffset(); {
						r, err := p.ReadFrom(o, 1<<20)
						require.NoError(t, err)
						data := r.Bytes()
						for rest := data; len(rest) > 0; {
							bt, r2, err := batch.Parse(rest)
							require.NoError(t, err)
							require.NoError(t, bt.Validate())
							var dec batch.Decoder
							prev := int64(-1)
							for rec, err := range bt.All(&dec) {
								require.NoError(t, err)
								require.True(t, rec.Offset > prev && rec.Offset >= bt.BaseOffset() && rec.Offset <= bt.LastOffset(),
									"record offset %d in batch [%d, %d]", rec.Offset, bt.BaseOffset(), bt.LastOffset())
								prev = rec.Offset
								records++
							}
							o = bt.NextOffset()
							rest = r2
						}
						got = append(got, data...)
						require.NoError(t, r.Close())
					}
					require.Equal(t, want, got, "round %d: the log differs from Kafka's bytes", round)
					firstEnd = p.LogEndOffset()
					require.NoError(t, p.Close())
					t.Logf("round %d: %d bytes, %d records, offsets [%d, %d)", round, len(got), records, firstBase, p.LogEndOffset())
				}
				for name, b := range foreign {
					now, err := os.ReadFile(filepath.Join(dir, name))
					require.NoError(t, err)
					if name == plog.LeaderEpochCheckpointFile {
						// Kafka's loader removes the entries that start at
						// or past the log end (truncateFromEnd(nextOffset)),
						// and so does Open: myTopic-0's "0 38" on an empty
						// log ending at 38.
						b = epochsBelowEnd(t, b, firstEnd)
					}
					require.Equal(t, b, now, "%s was changed", name)
				}
			})
		}
	}
}
