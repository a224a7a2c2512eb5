package segment

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

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
	require.NoError(t, err)
	_, err = f.Write(data)
	require.NoError(t, err)
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
	require.NoError(t, err, "Open")
	defer mustClose(t, s)
	require.LessOrEqual(t, s.Size(), int64(len(data)), "size %d of a %d-byte file", s.Size(), len(data))
	res, err := s.Recover(int(knobs&0xf) * 40)
	require.NoError(t, err, "Recover")
	if res.Kept {
		// Legacy data recovery cannot prove torn: nothing cut, the file
		// unchanged, the valid prefix published, and the same answer
		// again.
		require.Equal(t, int64(0), res.TruncatedBytes, "kept: Recover = %+v, size %d", res, s.Size())
		require.ErrorIs(t, res.Cause, ErrLegacyKept, "kept: Recover = %+v, size %d", res, s.Size())
		require.False(t, ibase.IsTornTail(res.Cause), "kept: Recover = %+v, size %d", res, s.Size())
		require.Equal(t, s.Size(), res.ValidBytes, "kept: Recover = %+v, size %d", res, s.Size())
		require.Equal(t, string(readAll(t, inner, logPath)), string(data), "kept data was changed")
		checkSegment(t, s)
		again, err := s.Recover(int(knobs&0xf) * 40)
		require.NoError(t, err, "second Recover = %+v, %v; first %+v", again, err, res)
		require.True(t, again.Kept, "second Recover = %+v, %v; first %+v", again, err, res)
		require.Equal(t, res.ValidBytes, again.ValidBytes, "second Recover = %+v, %v; first %+v", again, err, res)
		return
	}
	require.Equal(t, int64(len(data)), res.ValidBytes+res.TruncatedBytes, "Recover = %+v for %d bytes, size %d", res, len(data), s.Size())
	require.Equal(t, s.Size(), res.ValidBytes, "Recover = %+v for %d bytes, size %d", res, len(data), s.Size())
	require.Equal(t, res.TruncatedBytes == 0, res.Cause == nil, "cause %v with %d bytes cut", res.Cause, res.TruncatedBytes)
	m := checkSegment(t, s)
	for _, b := range m.batches {
		require.GreaterOrEqual(t, b.BaseOffset(), base, "batch at %d below base %d", b.BaseOffset(), base)
		require.NoError(t, b.Validate())
	}
	require.Equal(t, string(readAll(t, inner, logPath)), string(data[:res.ValidBytes]), "kept bytes are not a prefix of the input")
	again, err := s.Recover(int(knobs&0xf) * 40)
	require.NoError(t, err, "second Recover = %+v, %v; first %+v", again, err, res)
	require.NoError(t, again.Cause, "second Recover = %+v, %v; first %+v", again, err, res)
	require.Equal(t, int64(0), again.TruncatedBytes, "second Recover = %+v, %v; first %+v", again, err, res)
	require.Equal(t, res.ValidBytes, again.ValidBytes, "second Recover = %+v, %v; first %+v", again, err, res)
	require.Equal(t, res.NextOffset, again.NextOffset, "second Recover = %+v, %v; first %+v", again, err, res)
	if len(m.batches) > 0 && len(m.batches) < 50 {
		checkLookups(t, s, m)
	}
	require.NoError(t, violation)
}
