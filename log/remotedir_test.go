package log_test

import (
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/index/vfs/vfstest"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/remotetest"
)

func TestDirRemoteStorageConformance(t *testing.T) {
	remotetest.Run(t, func(t *testing.T) plog.RemoteStorage {
		return plog.NewDirRemoteStorage(filepath.Join(t.TempDir(), "remote"), nil)
	})
}

func TestDirRemoteStorageConformanceMemFS(t *testing.T) {
	remotetest.Run(t, func(t *testing.T) plog.RemoteStorage {
		return plog.NewDirRemoteStorage("/remote", vfstest.NewMem())
	})
}
