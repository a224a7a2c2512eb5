package index

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/vfs"
)

// TestFaultInjection fails the k-th filesystem operation (of any kind,
// including the mapping) of an open/append/flush/seal/unseal/close
// scenario, for k = 0, 1, 2, ... until nothing is injected. Only the
// injected error is ever returned, nothing panics, an operation that
// failed left the index unchanged (retrying it succeeds and the final
// files hold exactly the expected entries), and a Close that failed left
// files that reopen without panicking.
func TestFaultInjection(t *testing.T) {
	const n = 21
	wantOffset := make([]byte, 0, n*OffsetEntrySize)
	wantTime := make([]byte, 0, n*TimeEntrySize)
	for i := range n {
		wantOffset = append(wantOffset, enc32(int32(2*i), int32(100*i))...)
		wantTime = append(wantTime, encTime(int64(1000+i), int32(2*i))...)
	}
	for k := int64(0); ; k++ {
		mem := vfs.NewMem()
		require.NoError(t, mem.MkdirAll("/d", 0o755))
		mem.SyncAll()
		in := vfs.NewInjector(mem)
		in.FailNth(k, vfs.AllOps)
		closeErr, err := faultScenario(in, n)
		require.NoError(t, err, "k=%d", k)
		if in.Injected() == 0 {
			require.NoError(t, closeErr, "k=%d: nothing injected but Close =", k)
			t.Logf("scenario has %d operations", k)
			break
		}
		if closeErr != nil {
			require.ErrorIs(t, closeErr, vfs.ErrInjected, "k=%d: Close = %v, not the injected error", k, closeErr)
			// An untrimmed file reopens; SanityCheck may see its zero
			// tail, and must say so with a corruption error.
			for _, p := range []string{"/d/0.index", "/d/0.timeindex"} {
				idx, err := OpenOffsetIndex(mem, p, 0, 4096)
				require.NoError(t, err, "k=%d: reopen %s", k, p)
				err = idx.SanityCheck()
				if err != nil {
					require.True(t, base.IsCorruption(err), "k=%d: %v", k, err)
				}
				_ = idx.Lookup(7)
				_ = idx.Delete()
			}
			continue
		}
		got := readFile(t, mem, "/d/0.index")
		require.Equal(t, string(wantOffset), string(got), "k=%d: offset index\n% x\nwant\n% x", k, got, wantOffset)
		got = readFile(t, mem, "/d/0.timeindex")
		require.Equal(t, string(wantTime), string(got), "k=%d: time index\n% x\nwant\n% x", k, got, wantTime)
	}
}

// faultScenario runs the scenario on fsys, retrying each failed operation
// once (the injector fails one operation). It returns the error of the
// Closes (not retried: Close releases everything even when it fails) and
// an error describing any violated rule.
func faultScenario(fsys vfs.FS, n int) (closeErr, err error) {
	injected := func(what string, err error) error {
		if err != nil && !errors.Is(err, vfs.ErrInjected) {
			return fmt.Errorf("%s: %w, not the injected error", what, err)
		}
		return nil
	}
	retry := func(what string, f func() error) error {
		if err := f(); err != nil {
			if e := injected(what, err); e != nil {
				return e
			}
			if err := f(); err != nil {
				return fmt.Errorf("%s retried: %w", what, err)
			}
		}
		return nil
	}
	var idx *OffsetIndex
	var tidx *TimeIndex
	if err := retry("OpenOffsetIndex", func() (err error) {
		idx, err = OpenOffsetIndex(fsys, "/d/0.index", 0, 16*OffsetEntrySize)
		return err
	}); err != nil {
		return nil, err
	}
	if err := retry("OpenTimeIndex", func() (err error) {
		tidx, err = OpenTimeIndex(fsys, "/d/0.timeindex", 0, 16*TimeEntrySize)
		return err
	}); err != nil {
		return nil, err
	}
	for i := range n {
		before, tbefore := fmt.Sprint(offsetEntries(idx)), fmt.Sprint(timeEntries(tidx))
		if err := idx.Append(int64(2*i), int64(100*i)); err != nil {
			if e := injected("Append", err); e != nil {
				return nil, e
			}
			if after := fmt.Sprint(offsetEntries(idx)); after != before {
				return nil, fmt.Errorf("failed Append changed the entries: %s -> %s", before, after)
			}
			if err := idx.Append(int64(2*i), int64(100*i)); err != nil {
				return nil, fmt.Errorf("Append retried: %w", err)
			}
		}
		if err := tidx.MaybeAppend(int64(1000+i), int64(2*i), false); err != nil {
			if e := injected("MaybeAppend", err); e != nil {
				return nil, e
			}
			if after := fmt.Sprint(timeEntries(tidx)); after != tbefore {
				return nil, fmt.Errorf("failed MaybeAppend changed the entries: %s -> %s", tbefore, after)
			}
			if err := tidx.MaybeAppend(int64(1000+i), int64(2*i), false); err != nil {
				return nil, fmt.Errorf("MaybeAppend retried: %w", err)
			}
		}
		if i == 10 {
			for what, f := range map[string]func() error{
				"Flush": idx.Flush, "time Flush": tidx.Flush,
				"Trim": idx.TrimToValidSize, "time Trim": tidx.TrimToValidSize,
			} {
				if err := retry(what, f); err != nil {
					return nil, err
				}
			}
			if err := retry("Resize", func() error { return idx.Resize(32 * OffsetEntrySize) }); err != nil {
				return nil, err
			}
			if err := retry("time Resize", func() error { return tidx.Resize(32 * TimeEntrySize) }); err != nil {
				return nil, err
			}
		}
	}
	if err := retry("Flush", idx.Flush); err != nil {
		return nil, err
	}
	if err := retry("time Flush", tidx.Flush); err != nil {
		return nil, err
	}
	closeErr = errors.Join(idx.Close(), tidx.Close())
	if closeErr != nil {
		if e := injected("Close", closeErr); e != nil {
			return nil, e
		}
	}
	return closeErr, nil
}

// TestCrash appends entries, flushes some of them, and crashes the
// in-memory filesystem at random (unsynced writes kept, cut or torn). The
// reopened index either fails SanityCheck with a corruption error (the
// KAFKA-12734 zero tail) or holds a prefix of what was appended that
// includes everything flushed; lookups never panic.
func TestCrash(t *testing.T) {
	var lost, corrupt, passed int
	defer func() { t.Logf("file lost %d, zero tail caught %d, prefix kept %d", lost, corrupt, passed) }()
	for seed := range uint64(200) {
		mem := vfs.NewMem()
		require.NoError(t, mem.MkdirAll("/d", 0o755))
		mem.SyncAll()
		const slots = 16
		idx := openOffset(t, mem, "/d/0.index", 0, slots*OffsetEntrySize)
		tidx := openTime(t, mem, "/d/0.timeindex", 0, (slots+1)*TimeEntrySize)
		dirSynced := seed%2 == 0
		if dirSynced {
			d, err := mem.OpenDir("/d")
			require.NoError(t, err)
			require.NoError(t, d.Sync())
			_ = d.Close()
		}
		n := int(seed % (slots + 1))
		flushed := 0
		for i := range n {
			require.NoError(t, idx.Append(int64(3*i+1), int64(50*i)))
			require.NoError(t, tidx.MaybeAppend(int64(1000+7*i), int64(3*i+1), false))
			if (seed/3+uint64(i))%5 == 0 {
				require.NoError(t, idx.Flush())
				require.NoError(t, tidx.Flush())
				flushed = i + 1
			}
		}
		if seed%7 == 0 { // a clean seal
			require.NoError(t, idx.TrimToValidSize())
			require.NoError(t, idx.Flush())
			require.NoError(t, tidx.TrimToValidSize())
			require.NoError(t, tidx.Flush())
			flushed = n
		}
		crashed := mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 50, TornPercent: 50, Seed: seed})
		if _, err := crashed.Stat("/d/0.index"); err != nil {
			require.False(t, dirSynced, "seed %d: synced index file lost: %v", seed, err)
			lost++
			continue
		}
		checkCrashedTime(t, crashed, seed, dirSynced, flushed)
		re := openOffset(t, crashed, "/d/0.index", 0, slots*OffsetEntrySize)
		_ = re.Lookup(int64(seed))
		if err := re.SanityCheck(); err != nil {
			require.True(t, base.IsCorruption(err), "seed %d: SanityCheck = %v", seed, err)
			corrupt++
			continue
		}
		got := offsetEntries(re)
		if len(got) < flushed && flushed > 0 {
			require.False(t, dirSynced, "seed %d: %d entries survived, %d were flushed", seed, len(got), flushed)
		}
		for i, e := range got {
			require.Equal(t, OffsetEntry{int64(3*i + 1), int64(50 * i)}, e, "seed %d: entry %d = %v after a crash that passed SanityCheck (%d appended, %d flushed)", seed, i, e, n, flushed)
		}
		passed++
		_ = re.Close()
		_ = idx.Close()
		_ = tidx.Close()
	}
}

// checkCrashedTime is TestCrash's check of the time index.
func checkCrashedTime(t *testing.T, crashed *vfs.MemFS, seed uint64, dirSynced bool, flushed int) {
	t.Helper()
	if _, err := crashed.Stat("/d/0.timeindex"); err != nil {
		require.False(t, dirSynced, "seed %d: synced time index file lost: %v", seed, err)
		return
	}
	re := openTime(t, crashed, "/d/0.timeindex", 0, 17*TimeEntrySize)
	defer re.Close()
	_ = re.Lookup(int64(seed))
	if err := re.SanityCheck(); err != nil {
		require.True(t, base.IsCorruption(err), "seed %d: time SanityCheck = %v", seed, err)
		return
	}
	got := timeEntries(re)
	if len(got) < flushed && flushed > 0 {
		require.False(t, dirSynced, "seed %d: %d time entries survived, %d were flushed", seed, len(got), flushed)
	}
	for i, e := range got {
		require.Equal(t, TimeEntry{int64(1000 + 7*i), int64(3*i + 1)}, e, "seed %d: time entry %d = %v after a crash that passed SanityCheck", seed, i, e)
	}
}

// TestCrashAcrossSealUnseal seals (trims) and unseals (grows) the indexes
// repeatedly, crash-cloning the filesystem between the steps: a file that
// shrinks and grows back with a crash image taken in between (this once
// broke vfs.MemFS). Every clone reopens; a clone taken right after a
// synced seal holds exactly the entries.
func TestCrashAcrossSealUnseal(t *testing.T) {
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll("/d", 0o755))
	mem.SyncAll()
	idx := openOffset(t, mem, "/d/0.index", 0, 30*OffsetEntrySize)
	defer idx.Close()
	tidx := openTime(t, mem, "/d/0.timeindex", 0, 30*TimeEntrySize)
	defer tidx.Close()
	d, err := mem.OpenDir("/d")
	require.NoError(t, err)
	require.NoError(t, d.Sync())
	_ = d.Close()
	n := 0
	for round := range uint64(8) {
		for range 3 {
			require.NoError(t, idx.Append(int64(2*n), int64(10*n)))
			require.NoError(t, tidx.MaybeAppend(int64(100+n), int64(2*n), false))
			n++
		}
		for _, err := range []error{idx.TrimToValidSize(), tidx.TrimToValidSize(), idx.Flush(), tidx.Flush()} {
			require.NoError(t, err)
		}
		sealed := mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 50, TornPercent: 50, Seed: round})
		re := openOffset(t, sealed, "/d/0.index", 0, 30*OffsetEntrySize)
		tre := openTime(t, sealed, "/d/0.timeindex", 0, 30*TimeEntrySize)
		require.NoError(t, errors.Join(re.SanityCheck(), tre.SanityCheck()), "round %d", round)
		require.Equal(t, n, re.Entries(), "round %d: sealed clone has %d and %d entries, want %d", round, re.Entries(), tre.Entries(), n)
		require.Equal(t, n, tre.Entries(), "round %d: sealed clone has %d and %d entries, want %d", round, re.Entries(), tre.Entries(), n)
		require.Equal(t, idx.LastEntry(), re.LastEntry(), "round %d: sealed clone has %d and %d entries, want %d", round, re.Entries(), tre.Entries(), n)
		require.Equal(t, tidx.LastEntry(), tre.LastEntry(), "round %d: sealed clone has %d and %d entries, want %d", round, re.Entries(), tre.Entries(), n)
		_ = re.Close()
		_ = tre.Close()
		require.NoError(t, errors.Join(idx.Resize(30*OffsetEntrySize), tidx.Resize(30*TimeEntrySize)))
		torn := mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 50, TornPercent: 50, Seed: 100 + round})
		re = openOffset(t, torn, "/d/0.index", 0, 30*OffsetEntrySize)
		err := re.SanityCheck()
		if err != nil {
			require.True(t, base.IsCorruption(err), "round %d: %v", round, err)
		}
		_ = re.Lookup(int64(n))
		_ = re.Close()
	}
}

// TestCreateWritesFirstPage: a new index writes zeros over its first page
// through the file once it is preallocated (so that the first entry's
// store through the mapping does not convert an unwritten extent in a
// page fault), and a failure of that write fails the open and leaves no
// file behind.
func TestCreateWritesFirstPage(t *testing.T) {
	for _, tt := range []struct {
		name    string
		maxSize int
		want    int64
	}{
		{"large index", 10 << 20, firstPageBytes},
		{"index smaller than a page", 240, 240},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mem := vfs.NewMem()
			require.NoError(t, mem.MkdirAll("/d", 0o755))
			in := vfs.NewInjector(mem)
			var ops []vfs.Op
			in.SetHook(func(op vfs.Op) error {
				ops = append(ops, op)
				return nil
			})
			idx, err := OpenOffsetIndex(in, "/d/0.index", 0, tt.maxSize)
			require.NoError(t, err)
			require.NoError(t, idx.Close())
			prealloc, write := -1, -1
			for i, op := range ops {
				switch {
				case op.Kind == vfs.OpPreallocate && prealloc < 0:
					prealloc = i
				case op.Kind == vfs.OpWriteAt && write < 0:
					write = i
					require.Equal(t, int64(0), op.Off)
					require.Equal(t, tt.want, op.Len)
				}
			}
			require.GreaterOrEqual(t, prealloc, 0, "preallocated: %v", ops)
			require.Greater(t, write, prealloc, "first page written after the preallocation: %v", ops)

			// The write fails: the open fails and removes the new file.
			fail := vfs.NewInjector(mem)
			fail.SetHook(func(op vfs.Op) error {
				if op.Kind == vfs.OpWriteAt {
					return vfs.ErrInjected
				}
				return nil
			})
			_, err = OpenOffsetIndex(fail, "/d/1.index", 0, tt.maxSize)
			require.ErrorIs(t, err, vfs.ErrInjected)
			_, err = mem.Stat("/d/1.index")
			require.True(t, errors.Is(err, fs.ErrNotExist), "stat after a failed create: %v", err)
		})
	}
}
