package segment

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	ibase "github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/vfs"
)

// FuzzRecover opens and recovers a .log of arbitrary bytes: it never
// panics, never reads past the end of the file, keeps a prefix of valid
// batches with increasing offsets and cuts the rest, and a second recovery
// keeps everything.
func FuzzRecover(f *testing.F) {
	logs, _ := filepath.Glob("testdata/kafka/*/*/*.log")
	for _, p := range logs {
		data, err := os.ReadFile(p)
		if err == nil {
			f.Add(data, uint16(0))
			if len(data) > 10 {
				f.Add(data[:len(data)-10], uint16(7))
			}
		}
	}
	var seed []byte
	for i := range 4 {
		seed = append(seed, simpleBatch(f, int64(i*3), 3, 100+int64(i), 20)...)
	}
	f.Add(seed, uint16(1))
	f.Add(append(seed, make([]byte, 70)...), uint16(2))
	f.Add([]byte{}, uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, knobs uint16) {
		fuzzRecover(t, vfs.NewMem(), "/f", data, knobs)
		if knobs&7 == 1 {
			fuzzRecover(t, vfs.Default, t.TempDir(), data, knobs)
		}
	})
}

func fuzzRecover(t *testing.T, inner vfs.FS, dir string, data []byte, knobs uint16) {
	mustMkdir(t, inner, dir)
	base := int64(knobs>>8) * 3
	logPath := segPath(dir, base, LogSuffix)
	f, err := inner.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	f.Close()
	fileSize := int64(len(data))
	in := vfs.NewInjector(inner)
	var violation error
	in.SetHook(func(op vfs.Op) error {
		if op.Kind == vfs.OpReadAt && op.Path == logPath && op.Off+op.Len > fileSize && violation == nil {
			violation = fmt.Errorf("read [%d, %d) of a %d-byte log", op.Off, op.Off+op.Len, fileSize)
		}
		if op.Kind == vfs.OpTruncate && op.Path == logPath {
			fileSize = min(fileSize, op.Off)
		}
		return nil
	})
	cfg := Config{IndexIntervalBytes: int(knobs>>4) & 0xff, MaxIndexBytes: 4096, MaxSegmentBytes: 1 << 20}
	s, err := Open(in, dir, base, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer mustClose(t, s)
	if s.Size() > int64(len(data)) {
		t.Fatalf("size %d of a %d-byte file", s.Size(), len(data))
	}
	res, err := s.Recover(int(knobs&0xf) * 40)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if res.Kept {
		// Legacy data recovery cannot prove torn: nothing cut, the file
		// unchanged, the valid prefix published, and the same answer
		// again.
		if res.TruncatedBytes != 0 || !errors.Is(res.Cause, ErrLegacyKept) || ibase.IsTornTail(res.Cause) || res.ValidBytes != s.Size() {
			t.Fatalf("kept: Recover = %+v, size %d", res, s.Size())
		}
		if string(data) != string(readAll(t, inner, logPath)) {
			t.Fatal("kept data was changed")
		}
		checkSegment(t, s)
		again, err := s.Recover(int(knobs&0xf) * 40)
		if err != nil || !again.Kept || again.ValidBytes != res.ValidBytes {
			t.Fatalf("second Recover = %+v, %v; first %+v", again, err, res)
		}
		return
	}
	if res.ValidBytes+res.TruncatedBytes != int64(len(data)) || res.ValidBytes != s.Size() {
		t.Fatalf("Recover = %+v for %d bytes, size %d", res, len(data), s.Size())
	}
	if (res.Cause == nil) != (res.TruncatedBytes == 0) {
		t.Fatalf("cause %v with %d bytes cut", res.Cause, res.TruncatedBytes)
	}
	m := checkSegment(t, s)
	for _, b := range m.batches {
		if b.BaseOffset() < base {
			t.Fatalf("batch at %d below base %d", b.BaseOffset(), base)
		}
		if err := b.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	if string(data[:res.ValidBytes]) != string(readAll(t, inner, logPath)) {
		t.Fatal("kept bytes are not a prefix of the input")
	}
	again, err := s.Recover(int(knobs&0xf) * 40)
	if err != nil || again.Cause != nil || again.TruncatedBytes != 0 || again.ValidBytes != res.ValidBytes || again.NextOffset != res.NextOffset {
		t.Fatalf("second Recover = %+v, %v; first %+v", again, err, res)
	}
	if len(m.batches) > 0 && len(m.batches) < 50 {
		checkLookups(t, s, m)
	}
	if violation != nil {
		t.Fatal(violation)
	}
}
