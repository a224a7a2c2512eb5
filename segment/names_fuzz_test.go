package segment

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParseFileName parses arbitrary names as segment file names (Open's
// directory listing goes through it): it never panics, and a name it
// accepts is FileName's output for the base and suffix it returns (base
// not negative, the suffix one of the kinds, possibly with one temporary
// suffix), so no two names parse the same.
func FuzzParseFileName(f *testing.F) {
	for _, s := range []string{
		FileName(0, LogSuffix), FileName(42, IndexSuffix), FileName(7, TimeIndexSuffix+DeletedSuffix),
		FileName(1<<62, TxnIndexSuffix+SwapSuffix), FileName(3, LogSuffix+CleanedSuffix),
		FileName(9, SnapshotSuffix), FileName(0, LogSuffix) + SpareSuffix, "99999999999999999999.log",
		"0000000000000000000a.log", "00000000000000000000", "00000000000000000000.", "leader-epoch-checkpoint",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		b, suffix, ok := ParseFileName(name)
		if !ok {
			require.Zero(t, b)
			require.Empty(t, suffix)
			return
		}
		require.GreaterOrEqual(t, b, int64(0))
		require.Equal(t, name, FileName(b, suffix), "accepted a name FileName does not write")
		require.True(t, strings.HasPrefix(suffix, "."))
		require.LessOrEqual(t, strings.Count(suffix, "."), 2)
	})
}
