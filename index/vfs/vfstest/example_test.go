package vfstest_test

import (
	"errors"
	"fmt"
	"io"

	"github.com/partlog/partlog/index/vfs/vfstest"
)

// ExampleMemFS_CrashClone appends to a file, syncs part of it, and looks
// at what a crash keeps.
func ExampleMemFS_CrashClone() {
	mem := vfstest.NewMem()
	if err := mem.MkdirAll("/p", 0o755); err != nil {
		panic(err)
	}
	f, err := mem.Create("/p/00000000000000000000.log")
	if err != nil {
		panic(err)
	}
	f.Write([]byte("synced|"))
	f.Sync()
	mem.SyncAll() // make the directory entries durable too
	f.Write([]byte("unsynced"))

	crashed := mem.CrashClone(vfstest.CrashOptions{UnsyncedDataPercent: 0})
	g, err := crashed.Open("/p/00000000000000000000.log")
	if err != nil {
		panic(err)
	}
	b, _ := io.ReadAll(g)
	fmt.Printf("%q\n", b)
	// Output: "synced|"
}

// ExampleInjector fails the first Sync of a scenario.
func ExampleInjector() {
	in := vfstest.NewInjector(vfstest.NewMem())
	in.FailNth(0, vfstest.Kinds(vfstest.OpSync))

	f, _ := in.Create("/f")
	f.Write([]byte("data"))
	err := f.Sync()
	fmt.Println(errors.Is(err, vfstest.ErrInjected), in.Injected(), in.Ops())
	fmt.Println(err)
	// Output:
	// true 1 3
	// sync /f: partlog/vfs: injected error
}
