package log

import (
	"context"
	"log/slog"
)

// defaultLogger returns the logger of a Config without one: the records
// of level Warn and above (recovery cutting the log, damaged files a
// partition refuses or ignores, failed flushes and closes, a partition
// going offline) go to the handler slog.Default() has at the time, Info
// and below (rolls, deletions, recovery progress) nowhere.
func defaultLogger() *slog.Logger {
	return slog.New(warnHandler{slog.Default().Handler()})
}

// warnHandler passes the records of level Warn and above to h.
type warnHandler struct{ h slog.Handler }

// Enabled reports whether h takes records of level l, Warn and above.
func (w warnHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.h.Enabled(ctx, l)
}

// Handle passes r to h.
func (w warnHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return nil
	}
	return w.h.Handle(ctx, r)
}

// WithAttrs returns a warnHandler in front of h.WithAttrs(attrs).
func (w warnHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return warnHandler{w.h.WithAttrs(attrs)}
}

// WithGroup returns a warnHandler in front of h.WithGroup(name).
func (w warnHandler) WithGroup(name string) slog.Handler {
	return warnHandler{w.h.WithGroup(name)}
}
