package log_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/segment"
)

// TestOpenRemovesOrphanIndexes checks that Open removes the index files a
// crash left without their .log (Kafka's loader does the same): a spare's
// index renames kept and its .log rename lost leave the next base's
// .index and .timeindex; a segment deletion or creation cut short leaves
// any of the three, .txnindex included (derived from a .log that is
// gone). The removal is durable (the directory is synced: a crash right
// after Open does not bring them back) and the log is unchanged. A
// refusing Open leaves them, as it writes nothing; so does
// StrictRecovery{}, which changes no file (as it leaves *.deleted).
func TestOpenRemovesOrphanIndexes(t *testing.T) {
	const dir = "/data/orphans-0"
	kinds := []string{segment.IndexSuffix, segment.TimeIndexSuffix, segment.TxnIndexSuffix}
	// setup writes a partition of two segments, 0 and 4, closed cleanly
	// (or left as a crash leaves it), and orphan index files at base 2
	// (inside segment 0's range) and 8 (the next roll's base), copied from
	// segment 4's indexes, every file durable.
	setup := func(t *testing.T, crash bool) (*vfs.MemFS, []string) {
		mem := vfs.NewMem()
		p, err := plog.Open(dir, plog.Config{FS: mem})
		require.NoError(t, err)
		for i := 0; i < 2; i++ {
			_, err := p.AppendBatch(makeBatchT(t, 0, 2))
			require.NoError(t, err)
		}
		require.NoError(t, p.Roll())
		_, err = p.AppendBatch(makeBatchT(t, 0, 2))
		require.NoError(t, err)
		_, err = p.AppendBatch(makeBatchT(t, 0, 2))
		require.NoError(t, err)
		require.NoError(t, p.Sync())
		if crash {
			mem = mem.CrashClone(vfs.CrashOptions{})
		} else {
			require.NoError(t, p.Close())
		}
		var orphans []string
		for _, b := range []int64{2, 8} {
			for _, kind := range kinds {
				from := filepath.Join(dir, segment.FileName(4, kind))
				data := []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0} // a .txnindex segment 4 never made
				if _, err := mem.Stat(from); err == nil {
					data = readFileT(t, mem, from)
				}
				name := segment.FileName(b, kind)
				writeFileT(t, mem, filepath.Join(dir, name), data)
				orphans = append(orphans, name)
			}
		}
		mem.SyncAll()
		return mem, orphans
	}
	logs := func(t *testing.T, fs vfs.FS) map[string][]byte {
		names, err := fs.List(dir)
		require.NoError(t, err)
		out := map[string][]byte{}
		for _, n := range names {
			if strings.HasSuffix(n, segment.LogSuffix) {
				out[n] = readFileT(t, fs, filepath.Join(dir, n))
			}
		}
		return out
	}
	present := func(t *testing.T, fs vfs.FS, names []string) []string {
		var got []string
		for _, n := range names {
			if _, err := fs.Stat(filepath.Join(dir, n)); err == nil {
				got = append(got, n)
			}
		}
		return got
	}

	tests := []struct {
		name   string
		crash  bool
		cfg    plog.Config
		damage func(t *testing.T, fs *vfs.MemFS) // makes Open refuse
		kept   bool
	}{
		{name: "clean shutdown"},
		{name: "crash", crash: true},
		{name: "strict recovery changes no file", cfg: plog.Config{Recovery: plog.StrictRecovery{}}, kept: true},
		{name: "strict recovery allowing a torn tail", crash: true, cfg: plog.Config{Recovery: plog.StrictRecovery{AllowTornTail: true}}},
		{
			name: "refused",
			damage: func(t *testing.T, fs *vfs.MemFS) {
				// The first segment gone: offsets below the log start
				// checkpoint are missing, refused under every policy.
				for _, kind := range []string{segment.LogSuffix, segment.IndexSuffix, segment.TimeIndexSuffix} {
					require.NoError(t, fs.Remove(filepath.Join(dir, segment.FileName(0, kind))))
				}
				fs.SyncAll()
			},
			kept: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem, orphans := setup(t, tt.crash)
			if tt.damage != nil {
				tt.damage(t, mem)
			}
			before := logs(t, mem)
			cfg := tt.cfg
			cfg.FS = mem
			p, err := plog.Open(dir, cfg)
			if tt.damage != nil {
				require.ErrorIs(t, err, plog.ErrRecoveryRefused)
				require.Equal(t, orphans, present(t, mem, orphans), "a refusing Open writes nothing")
				require.Equal(t, before, logs(t, mem))
				return
			}
			require.NoError(t, err)
			require.Equal(t, int64(8), p.LogEndOffset())
			// What survives a crash right after Open: the removals were
			// synced.
			survived := mem.CrashClone(vfs.CrashOptions{})
			if tt.kept {
				require.Equal(t, orphans, present(t, mem, orphans))
			} else {
				require.Empty(t, present(t, mem, orphans), "orphan index files left")
				require.Empty(t, present(t, survived, orphans), "the removal was not synced")
			}
			require.Equal(t, before, logs(t, survived), "the log changed")
			require.NoError(t, p.Verify())
			// The live segments keep their indexes.
			for _, b := range []int64{0, 4} {
				for _, kind := range kinds[:2] {
					_, err := mem.Stat(filepath.Join(dir, segment.FileName(b, kind)))
					require.NoError(t, err)
				}
			}
			require.NoError(t, p.Close())
			if !tt.kept {
				names, err := mem.List(dir)
				require.NoError(t, err)
				require.False(t, slices.ContainsFunc(names, func(n string) bool { return slices.Contains(orphans, n) }))
			}
		})
	}
}
