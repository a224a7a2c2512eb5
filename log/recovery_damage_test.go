package log_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/segment"
)

// TestRecoveryDamageOneDefinition: the pre-scan a policy is asked from and
// the one-pass recovery of DefaultRecovery use one definition of damage
// (segment.Check is the walk segment.Recover runs): for the same damage of
// the active segment, the event a policy sees and the cut DefaultRecovery
// logs agree on the position, the kind (torn tail or corruption) and the
// log end; StrictRecovery{AllowTornTail: true} cuts exactly the torn
// tails. Before, the pre-scan called a last batch failing its CRC followed
// by non-zero bytes that are not a batch corruption (its own rule: only
// bad bytes reaching the end of the file are torn) while Recover called it
// a torn tail, so AllowTornTail refused what the default cut as torn.
func TestRecoveryDamageOneDefinition(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, path string) (pos int64)
		torn   bool
	}{
		{"last batch fails its CRC, then bytes that are not a batch", func(t *testing.T, path string) int64 {
			pos := batchPositions(t, path)
			last := pos[len(pos)-1]
			flipByte(t, path, last+batch.HeaderSize+3)
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			require.NoError(t, err)
			_, err = f.Write(bytes.Repeat([]byte("torn write "), 4))
			require.NoError(t, err)
			require.NoError(t, f.Close())
			return last
		}, true},
		{"half a last batch", func(t *testing.T, path string) int64 {
			pos := batchPositions(t, path)
			st, err := os.Stat(path)
			require.NoError(t, err)
			last := pos[len(pos)-1]
			require.NoError(t, os.Truncate(path, last+(st.Size()-last)/2))
			return last
		}, true},
		{"a middle batch fails its CRC", func(t *testing.T, path string) int64 {
			pos := batchPositions(t, path)
			require.GreaterOrEqual(t, len(pos), 3)
			flipByte(t, path, pos[1]+batch.HeaderSize+3)
			return pos[1]
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			type outcome struct {
				end  int64
				size int64
			}
			run := func(policy plog.RecoveryPolicy) (outcome, string, error) {
				dir, _, segs := corruptionFixture(t)
				makeUnclean(t, dir)
				path := filepath.Join(dir, segment.FileName(segs[len(segs)-1].BaseOffset, segment.LogSuffix))
				pos := c.damage(t, path)
				var logs bytes.Buffer
				p, err := plog.Open(dir, plog.Config{SegmentBytes: 4096, IndexIntervalBytes: 200, DisableAutoHighWatermark: true,
					Recovery: policy, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
				if err != nil {
					return outcome{}, logs.String(), err
				}
				defer p.Close()
				st, err := os.Stat(path)
				require.NoError(t, err)
				require.Equal(t, pos, st.Size(), "cut at the damaged batch")
				return outcome{end: p.LogEndOffset(), size: st.Size()}, logs.String(), nil
			}

			def, logs, err := run(plog.DefaultRecovery{})
			require.NoError(t, err)
			kind := `kind=corruption`
			if c.torn {
				kind = `kind="torn tail"`
			}
			require.Contains(t, logs, kind)

			var events []plog.RecoveryEvent
			rec, _, err := run(recordingPolicy{&events, plog.DefaultRecovery{}} /* accepts every cut; a policy other than DefaultRecovery, so Open asks it after the read-only pre-scan */)
			require.NoError(t, err)
			require.Len(t, events, 1)
			require.Equal(t, c.torn, events[0].TornTail, "%v", events[0].Err)
			require.Equal(t, def, rec)
			require.Equal(t, def.size, events[0].Pos)

			strict, _, err := run(plog.StrictRecovery{AllowTornTail: true})
			if !c.torn {
				require.ErrorIs(t, err, plog.ErrRecoveryRefused)
				return
			}
			require.NoError(t, err)
			require.Equal(t, def, strict)
		})
	}
}
