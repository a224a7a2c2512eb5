package segment

import (
	"bytes"
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
			if err != nil {
				t.Fatal(err)
			}
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
				t.Fatal(err)
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
		if err := fsys.MkdirAll("/seg", 0o755); err != nil {
			t.Fatal(err)
		}
		s, err := Create(fsys, "/seg", 0, Config{})
		if err != nil {
			t.Fatal(err)
		}
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
			t.Fatal("a new lease was granted while a truncation waits")
		default:
		}
		err = <-locked // after the (fake) second elapsed
		var lw *LeaseWaitError
		if !errors.As(err, &lw) || lw.Readers != 2 || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("LockForTruncate = %v, want a *LeaseWaitError with 2 readers wrapping DeadlineExceeded", err)
		}
		<-granted
		for range 3 {
			s.ReleaseRead()
		}
		// Nothing held: the exclusive lease is granted at once.
		if err := s.LockForTruncate(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := s.TruncateToLocked(1); err != nil {
			t.Fatal(err)
		}
		s.UnlockForTruncate()
		if s.NextOffset() != 0 {
			t.Fatalf("NextOffset %d after TruncateToLocked(1) of a 3-record batch, want 0", s.NextOffset())
		}
	})
}

func testTruncateWaitsForLeases(t *testing.T) {
	fsys, dir := vfs.Default, t.TempDir()
	s, err := Create(fsys, dir, 0, Config{IndexIntervalBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer mustClose(t, s)
	next := int64(0)
	for i := range 50 {
		b := simpleBatch(t, next, 3, int64(i), 100)
		mustAppend(t, s, b)
		next = b.NextOffset()
	}
	s.AcquireRead()
	held, err := s.Bytes(0, s.Size(), nil)
	if err != nil {
		t.Fatal(err)
	}
	truncated := make(chan int64)
	go func() {
		n, err := s.TruncateTo(30)
		if err != nil {
			t.Error(err)
		}
		truncated <- n
	}()
	select {
	case <-truncated:
		t.Fatal("TruncateTo did not wait for the read lease")
	case <-time.After(50 * time.Millisecond):
	}
	if n, waiting := s.ReadLeases(); n != 1 || waiting != 1 {
		t.Fatalf("ReadLeases() = %d held, %d waiting; want 1, 1", n, waiting)
	}
	// A new lease waits while a truncation wants the segment (readers
	// cannot starve it); it is granted once the truncation is done.
	second := make(chan struct{})
	go func() {
		s.AcquireRead()
		close(second)
	}()
	select {
	case <-second:
		t.Fatal("a new lease was granted while a truncation waits")
	case <-time.After(50 * time.Millisecond):
	}
	// The held bytes are still all readable (the file is not cut).
	if _, _, err := batch.Parse(held[len(held)-len(simpleBatch(t, 147, 3, 49, 100)):]); err != nil {
		t.Fatal(err)
	}
	go s.ReleaseRead() // a lease may be released from another goroutine
	removed := <-truncated
	<-second
	s.ReleaseRead()
	s.AcquireRead()
	s.ReleaseRead()
	if s.NextOffset() != 30 || removed == 0 {
		t.Fatalf("after TruncateTo(30): next %d, removed %d", s.NextOffset(), removed)
	}
	if s.Sealed() {
		t.Fatal("TruncateTo left the segment sealed")
	}
	checkLookups(t, s, checkSegment(t, s))
	mustAppend(t, s, simpleBatch(t, 30, 2, 99, 10))
	checkSegment(t, s)
	if n, err := s.TruncateTo(1000); err != nil || n != 0 {
		t.Fatalf("TruncateTo past the end: %d, %v", n, err)
	}
	if n, err := s.TruncateTo(0); err != nil || n == 0 || s.Size() != 0 || s.NextOffset() != 0 || s.FirstBatchMaxTimestamp() != -1 {
		t.Fatalf("TruncateTo(0): %d, %v, size %d", n, err, s.Size())
	}
	if ts, off := s.MaxTimestamp(); ts != -1 || off != -1 {
		t.Fatalf("MaxTimestamp after truncating everything: %d, %d", ts, off)
	}
}

// TestRefsAndMarkDeleted: files are renamed at once, a reader holding a
// reference keeps reading, the last Unref removes the files.
func TestRefsAndMarkDeleted(t *testing.T) {
	for _, k := range fsKinds {
		t.Run(k.name, func(t *testing.T) {
			fsys, dir := k.fs(t)
			mustMkdir(t, fsys, dir)
			s, err := Create(fsys, dir, 7, k.cfg)
			if err != nil {
				t.Fatal(err)
			}
			b := simpleBatch(t, 7, 5, 1, 1000)
			mustAppend(t, s, b)
			s.Ref() // a reader
			s.AcquireRead()
			view, err := s.Bytes(0, s.Size(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Seal(); err != nil {
				t.Fatal(err)
			}
			if err := s.MarkDeleted(); err != nil {
				t.Fatal(err)
			}
			names, _ := fsys.List(dir)
			for _, n := range names {
				if filepath.Ext(n) != DeletedSuffix {
					t.Fatalf("file %s not renamed", n)
				}
			}
			if err := s.Close(); err != nil { // the owner lets go
				t.Fatal(err)
			}
			// The reader still reads.
			if !bytes.Equal(view, b) {
				t.Fatal("view changed")
			}
			if _, _, found, err := s.Translate(9, 0); err != nil || !found {
				t.Fatalf("Translate after MarkDeleted: %v, %v", found, err)
			}
			s.ReleaseRead()
			if err := s.Unref(); err != nil {
				t.Fatal(err)
			}
			names, _ = fsys.List(dir)
			if len(names) != 0 {
				t.Fatalf("files left after the last Unref: %v", names)
			}
			if _, err := s.Append(b); !errors.Is(err, ErrClosed) {
				t.Fatalf("Append after release: %v", err)
			}
			if _, err := s.Bytes(0, 1, nil); !errors.Is(err, ErrClosed) {
				t.Fatalf("Bytes after release: %v", err)
			}
		})
	}
}

func TestChangeSuffix(t *testing.T) {
	fsys := vfs_NewMemForTest(t)
	s, err := CreateWithSuffix(fsys, "/x", 3, CleanedSuffix, Config{})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, simpleBatch(t, 3, 2, 5, 5))
	if err := s.ChangeSuffix("", SwapSuffix); !errors.Is(err, ErrSuffix) {
		t.Fatalf("wrong old suffix: %v", err)
	}
	for _, step := range [][2]string{{CleanedSuffix, SwapSuffix}, {SwapSuffix, ""}} {
		if err := s.ChangeSuffix(step[0], step[1]); err != nil {
			t.Fatal(err)
		}
		for _, kind := range []string{LogSuffix, IndexSuffix, TimeIndexSuffix} {
			if _, err := fsys.Stat(segPath("/x", 3, kind+step[1])); err != nil {
				t.Fatalf("after %v: %v", step, err)
			}
		}
	}
	mustAppend(t, s, simpleBatch(t, 5, 2, 6, 5))
	mustClose(t, s)
	r, err := Open(fsys, "/x", 3, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if r.NextOffset() != 7 {
		t.Fatalf("next %d", r.NextOffset())
	}
	mustClose(t, r)
	if _, err := OpenWithSuffix(fsys, "/x", 3, SwapSuffix, Config{}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open of a missing suffix: %v", err)
	}
}

// TestWriteToSendfile sends a range to a file and over TCP (sendfile on
// Linux) and to a pipe-like writer (copy).
func TestWriteToSendfile(t *testing.T) {
	for _, k := range fsKinds {
		t.Run(k.name, func(t *testing.T) {
			fsys, dir := k.fs(t)
			mustMkdir(t, fsys, dir)
			s, err := Create(fsys, dir, 0, k.cfg)
			if err != nil {
				t.Fatal(err)
			}
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
			if err != nil {
				t.Fatal(err)
			}
			start, end := sl.Start, sl.End
			want = want[start:end]

			f, err := os.Create(filepath.Join(t.TempDir(), "out"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if n, err := s.WriteTo(f, start, end); err != nil || n != end-start {
				t.Fatalf("WriteTo file: %d, %v", n, err)
			}
			got, _ := os.ReadFile(f.Name())
			if !bytes.Equal(got, want) {
				t.Fatal("file contents differ")
			}

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
			if err != nil {
				t.Fatal(err)
			}
			if n, err := s.WriteTo(c, start, end); err != nil || n != end-start {
				t.Fatalf("WriteTo tcp: %d, %v", n, err)
			}
			c.Close()
			if got := <-recv; !bytes.Equal(got, want) {
				t.Fatalf("tcp received %d bytes, want %d", len(got), len(want))
			}
			if _, err := s.WriteTo(io.Discard, 0, s.Size()+1); !errors.Is(err, ErrOutOfRange) {
				t.Fatalf("WriteTo past the end: %v", err)
			}
		})
	}
}

// TestOpenEdgeCases: empty log, 0-byte index with a log, an index left
// preallocated (zero tail) after a crash, a torn tail left out of Size.
func TestOpenEdgeCases(t *testing.T) {
	mem := vfs_NewMemForTest(t)
	write := func(name string, data []byte) {
		f, err := mem.Create(filepath.Join("/x", name))
		if err != nil {
			t.Fatal(err)
		}
		f.Write(data)
		f.Close()
	}
	// Empty log, no indexes.
	write(FileName(38, LogSuffix), nil)
	s, err := Open(mem, "/x", 38, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Size() != 0 || s.NextOffset() != 38 {
		t.Fatalf("empty: size %d next %d", s.Size(), s.NextOffset())
	}
	if err := s.Unseal(); err != nil {
		t.Fatal(err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	if s.Size() != int64(whole) || s.NextOffset() != next {
		t.Fatalf("torn tail: size %d next %d, want %d %d", s.Size(), s.NextOffset(), whole, next)
	}
	m := checkSegment(t, s)
	checkLookups(t, s, m)
	if err := s.Unseal(); err != nil {
		t.Fatal(err)
	}
	// Append cuts the torn bytes first.
	mustAppend(t, s, simpleBatch(t, next, 1, 60, 10))
	checkSegment(t, s)
	mustClose(t, s)
	if st, _ := mem.Stat(segPath("/x", 100, LogSuffix)); st.Size() != int64(whole)+int64(len(simpleBatch(t, next, 1, 60, 10))) {
		t.Fatalf("file size %d after append over a torn tail", st.Size())
	}
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
					if exclusive.Add(1) != 1 || shared.Load() != 0 {
						t.Error("exclusive lease overlaps another lease")
					}
					exclusive.Add(-1)
					l.releaseExclusive()
					continue
				}
				l.acquireShared()
				shared.Add(1)
				if exclusive.Load() != 0 {
					t.Error("shared lease overlaps the exclusive one")
				}
				shared.Add(-1)
				l.releaseShared()
			}
		}()
	}
	wg.Wait()
	defer func() {
		if recover() == nil {
			t.Error("ReleaseRead without AcquireRead did not panic")
		}
	}()
	l.releaseShared()
}
