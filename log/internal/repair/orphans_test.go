package repair

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	"github.com/partlog/partlog/segment"
)

// TestMakeFindsOrphanIndexes checks step 6: plain index files whose
// segment has no plain .log once the plan is carried out are orphans,
// removed by Apply (and the directory synced); the indexes of live
// segments, of a segment a swap completes, and of a segment a swap
// replaces (the swap removes those) are not.
func TestMakeFindsOrphanIndexes(t *testing.T) {
	fs := vfs.NewMem()
	require.NoError(t, fs.MkdirAll("/d", 0o755))
	name := segment.FileName
	// Live segments 0 and 10; a valid swap at 10 replacing 10 and 12
	// (its batches reach offset 14); index files with no .log at 5, 20
	// and 30 (one .txnindex alone), and a .deleted index at 40.
	write(t, fs, "/d/"+name(0, segment.LogSuffix), v2Batch(t, 0, 3))
	write(t, fs, "/d/"+name(10, segment.LogSuffix), v2Batch(t, 10, 2))
	write(t, fs, "/d/"+name(12, segment.LogSuffix), v2Batch(t, 12, 2))
	write(t, fs, "/d/"+name(10, segment.LogSuffix+segment.SwapSuffix), v2Batch(t, 10, 4))
	for _, b := range []int64{0, 10, 12} {
		write(t, fs, "/d/"+name(b, segment.IndexSuffix))
		write(t, fs, "/d/"+name(b, segment.TimeIndexSuffix))
	}
	write(t, fs, "/d/"+name(12, segment.TxnIndexSuffix))
	for _, kind := range []string{segment.IndexSuffix, segment.TimeIndexSuffix, segment.TxnIndexSuffix} {
		write(t, fs, "/d/"+name(5, kind))
	}
	write(t, fs, "/d/"+name(20, segment.IndexSuffix))
	write(t, fs, "/d/"+name(20, segment.TimeIndexSuffix))
	write(t, fs, "/d/"+name(30, segment.TxnIndexSuffix))
	write(t, fs, "/d/"+name(40, segment.IndexSuffix+segment.DeletedSuffix))
	fs.SyncAll()

	p, err := Make(fs, "/d")
	require.NoError(t, err)
	require.Empty(t, p.Bad)
	require.Equal(t, []int64{0, 10}, p.Bases)
	orphans := []string{
		name(5, segment.IndexSuffix), name(5, segment.TimeIndexSuffix), name(5, segment.TxnIndexSuffix),
		name(20, segment.IndexSuffix), name(20, segment.TimeIndexSuffix), name(30, segment.TxnIndexSuffix),
	}
	require.Equal(t, orphans, p.Orphans)
	require.True(t, p.Work())

	require.NoError(t, p.Apply(fs, "/d", slog.New(slog.DiscardHandler)))
	survived := fs.CrashClone(vfs.CrashOptions{}) // the removals were synced
	names, err := survived.List("/d")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{
		name(0, segment.LogSuffix), name(0, segment.IndexSuffix), name(0, segment.TimeIndexSuffix),
		name(10, segment.LogSuffix), // the swap's; its indexes are rebuilt when opened
	}, names)

	// Only orphans: the plan has work of its own.
	fs2 := vfs.NewMem()
	require.NoError(t, fs2.MkdirAll("/d", 0o755))
	write(t, fs2, "/d/"+name(0, segment.LogSuffix), v2Batch(t, 0, 1))
	write(t, fs2, "/d/"+name(7, segment.TimeIndexSuffix))
	p2, err := Make(fs2, "/d")
	require.NoError(t, err)
	require.Equal(t, []string{name(7, segment.TimeIndexSuffix)}, p2.Orphans)
	require.True(t, p2.Work())
}
