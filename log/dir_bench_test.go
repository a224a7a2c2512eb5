package log_test

import (
	"fmt"
	"github.com/stretchr/testify/require"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// countingFS counts the bytes read from files of a log directory and the
// files opened, split into segment data (.log) and the rest.
type countingFS struct {
	vfs.FS
	logBytes, otherBytes, opens atomic.Int64
}

func (c *countingFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	c.opens.Add(1)
	n := &c.otherBytes
	if strings.HasSuffix(name, ".log") {
		n = &c.logBytes
	}
	return &countingFile{File: f, n: n}, nil
}

func (c *countingFS) Open(name string) (vfs.File, error) {
	f, err := c.FS.Open(name)
	return c.wrap(name, f, err)
}

func (c *countingFS) OpenReadWrite(name string) (vfs.File, error) {
	f, err := c.FS.OpenReadWrite(name)
	return c.wrap(name, f, err)
}

func (c *countingFS) reset() { c.logBytes.Store(0); c.otherBytes.Store(0); c.opens.Store(0) }

type countingFile struct {
	vfs.File
	n *atomic.Int64
}

func (f *countingFile) Read(b []byte) (int, error) {
	k, err := f.File.Read(b)
	f.n.Add(int64(k))
	return k, err
}

func (f *countingFile) ReadAt(b []byte, off int64) (int, error) {
	k, err := f.File.ReadAt(b, off)
	f.n.Add(int64(k))
	return k, err
}

// benchDirConfig is the partitions' configuration: small indexes (MemFS
// allocates them whole).
func benchDirConfig(fs vfs.FS, threads int) plog.DirConfig {
	return plog.DirConfig{Config: plog.Config{FS: fs, SegmentIndexBytes: 4096, SegmentBytes: 64 << 10}, RecoveryThreads: threads}
}

// benchDir writes a log directory of n partitions, each with batches
// 1 KiB batches, in a MemFS, and closes it cleanly.
func benchDir(b *testing.B, n, batches int) *vfs.MemFS {
	mem := vfs.NewMem()
	writeBenchDir(b, mem, "/logs", n, batches)
	return mem
}

// writeBenchDir writes the log directory of benchDir at path of fs.
func writeBenchDir(b *testing.B, fs vfs.FS, path string, n, batches int) {
	d, err := plog.OpenDir(path, benchDirConfig(fs, 2))
	require.NoError(b, err)
	bt := logtest.MakeBatch(8, 100, 1_700_000_000_000, 1)
	for i := range n {
		p, err := d.CreatePartition(fmt.Sprintf("topic%d", i%10), int32(i))
		require.NoError(b, err)
		for range batches {
			_, err := p.AppendBatch(append([]byte(nil), bt...))
			require.NoError(b, err)
		}
	}
	require.NoError(b, d.Close())
}

// BenchmarkOpenDirClean opens a cleanly closed log directory of many
// small partitions (1 KiB each) and reports the bytes read from segment
// files (.log) and from everything else per OpenDir, next to
// BenchmarkReadRootCheckpoints, which reads only the root files.
func BenchmarkOpenDirClean(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			cfs := &countingFS{FS: benchDir(b, n, 1)}
			cfg := benchDirConfig(cfs, 1)
			b.ResetTimer()
			for b.Loop() {
				cfs.reset()
				d, err := plog.OpenDir("/logs", cfg)
				require.NoError(b, err)
				b.StopTimer()
				b.ReportMetric(float64(cfs.logBytes.Load()), "logB/op")
				b.ReportMetric(float64(cfs.otherBytes.Load()), "otherB/op")
				b.ReportMetric(float64(cfs.opens.Load()), "opens/op")
				require.NoError(b, d.Close())
				b.StartTimer()
			}
		})
	}
}

// BenchmarkOpenDirCleanOS is BenchmarkOpenDirClean on the operating
// system's filesystem (indexes mapped; the page cache is warm).
func BenchmarkOpenDirCleanOS(b *testing.B) {
	const n = 1000
	dir := filepath.Join(b.TempDir(), "logs")
	writeBenchDir(b, vfs.Default, dir, n, 1)
	cfg := benchDirConfig(vfs.Default, 1)
	for b.Loop() {
		d, err := plog.OpenDir(dir, cfg)
		require.NoError(b, err)
		b.StopTimer()
		require.NoError(b, d.Close())
		b.StartTimer()
	}
}

// BenchmarkReadRootCheckpoints reads the four root checkpoint files of the
// directories BenchmarkOpenDirClean opens: the floor of a clean open.
func BenchmarkReadRootCheckpoints(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			mem := benchDir(b, n, 1)
			var bytes int64
			for b.Loop() {
				bytes = 0
				for _, name := range []string{checkpoint.RecoveryPointFile, checkpoint.LogStartOffsetFile,
					checkpoint.ReplicationFile, checkpoint.CleanerOffsetFile} {
					fi, err := mem.Stat(filepath.Join("/logs", name))
					require.NoError(b, err)
					bytes += fi.Size()
					_, err = checkpoint.ReadOffsets(mem, filepath.Join("/logs", name))
					require.NoError(b, err)
				}
			}
			b.ReportMetric(float64(bytes), "B/op-read")
		})
	}
}

// BenchmarkOpenDirUnclean opens a log directory after a crash with no
// recovery point: every partition (100 of 256 KiB) is recovered from its
// first batch, by 1 and by 2 recovery threads, in a MemFS and on the
// operating system's filesystem (page cache warm).
func BenchmarkOpenDirUnclean(b *testing.B) {
	const n, batches = 100, 256
	osDir := filepath.Join(b.TempDir(), "logs")
	writeBenchDir(b, vfs.Default, osDir, n, batches)
	for _, fsys := range []struct {
		name string
		fs   vfs.FS
		dir  string
	}{{"mem", benchDir(b, n, batches), "/logs"}, {"os", vfs.Default, osDir}} {
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("fs=%s/threads=%d", fsys.name, threads), func(b *testing.B) {
				benchUnclean(b, fsys.fs, fsys.dir, threads, int64(n*batches*len(logtest.MakeBatch(8, 100, 0, 1))))
			})
		}
	}
}

// benchUnclean times OpenDir of dir after removing its clean-shutdown
// marker and recovery points.
func benchUnclean(b *testing.B, fs vfs.FS, dir string, threads int, size int64) {
	cfg := benchDirConfig(fs, threads)
	b.SetBytes(size)
	for b.Loop() {
		b.StopTimer()
		for _, name := range []string{checkpoint.CleanShutdownFile, checkpoint.RecoveryPointFile} {
			require.NoError(b, fs.Remove(filepath.Join(dir, name)))
		}
		b.StartTimer()
		d, err := plog.OpenDir(dir, cfg)
		require.NoError(b, err)
		b.StopTimer()
		require.NoError(b, d.Close())
		b.StartTimer()
	}
}
