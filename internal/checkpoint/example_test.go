package checkpoint_test

import (
	"fmt"
	"path/filepath"

	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/vfs"
)

// Example writes a partition's recovery point and leader epochs, and reads
// them back.
func Example() {
	fs := vfs.NewMem()
	dir := "/data/myTopic-0"
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		panic(err)
	}
	topic, partition, _ := checkpoint.ParseDirName(filepath.Base(dir))

	rp := filepath.Join(dir, checkpoint.RecoveryPointFile)
	if err := checkpoint.WriteOffset(fs, rp, topic, partition, 38); err != nil {
		panic(err)
	}
	off, found, err := checkpoint.ReadOffset(fs, rp, topic, partition)
	fmt.Println(off, found, err)

	ep := filepath.Join(dir, checkpoint.LeaderEpochFile)
	if err := checkpoint.WriteLeaderEpochs(fs, ep, []checkpoint.EpochEntry{{Epoch: 0, StartOffset: 38}}); err != nil {
		panic(err)
	}
	f, _ := fs.Open(ep)
	b := make([]byte, 64)
	n, _ := f.Read(b)
	fmt.Printf("%q\n", b[:n])
	// Output:
	// 38 true <nil>
	// "0\n1\n0 38\n"
}
