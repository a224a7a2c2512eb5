package log_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/legacy"
	plog "github.com/partlog/partlog/log"
)

// TestVerifyLegacyDecodesOnce checks that Verify checks each legacy
// message's CRC-32 once and decompresses each compressed legacy wrapper
// once (the walk's check of the CRC and its decoding of a wrapper's first
// offset serve the validation of its records), counted by legacy.Work on
// Kafka's legacy fixtures. Before, the walk checked the CRC and decoded
// the wrapper, then ValidateLegacy checked the CRC and decompressed it
// again, and LegacyBaseOffset decompressed it a third time.
func TestVerifyLegacyDecodesOnce(t *testing.T) {
	for _, d := range legacyDirs {
		t.Run(d.name, func(t *testing.T) {
			dir := copyFixtureFrom(t, "legacy", d.name)
			// What each step once costs: a CRC-32 per legacy message and
			// per inner message of a wrapper (its records are checked),
			// a decompression per wrapper.
			var messages, inner, wrappers int64
			for name, set := range logFiles(t, dir) {
				for len(set) > 0 {
					n, magic, _, err := batch.FrameEntry(set)
					require.NoError(t, err, name)
					if legacy.IsMagic(magic) {
						messages++
						if e := legacy.Entry(set[:n]); e.Compression() != legacy.CompressionNone {
							wrappers++
							var dec batch.Decoder
							recs, err := dec.AppendLegacyRecords(nil, e, false)
							require.NoError(t, err, name)
							inner += int64(len(recs))
						}
					}
					set = set[n:]
				}
			}
			require.Positive(t, messages, "the fixture holds legacy messages")
			p, err := plog.Open(dir, plog.Config{})
			require.NoError(t, err)
			defer func() { require.NoError(t, p.Close()) }()

			crcs, decompressions := legacy.Work.CRCChecks.Load(), legacy.Work.Decompressions.Load()
			require.NoError(t, p.Verify())
			require.Equal(t, messages+inner, legacy.Work.CRCChecks.Load()-crcs, "CRC-32s checked by Verify")
			require.Equal(t, wrappers, legacy.Work.Decompressions.Load()-decompressions, "wrappers decompressed by Verify")
		})
	}
}
