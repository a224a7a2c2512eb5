package segment

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
)

// TestCreateSpareReservesLog: CreateSpare reserves the first
// min(segment size, SparePreallocBytes) bytes of the spare's .log
// (Preallocate from 0) and nothing else; a failed reservation fails the
// call and leaves no file.
func TestCreateSpareReservesLog(t *testing.T) {
	tests := []struct {
		name     string
		segBytes int64
		want     int64
	}{
		{"small segment", 1 << 20, 1 << 20},
		{"large segment", 1 << 30, SparePreallocBytes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := vfs.NewMem()
			mustMkdir(t, mem, "/p")
			in := vfs.NewInjector(mem)
			var (
				mu  sync.Mutex
				ops []vfs.Op
			)
			in.SetHook(func(op vfs.Op) error {
				if op.Kind == vfs.OpPreallocate && strings.HasSuffix(op.Path, LogSuffix+SpareSuffix) {
					mu.Lock()
					ops = append(ops, op)
					mu.Unlock()
				}
				return nil
			})
			s, err := CreateSpare(in, "/p", Config{IndexIntervalBytes: 4096, MaxIndexBytes: 4096, MaxSegmentBytes: tt.segBytes})
			require.NoError(t, err)
			require.Len(t, ops, 1)
			assert.Equal(t, int64(0), ops[0].Off)
			assert.Equal(t, tt.want, ops[0].Len)
			assert.Equal(t, int64(0), s.Size())
			require.NoError(t, s.Discard())
		})
	}
	t.Run("failed reservation", func(t *testing.T) {
		mem := vfs.NewMem()
		mustMkdir(t, mem, "/p")
		in := vfs.NewInjector(mem)
		in.FailOnce(func(op vfs.Op) bool {
			return op.Kind == vfs.OpPreallocate && strings.HasSuffix(op.Path, LogSuffix+SpareSuffix)
		})
		_, err := CreateSpare(in, "/p", Config{IndexIntervalBytes: 4096, MaxIndexBytes: 4096, MaxSegmentBytes: 1 << 20})
		require.ErrorIs(t, err, vfs.ErrInjected)
		assert.Contains(t, err.Error(), LogSuffix+SpareSuffix, "names the file")
		names, err := mem.List("/p")
		require.NoError(t, err)
		assert.Empty(t, names)
	})
}
