package log_test

import (
	"testing"

	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/remotetest"
)

// openTierKillStore is the store of the kill test: directory-backed, in
// dir/remote.
func openTierKillStore(dir string) (plog.RemoteStorage, error) {
	return plog.NewDirRemoteStorage(dir+"/remote", nil), nil
}

// TestTierKillHelperProcess is not a test: TestTierKill runs the test
// binary again with -test.run selecting it (remotetest.KillHelper).
func TestTierKillHelperProcess(t *testing.T) {
	remotetest.KillHelper(t, openTierKillStore)
}

// TestTierKill kills the copier (remotetest.Kill) tiering to a
// directory-backed store: a child process appends to a tiered Dir whose
// copier runs a pass every millisecond, the parent kills it with SIGKILL,
// every other kill within 4 ms of a copy's start, and checks after each
// kill that every acknowledged batch reads back from offset 0 and, after
// the next start's pass (Dir.RunTierPass), that the store holds exactly the
// recorded copies. 24 kills (8 with -short; PARTLOG_TIER_KILLS sets the
// count).
func TestTierKill(t *testing.T) {
	remotetest.Kill(t, remotetest.KillConfig{
		Helper: "TestTierKillHelperProcess",
		Open:   openTierKillStore,
		Pass:   (*plog.Dir).RunTierPass,
	})
}
