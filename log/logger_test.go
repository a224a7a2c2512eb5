package log_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// lockedBuffer is a bytes.Buffer safe for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// crashWithTornTail leaves the partition at dir as after a crash that
// tore its last write: no clean-shutdown marker, garbage after the last
// batch.
func crashWithTornTail(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, checkpoint.RemoveCleanShutdown(vfs.Default, dir))
	f, err := os.OpenFile(filepath.Join(dir, segment.FileName(0, segment.LogSuffix)), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(bytes.Repeat([]byte{0xa7}, 100))
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// TestDefaultLoggerShowsRecovery: without Config.Logger, what recovery cut
// (a warning) reaches slog.Default(), and Info records (the start of the
// recovery) do not; a Logger of the program's own replaces the default.
// Stats().Recovery reports the cut either way.
func TestDefaultLoggerShowsRecovery(t *testing.T) {
	cases := []struct {
		name     string
		logger   *slog.Logger // nil: the default
		wantWarn bool         // the cut reaches slog.Default()
	}{
		{name: "default", wantWarn: true},
		{name: "the program's logger", logger: slog.New(slog.DiscardHandler)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out lockedBuffer
			prev := slog.Default()
			slog.SetDefault(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})))
			t.Cleanup(func() { slog.SetDefault(prev) })

			dir := filepath.Join(t.TempDir(), "orders-0")
			cfg := plog.Config{Logger: tc.logger}
			p, err := plog.Open(dir, cfg)
			require.NoError(t, err)
			for i := range 3 {
				_, err := p.AppendBatch(logtest.MakeBatch(2, 10, 1000+int64(i), byte(i)))
				require.NoError(t, err)
			}
			require.NoError(t, p.Close())
			crashWithTornTail(t, dir)

			p, err = plog.Open(dir, cfg)
			require.NoError(t, err)
			defer p.Close()
			require.Equal(t, int64(6), p.LogEndOffset())
			rec := p.Stats().Recovery
			assert.False(t, rec.Clean)
			assert.Equal(t, int64(100), rec.BytesCut)

			logged := out.String()
			if tc.wantWarn {
				assert.Contains(t, logged, "level=WARN msg=\"partlog/log: recovery cut the log\"")
			} else {
				assert.NotContains(t, logged, "recovery cut the log")
			}
			assert.NotContains(t, logged, "level=INFO")
		})
	}
}
