package log_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// expireAllSealed is a retention policy that finds every sealed segment
// expired (a retention.ms or retention.bytes far below the log's age or
// size).
type expireAllSealed struct{}

func (expireAllSealed) Expired(v *plog.View) int { return len(v.Segments()) - 1 }

// TestTierRetentionKeepsUncopiedSegments: in a tiered partition a local
// segment is deleted only once its copy is recorded (law 14: nothing
// uncopied is lost), whoever deletes it: Kafka's deleteOldSegments skips
// every segment of a remote-enabled log past the highest offset in remote
// storage, whatever rule expired it. The partition's own retention
// (DeleteExpired, as compaction.Retention or a DirRunner runs it) used to
// delete the segments the store had not taken yet, so that the whole log
// lost them while keeping the older copies, a hole no read could serve.
func TestTierRetentionKeepsUncopiedSegments(t *testing.T) {
	mem := vfs.NewMem()
	st := &flakyStore{RemoteStorage: plog.NewDirRemoteStorage("/remote", mem)}
	cfg := tierDirConfig(mem, st)
	cfg.Remote.LocalRetentionBytes = 0 // the partition's own retention alone deletes local segments
	d, err := plog.OpenDir("/data", cfg)
	require.NoError(t, err)
	defer d.Close()
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	appendN(t, p, 40)
	d.RunTierPass()
	copied := p.Stats().Remote.Segments
	require.Positive(t, copied)

	st.down.Store(true)
	appendN(t, p, 40)
	d.RunTierPass()
	s := p.Stats()
	require.Equal(t, copied, s.Remote.Segments, "nothing copied while the store is down")
	require.Positive(t, s.Remote.CopyLagSegments)
	st.down.Store(false)
	want := readAllBatches(t, p, 0)

	st.down.Store(true)
	res, err := p.DeleteExpired(context.Background(), expireAllSealed{})
	require.NoError(t, err)
	s = p.Stats()
	assert.Equal(t, copied, res.SegmentsDeleted, "only the copied segments go: %+v", res)
	assert.Equal(t, s.Segments, s.Remote.CopyLagSegments+1, "an uncopied segment was deleted locally")
	st.down.Store(false)
	d.RunTierPass()
	assert.Equal(t, want, readAllBatches(t, p, 0), "the whole log lost records")
}
