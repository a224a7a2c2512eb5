package log_test

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// tierReopenCheck opens the Dir a crash of fs now leaves, runs a pass and
// checks that every batch of want reads back from offset 0 and that the
// store holds exactly the copies the metadata records (no orphan).
func tierReopenCheck(t *testing.T, where string, fs *vfs.MemFS, want []byte) {
	t.Helper()
	crashed := fs.CrashClone(vfs.CrashOptions{})
	st := plog.NewDirRemoteStorage("/remote", crashed)
	d, err := plog.OpenDir("/data", tierDirConfig(crashed, st))
	require.NoError(t, err, where)
	defer d.Close()
	p := d.Partition("t", 0)
	require.Equal(t, want, readAllBatches(t, p, 0)[:len(want)], "%s: reads after the crash", where)
	d.RunTierPass()
	require.Equal(t, want, readAllBatches(t, p, 0)[:len(want)], "%s: reads after the next pass", where)
	ids, err := st.ListSegments(context.Background(), plog.TopicPartition{Topic: "t", Partition: 0})
	require.NoError(t, err)
	assert.Len(t, ids, p.Stats().Remote.Segments, "%s: the store holds exactly the recorded copies", where)
	assert.Zero(t, p.Stats().Remote.CopyLagSegments, "%s: everything waiting is copied", where)
}

// TestTierDiskFull: a disk-full (ENOSPC) copier. Whether the local disk
// refuses the remote-log-metadata rewrites (every one, or only the one
// recording a finished copy) or the directory store's disk refuses the
// copies' writes: appends go on, no local segment is deleted while its copy
// is not recorded, Stats().Remote counts the failures, every record stays
// readable, a crash then leaves no orphan object; once space returns, the
// next pass copies what waited and local retention catches up, and a crash
// after that loses nothing either.
func TestTierDiskFull(t *testing.T) {
	isMeta := func(op vfs.Op) bool { return strings.Contains(op.Path, "remote-log-metadata") }
	writes := vfs.Kinds(vfs.OpCreate, vfs.OpWrite, vfs.OpWriteAt, vfs.OpSync, vfs.OpRename, vfs.OpMkdirAll,
		vfs.OpTruncate, vfs.OpPreallocate)
	cases := []struct {
		name   string
		local  bool // the rule is on the Dir's filesystem, else the store's
		rule   vfs.Rule
		passes int // passes while the disk is full
	}{
		{"every metadata write", true, vfs.Rule{Kinds: vfs.Kinds(vfs.OpWrite), Match: isMeta, Times: -1}, 2},
		// The first write records the copy "copying", the second "copied".
		{"the copied record's write", true, vfs.Rule{Kinds: vfs.Kinds(vfs.OpWrite), Match: isMeta, Skip: 1}, 1},
		{"every metadata write from the copied record's", true, vfs.Rule{Kinds: vfs.Kinds(vfs.OpWrite), Match: isMeta, Skip: 1, Times: -1}, 2},
		{"the store's writes", false, vfs.Rule{Kinds: writes, Times: -1}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			local, remote := vfs.NewInjector(mem), vfs.NewInjector(mem)
			st := plog.NewDirRemoteStorage("/remote", remote)
			d, err := plog.OpenDir("/data", tierDirConfig(local, st))
			require.NoError(t, err)
			defer func() { _ = d.Close() }()
			p, err := d.CreatePartition("t", 0)
			require.NoError(t, err)
			appendN(t, p, 30)
			d.RunTierPass()
			start := p.LogStartOffset()
			require.Positive(t, start)
			copied := p.Stats().Remote.Segments

			in := local
			if !c.local {
				in = remote
			}
			c.rule.Err = syscall.ENOSPC
			in.Add(c.rule)
			appendN(t, p, 40)
			require.NoError(t, p.Sync())
			want := readAllBatches(t, p, 0)
			for range c.passes {
				d.RunTierPass()
				appendN(t, p, 5) // appends go on
			}
			require.Positive(t, in.Injected(), "the disk was full")
			s := p.Stats()
			assert.Equal(t, start, s.LogStartOffset, "no local segment is deleted while its copy is not recorded")
			assert.Equal(t, copied, s.Remote.Segments)
			assert.Positive(t, s.Remote.CopyFailures)
			assert.Positive(t, s.Remote.CopyLagSegments)
			require.Equal(t, want, readAllBatches(t, p, 0)[:len(want)], "every record stays readable")
			require.NoError(t, p.Sync())
			tierReopenCheck(t, "crash while the disk is full", mem, want)

			in.Reset() // space returns
			d.RunTierPass()
			s = p.Stats()
			assert.Greater(t, s.Remote.Segments, copied, "the copies resumed")
			assert.Zero(t, s.Remote.CopyLagSegments)
			assert.Greater(t, s.LogStartOffset, start, "local retention caught up")
			assert.Equal(t, 1, s.Segments, "only the active segment stays local")
			want = readAllBatches(t, p, 0)
			ids, err := st.ListSegments(context.Background(), plog.TopicPartition{Topic: "t", Partition: 0})
			require.NoError(t, err)
			assert.Len(t, ids, s.Remote.Segments, "the store holds exactly the recorded copies")
			tierReopenCheck(t, "crash once space returned", mem, want)
		})
	}
}
