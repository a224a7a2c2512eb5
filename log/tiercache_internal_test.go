package log

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRemoteCacheBoundsEmptyEntries: empty pieces (the transaction indexes
// of copies without aborted transactions, which read_committed reads
// fetch copy after copy) count against the cache's limit too, so their
// number stays bounded.
func TestRemoteCacheBoundsEmptyEntries(t *testing.T) {
	c := newRemoteCache(1000)
	tp := TopicPartition{Topic: "t"}
	for i := range 100 {
		b, err := c.get(remoteCacheKey{copyID: NewRemoteSegmentID(tp), kind: RemoteTxnIndex}, func() ([]byte, error) { return nil, nil })
		require.NoError(t, err, "entry %d", i)
		assert.Empty(t, b)
	}
	assert.LessOrEqual(t, len(c.m), int(1000/remoteCacheEntryBytes))
	assert.LessOrEqual(t, c.used, c.limit)
}
