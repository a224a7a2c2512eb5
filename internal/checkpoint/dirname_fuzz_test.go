package checkpoint

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParseDirName splits arbitrary directory names as partition
// directories ("topic-partition"): it never panics, and a name it accepts
// is the valid topic it returns, "-", and the partition in decimal (no
// sign, no leading zero beyond "0" itself unless ParseInt accepts it: the
// check is that the parts come from the name and the partition is in
// range).
func FuzzParseDirName(f *testing.F) {
	for _, s := range []string{"myTopic-0", "__consumer_offsets-17", "a-b-c-2147483647", "t-2147483648", "-1", "t--1", "t-", "t-+1", "t- 1", "t-01", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		topic, p, ok := ParseDirName(name)
		if !ok {
			require.Empty(t, topic)
			require.Zero(t, p)
			return
		}
		require.GreaterOrEqual(t, p, int32(0))
		require.True(t, ValidTopic(topic), "accepted topic %q", topic)
		require.Less(t, len(topic), len(name))
		require.Equal(t, topic, name[:len(topic)])
		require.Equal(t, byte('-'), name[len(topic)])
		got, err := strconv.ParseInt(name[len(topic)+1:], 10, 32)
		require.NoError(t, err, "accepted partition field %q", name[len(topic)+1:])
		require.Equal(t, int64(p), got)
	})
}
