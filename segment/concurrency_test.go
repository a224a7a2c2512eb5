package segment

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
)

// TestConcurrentReadersOneAppender runs readers (Read + Bytes + CRC check,
// Translate, FindOffsetByTimestamp, NextOffset) against one appender; run
// it with -race. Readers must only ever see whole valid batches and every
// offset below NextOffset must be readable.
func TestConcurrentReadersOneAppender(t *testing.T) {
	for _, k := range fsKinds {
		t.Run(k.name, func(t *testing.T) {
			fsys, dir := k.fs(t)
			mustMkdir(t, fsys, dir)
			cfg := k.cfg
			cfg.IndexIntervalBytes = 256
			cfg.MaxIndexBytes = 64 << 10
			s, err := Create(fsys, dir, 0, cfg)
			require.NoError(t, err)
			defer mustClose(t, s)
			const n = 400
			batches := make([]batch.Batch, n)
			next := int64(0)
			for i := range batches {
				batches[i] = simpleBatch(t, next, 1+i%4, int64(10_000+i), 50+i%200)
				next = batches[i].NextOffset()
			}
			var done atomic.Bool
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for r := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var scratch []byte
					for i := 0; !done.Load(); i++ {
						next := s.NextOffset()
						if next == 0 {
							continue
						}
						target := int64(i*7+r) % next
						s.AcquireRead()
						sl, err := s.Read(target, 4096, s.Size(), true)
						if err == nil && sl.Empty() {
							err = errors.New("offset below NextOffset not readable")
						}
						var b []byte
						if err == nil {
							b, err = s.Bytes(sl.Start, sl.End, scratch)
						}
						for err == nil && len(b) > 0 {
							var one batch.Batch
							one, b, err = batch.Parse(b)
							if err == nil {
								err = one.ValidateHeader()
							}
						}
						if err == nil {
							_, _, _, err = s.FindOffsetByTimestamp(int64(10_000+i%n), 0)
						}
						s.ReleaseRead()
						if err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			for _, b := range batches {
				mustAppend(t, s, b)
			}
			done.Store(true)
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			checkLookups(t, s, checkSegment(t, s))
		})
	}
}

// TestTruncateWaitsForLeases: TruncateTo does not cut the file while a
// reader holds a lease, and readers see a consistent segment after it.
func TestTruncateWaitsForLeases(t *testing.T) {
	synctest.Test(t, testTruncateWaitsForLeases)
}

// TestLockForTruncateGivesUp: a truncation whose context ends while a
// reader holds a lease gives up with a *LeaseWaitError naming the reader
// count, and the reads that waited behind it are granted.
func TestLockForTruncateGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fsys := vfs.NewMem()
		require.NoError(t, fsys.MkdirAll("/seg", 0o755))
		s, err := Create(fsys, "/seg", 0, Config{})
		require.NoError(t, err)
		defer mustClose(t, s)
		mustAppend(t, s, simpleBatch(t, 0, 3, 1, 10))
		s.AcquireRead()
		s.AcquireRead() // two leases, as two open reads hold them
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		locked := make(chan error, 1)
		go func() { locked <- s.LockForTruncate(ctx) }()
		synctest.Wait()
		granted := make(chan struct{})
		go func() {
			s.AcquireRead() // waits behind the pending truncation
			close(granted)
		}()
		synctest.Wait()
		select {
		case <-granted:
			require.Fail(t, "a new lease was granted while a truncation waits")
		default:
		}
		err = <-locked // after the (fake) second elapsed
		var lw *LeaseWaitError
		require.ErrorAs(t, err, &lw)
		require.Equal(t, 2, lw.Readers, "LockForTruncate = %v", err)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		<-granted
		for range 3 {
			s.ReleaseRead()
		}
		// Nothing held: the exclusive lease is granted at once.
		require.NoError(t, s.LockForTruncate(context.Background()))
		_, err = s.TruncateToLocked(1)
		require.NoError(t, err)
		s.UnlockForTruncate()
		require.Equal(t, int64(0), s.NextOffset(), "NextOffset after TruncateToLocked(1) of a 3-record batch")
	})
}

func testTruncateWaitsForLeases(t *testing.T) {
	fsys, dir := vfs.Default, t.TempDir()
	s, err := Create(fsys, dir, 0, Config{IndexIntervalBytes: 100})
	require.NoError(t, err)
	defer mustClose(t, s)
	next := int64(0)
	for i := range 50 {
		b := simpleBatch(t, next, 3, int64(i), 100)
		mustAppend(t, s, b)
		next = b.NextOffset()
	}
	s.AcquireRead()
	held, err := s.Bytes(0, s.Size(), nil)
	require.NoError(t, err)
	truncated := make(chan int64)
	go func() {
		n, err := s.TruncateTo(30)
		assert.NoError(t, err)
		truncated <- n
	}()
	select {
	case <-truncated:
		require.Fail(t, "TruncateTo did not wait for the read lease")
	case <-time.After(50 * time.Millisecond):
	}
	leases, waiting := s.ReadLeases()
	require.Equal(t, 1, leases, "ReadLeases() held")
	require.Equal(t, 1, waiting, "ReadLeases() waiting")
	// A new lease waits while a truncation wants the segment (readers
	// cannot starve it); it is granted once the truncation is done.
	second := make(chan struct{})
	go func() {
		s.AcquireRead()
		close(second)
	}()
	select {
	case <-second:
		require.Fail(t, "a new lease was granted while a truncation waits")
	case <-time.After(50 * time.Millisecond):
	}
	// The held bytes are still all readable (the file is not cut).
	_, _, err = batch.Parse(held[len(held)-len(simpleBatch(t, 147, 3, 49, 100)):])
	require.NoError(t, err)
	go s.ReleaseRead() // a lease may be released from another goroutine
	removed := <-truncated
	<-second
	s.ReleaseRead()
	s.AcquireRead()
	s.ReleaseRead()
	require.Equal(t, int64(30), s.NextOffset(), "after TruncateTo(30): next %d, removed %d", s.NextOffset(), removed)
	require.NotEqual(t, int64(0), removed, "after TruncateTo(30): next %d, removed %d", s.NextOffset(), removed)
	require.False(t, s.Sealed(), "TruncateTo left the segment sealed")
	checkLookups(t, s, checkSegment(t, s))
	mustAppend(t, s, simpleBatch(t, 30, 2, 99, 10))
	checkSegment(t, s)
	n, err := s.TruncateTo(1000)
	require.NoError(t, err, "TruncateTo past the end: %d, %v", n, err)
	require.Equal(t, int64(0), n, "TruncateTo past the end: %d, %v", n, err)
	n, err = s.TruncateTo(0)
	require.NoError(t, err, "TruncateTo(0): %d, %v, size %d", n, err, s.Size())
	require.NotEqual(t, int64(0), n, "TruncateTo(0): %d, %v, size %d", n, err, s.Size())
	require.Equal(t, int64(0), s.Size(), "TruncateTo(0): %d, %v, size %d", n, err, s.Size())
	require.Equal(t, int64(0), s.NextOffset(), "TruncateTo(0): %d, %v, size %d", n, err, s.Size())
	require.Equal(t, int64(-1), s.FirstBatchMaxTimestamp(), "TruncateTo(0): %d, %v, size %d", n, err, s.Size())
	ts, off := s.MaxTimestamp()
	require.Equal(t, int64(-1), ts, "MaxTimestamp after truncating everything: %d, %d", ts, off)
	require.Equal(t, int64(-1), off, "MaxTimestamp after truncating everything: %d, %d", ts, off)
}

// TestRefsAndMarkDeleted: files are renamed at once, a reader holding a
// reference keeps reading, the last Unref removes the files.
func TestRefsAndMarkDeleted(t *testing.T) {
	for _, k := range fsKinds {
		t.Run(k.name, func(t *testing.T) {
			fsys, dir := k.fs(t)
			mustMkdir(t, fsys, dir)
			s, err := Create(fsys, dir, 7, k.cfg)
			require.NoError(t, err)
			b := simpleBatch(t, 7, 5, 1, 1000)
			mustAppend(t, s, b)
			s.Ref() // a reader
			s.AcquireRead()
			view, err := s.Bytes(0, s.Size(), nil)
			require.NoError(t, err)
			require.NoError(t, s.Seal())
			require.NoError(t, s.MarkDeleted())
			names, _ := fsys.List(dir)
			for _, n := range names {
				require.Equal(t, DeletedSuffix, filepath.Ext(n), "file %s not renamed", n)
			}
			// the owner lets go
			require.NoError(t, s.Close())
			// The reader still reads.
			require.Equal(t, string(b), string(view), "view changed")
			_, _, found, err := s.Translate(9, 0)
			require.NoError(t, err, "Translate after MarkDeleted: %v, %v", found, err)
			require.True(t, found, "Translate after MarkDeleted: %v, %v", found, err)
			s.ReleaseRead()
			require.NoError(t, s.Unref())
			names, _ = fsys.List(dir)
			require.Empty(t, names, "files left after the last Unref: %v", names)
			_, err = s.Append(b)
			require.ErrorIs(t, err, ErrClosed, "Append after release: %v", err)
			_, err = s.Bytes(0, 1, nil)
			require.ErrorIs(t, err, ErrClosed, "Bytes after release: %v", err)
		})
	}
}

func TestChangeSuffix(t *testing.T) {
	fsys := vfs_NewMemForTest(t)
	s, err := CreateWithSuffix(fsys, "/x", 3, CleanedSuffix, Config{})
	require.NoError(t, err)
	mustAppend(t, s, simpleBatch(t, 3, 2, 5, 5))
	err = s.ChangeSuffix("", SwapSuffix)
	require.ErrorIs(t, err, ErrSuffix, "wrong old suffix: %v", err)
	for _, step := range [][2]string{{CleanedSuffix, SwapSuffix}, {SwapSuffix, ""}} {
		require.NoError(t, s.ChangeSuffix(step[0], step[1]))
		for _, kind := range []string{LogSuffix, IndexSuffix, TimeIndexSuffix} {
			_, err := fsys.Stat(segPath("/x", 3, kind+step[1]))
			require.NoError(t, err, "after %v", step)
		}
	}
	mustAppend(t, s, simpleBatch(t, 5, 2, 6, 5))
	mustClose(t, s)
	r, err := Open(fsys, "/x", 3, Config{})
	require.NoError(t, err)
	require.Equal(t, int64(7), r.NextOffset(), "next %d", r.NextOffset())
	mustClose(t, r)
	_, err = openWithSuffix(fsys, "/x", 3, SwapSuffix, Config{})
	require.ErrorIs(t, err, fs.ErrNotExist, "open of a missing suffix: %v", err)
}

// TestWriteToSendfile sends a range to a file and over TCP (sendfile on
// Linux) and to a pipe-like writer (copy).
func TestWriteToSendfile(t *testing.T) {
	for _, k := range fsKinds {
		t.Run(k.name, func(t *testing.T) {
			fsys, dir := k.fs(t)
			mustMkdir(t, fsys, dir)
			s, err := Create(fsys, dir, 0, k.cfg)
			require.NoError(t, err)
			defer mustClose(t, s)
			var want []byte
			next := int64(0)
			for i := range 30 {
				b := simpleBatch(t, next, 3, int64(i), 3000)
				mustAppend(t, s, b)
				want = append(want, b...)
				next = b.NextOffset()
			}
			// A range that starts on a batch inside the segment.
			sl, err := s.Read(40, 1<<30, s.Size(), true)
			require.NoError(t, err)
			start, end := sl.Start, sl.End
			want = want[start:end]

			f, err := os.Create(filepath.Join(t.TempDir(), "out"))
			require.NoError(t, err)
			defer f.Close()
			n, err := s.WriteTo(f, start, end)
			require.NoError(t, err, "WriteTo file: %d, %v", n, err)
			require.Equal(t, end-start, n, "WriteTo file: %d, %v", n, err)
			got, _ := os.ReadFile(f.Name())
			require.Equal(t, string(want), string(got), "file contents differ")

			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Skip(err)
			}
			defer ln.Close()
			recv := make(chan []byte)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					recv <- nil
					return
				}
				b, _ := io.ReadAll(c)
				c.Close()
				recv <- b
			}()
			c, err := net.Dial("tcp", ln.Addr().String())
			require.NoError(t, err)
			n, err = s.WriteTo(c, start, end)
			require.NoError(t, err, "WriteTo tcp: %d, %v", n, err)
			require.Equal(t, end-start, n, "WriteTo tcp: %d, %v", n, err)
			c.Close()
			got = <-recv
			require.Equal(t, string(want), string(got), "tcp received %d bytes, want %d", len(got), len(want))
			_, err = s.WriteTo(io.Discard, 0, s.Size()+1)
			require.ErrorIs(t, err, ErrOutOfRange, "WriteTo past the end: %v", err)
		})
	}
}

// TestOpenEdgeCases: empty log, 0-byte index with a log, an index left
// preallocated (zero tail) after a crash, a torn tail left out of Size.
func TestOpenEdgeCases(t *testing.T) {
	mem := vfs_NewMemForTest(t)
	write := func(name string, data []byte) {
		f, err := mem.Create(filepath.Join("/x", name))
		require.NoError(t, err)
		f.Write(data)
		f.Close()
	}
	// Empty log, no indexes.
	write(FileName(38, LogSuffix), nil)
	s, err := Open(mem, "/x", 38, Config{})
	require.NoError(t, err)
	require.Equal(t, int64(0), s.Size(), "empty: size %d next %d", s.Size(), s.NextOffset())
	require.Equal(t, int64(38), s.NextOffset(), "empty: size %d next %d", s.Size(), s.NextOffset())
	require.NoError(t, s.Unseal())
	mustAppend(t, s, simpleBatch(t, 40, 1, 1, 1))
	mustClose(t, s)

	// A log with a torn tail and a preallocated all-zero index.
	var data []byte
	next := int64(100)
	for i := range 20 {
		b := simpleBatch(t, next, 2, int64(i), 300)
		data = append(data, b...)
		next = b.NextOffset()
	}
	whole := len(data)
	data = append(data, simpleBatch(t, next, 2, 50, 300)[:100]...)
	write(FileName(100, LogSuffix), data)
	idx := make([]byte, 1024)
	copy(idx, []byte{0, 0, 0, 3, 0, 0, 1, 0x94}) // one plausible entry, zeros after
	write(FileName(100, IndexSuffix), idx)
	write(FileName(100, TimeIndexSuffix), make([]byte, 1200))
	s, err = Open(mem, "/x", 100, Config{IndexIntervalBytes: 500})
	require.NoError(t, err)
	require.Equal(t, int64(whole), s.Size(), "torn tail: size %d next %d, want %d %d", s.Size(), s.NextOffset(), whole, next)
	require.Equal(t, next, s.NextOffset(), "torn tail: size %d next %d, want %d %d", s.Size(), s.NextOffset(), whole, next)
	m := checkSegment(t, s)
	checkLookups(t, s, m)
	require.NoError(t, s.Unseal())
	// Append cuts the torn bytes first.
	mustAppend(t, s, simpleBatch(t, next, 1, 60, 10))
	checkSegment(t, s)
	mustClose(t, s)
	st, _ := mem.Stat(segPath("/x", 100, LogSuffix))
	require.Equal(t, int64(whole)+int64(len(simpleBatch(t, next, 1, 60, 10))), st.Size(), "file size %d after append over a torn tail", st.Size())
}

// TestLeaseExclusion hammers the lease: shared holders never overlap an
// exclusive one.
func TestLeaseExclusion(t *testing.T) {
	var l readLease
	var shared, exclusive atomic.Int32
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				if (i+g)%7 == 0 {
					l.acquireExclusive()
					assert.Equal(t, int32(1), exclusive.Add(1), "exclusive lease overlaps another lease")
					assert.Equal(t, int32(0), shared.Load(), "exclusive lease overlaps another lease")
					exclusive.Add(-1)
					l.releaseExclusive()
					continue
				}
				l.acquireShared()
				shared.Add(1)
				assert.Equal(t, int32(0), exclusive.Load(), "shared lease overlaps the exclusive one")
				shared.Add(-1)
				l.releaseShared()
			}
		}()
	}
	wg.Wait()
	defer func() {
		assert.NotNil(t, recover(), "ReleaseRead without AcquireRead did not panic")
	}()
	l.releaseShared()
}
