package s3remote_test

import (
	"errors"
	"os"
	"testing"
	"time"

	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/remotetest"
	"github.com/partlog/partlog/log/s3remote/weedtest"
)

// tierKillEndpointEnv gives TestTierKillSeaweedFS's child the S3 gateway's
// address (the parent's server).
const tierKillEndpointEnv = "PARTLOG_TIER_KILL_S3"

// openTierKillStore is the store of the kill test in the parent and the
// child: the test bucket on the server at $PARTLOG_TIER_KILL_S3, under a
// prefix of its own (the test directory is not needed).
func openTierKillStore(string) (plog.RemoteStorage, error) {
	endpoint := os.Getenv(tierKillEndpointEnv)
	if endpoint == "" {
		return nil, errors.New(tierKillEndpointEnv + " is not set")
	}
	return weedtest.NewStore(endpoint, "kill/")
}

// TestTierKillSeaweedFSHelperProcess is not a test: TestTierKillSeaweedFS
// runs the test binary again with -test.run selecting it
// (remotetest.KillHelper).
func TestTierKillSeaweedFSHelperProcess(t *testing.T) {
	remotetest.KillHelper(t, openTierKillStore)
}

// TestTierKillSeaweedFS is log.TestTierKill against SeaweedFS
// (remotetest.Kill): a child process appends to a Dir tiered to the S3
// store, its copier running a pass every millisecond, and is killed with
// SIGKILL, every other kill within 4 ms of a copy's start; after each kill
// every acknowledged batch reads back from offset 0 and, once the next
// start's passes have run, the bucket lists exactly the recorded copies.
// 24 kills (8 with -short; PARTLOG_TIER_KILLS sets the count).
func TestTierKillSeaweedFS(t *testing.T) {
	if os.Getenv(remotetest.KillDirEnv) != "" {
		t.Skip("in the helper process")
	}
	w := weedtest.Start(t)
	t.Setenv(tierKillEndpointEnv, w.Endpoint()) // the child inherits it
	start := time.Now()
	remotetest.Kill(t, remotetest.KillConfig{
		Helper: "TestTierKillSeaweedFSHelperProcess",
		Open:   openTierKillStore,
	})
	t.Logf("the kills took %v", time.Since(start).Round(time.Millisecond))
}
