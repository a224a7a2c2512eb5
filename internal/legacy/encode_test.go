package legacy

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/pierrec/lz4/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/base"
)

// fixtureSet is a real Kafka broker's record set of magic 1 messages,
// gzip magic 1 wrappers and v2 batches (../../log/testdata/PROVENANCE.md,
// legacy/mixed-0).
const fixtureSet = "../../log/testdata/legacy/mixed-0/00000000000000000000.log"

// messageOf returns the fields of the framed entry e.
func messageOf(t *testing.T, e Entry) Message {
	t.Helper()
	require.NoError(t, e.ValidateHeader())
	k, v, err := e.KeyValue()
	require.NoError(t, err)
	m := Message{Offset: e.Offset(), Magic: e.Magic(), Attributes: e.Attributes(), Key: k, Value: v}
	if e.Magic() == MagicV1 {
		m.Timestamp = e.Timestamp()
	}
	return m
}

// TestAppendMessageFixtureGolden: re-encoding every legacy message of the
// Kafka fixture from its fields gives its bytes back: the plain magic 1
// messages, the gzip wrappers (their compressed value as stored) and the
// inner messages of each wrapper.
func TestAppendMessageFixtureGolden(t *testing.T) {
	set, err := os.ReadFile(fixtureSet)
	require.NoError(t, err)
	plain, wrappers, inner := 0, 0, 0
	for len(set) > 0 {
		if !IsMagic(int8(set[MagicOffset])) {
			n := int(int32(uint32(set[8])<<24|uint32(set[9])<<16|uint32(set[10])<<8|uint32(set[11]))) + LogOverhead
			set = set[n:] // a v2 batch
			continue
		}
		e, rest, err := Parse(set)
		require.NoError(t, err)
		set = rest
		m := messageOf(t, e)
		got, err := AppendMessage(nil, m)
		require.NoError(t, err)
		require.Equal(t, []byte(e), got, "message at offset %d", e.Offset())
		if e.Compression() == CompressionNone {
			plain++
			continue
		}
		wrappers++
		require.Equal(t, uint8(1), e.Compression(), "the fixture's wrappers are gzip")
		zr, err := gzip.NewReader(bytes.NewReader(m.Value))
		require.NoError(t, err)
		ms, err := io.ReadAll(zr)
		require.NoError(t, err)
		for len(ms) > 0 {
			in, rest, err := Parse(ms)
			require.NoError(t, err)
			ms = rest
			got, err := AppendMessage(nil, messageOf(t, in))
			require.NoError(t, err)
			require.Equal(t, []byte(in), got, "inner message at relative offset %d", in.Offset())
			inner++
		}
	}
	assert.Equal(t, 4, plain)
	assert.Equal(t, 3, wrappers)
	assert.Equal(t, 4, inner)
}

// TestAppendMessageRoundTrip: what AppendMessage writes parses and
// validates, and reads back field for field, under both magics, with null
// and empty keys and values.
func TestAppendMessageRoundTrip(t *testing.T) {
	for _, m := range []Message{
		{Offset: 5, Magic: MagicV0, Value: []byte("abc")},
		{Offset: 6, Magic: MagicV1, Timestamp: 1_700_000_000_000, Value: []byte("abc")},
		{Offset: 7, Magic: MagicV0, Key: []byte("k"), Value: []byte("v")},
		{Offset: 8, Magic: MagicV0},
		{Offset: 9, Magic: MagicV0, Key: []byte{}, Value: []byte{}},
		{Offset: 1 << 40, Magic: MagicV1, Timestamp: 1_700_000_000_000, Key: []byte("key"), Value: nil},
		{Offset: 0, Magic: MagicV1, Attributes: 0x08 | 2, Timestamp: -1, Key: nil, Value: bytes.Repeat([]byte("x"), 300)},
	} {
		b, err := AppendMessage([]byte("prefix"), m)
		require.NoError(t, err)
		require.Equal(t, "prefix", string(b[:6]))
		e, rest, err := Parse(b[6:])
		require.NoError(t, err)
		require.Empty(t, rest)
		require.NoError(t, e.ValidateHeader())
		got := messageOf(t, e)
		if m.Magic == MagicV0 {
			m.Timestamp = 0
		}
		require.Equal(t, m, got)
		// The message helper of legacy_test.go writes the same bytes.
		if m.Offset == 5 || m.Offset == 6 {
			require.Equal(t, message(m.Offset, m.Magic, m.Value), []byte(e))
		}
	}
	_, err := AppendMessage(nil, Message{Magic: 2})
	require.Error(t, err)
	// An error from the value's writer leaves dst as it was.
	boom := errors.New("boom")
	b, err := AppendMessageFunc([]byte("x"), Message{Magic: MagicV1}, func(b []byte) ([]byte, error) { return append(b, 1, 2), boom })
	require.ErrorIs(t, err, boom)
	require.Equal(t, "x", string(b))
}

// TestSetOffsetKeepsCRC: an entry moved to another offset stays valid.
func TestSetOffsetKeepsCRC(t *testing.T) {
	e := Entry(message(3, MagicV1, []byte("v")))
	e.SetOffset(1234)
	require.Equal(t, int64(1234), e.Offset())
	require.NoError(t, e.ValidateHeader())
}

// TestXXH32 checks the hash against the reference vectors of XXH32 (seed
// 0), below and above its 16-byte stripe.
func TestXXH32(t *testing.T) {
	for in, want := range map[string]uint32{
		"":    0x02CC5D05,
		"a":   0x550D7456,
		"abc": 0x32D153FF,
		"Nobody inspects the spammish repetition": 0xE2293B2F,
	} {
		assert.Equal(t, want, xxh32([]byte(in)), "%q", in)
	}
}

// TestLZ4HeaderChecksum: the frame an LZ4 writer makes carries the header
// checksum of the frame format, which is Kafka's under magic 1;
// SetLZ4HeaderChecksum writes Kafka's magic 0 checksum (KAFKA-3160: over
// the magic number and the descriptor), which a reader of the frame
// format rejects, and back.
func TestLZ4HeaderChecksum(t *testing.T) {
	for _, size := range []bool{false, true} {
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		opts := []lz4.Option{lz4.BlockSizeOption(lz4.Block64Kb), lz4.BlockChecksumOption(false), lz4.ChecksumOption(false)}
		if size {
			opts = append(opts, lz4.SizeOption(5)) // FLG bit 3: an 8-byte content size in the descriptor
		}
		require.NoError(t, w.Apply(opts...))
		_, err := w.Write([]byte("hello"))
		require.NoError(t, err)
		require.NoError(t, w.Close())
		frame := buf.Bytes()
		ok, err := LZ4HeaderChecksumOK(frame, MagicV1)
		require.NoError(t, err)
		require.True(t, ok, "the frame format's checksum is magic 1's")
		correct := bytes.Clone(frame)

		require.NoError(t, SetLZ4HeaderChecksum(frame, MagicV0))
		ok, err = LZ4HeaderChecksumOK(frame, MagicV0)
		require.NoError(t, err)
		require.True(t, ok)
		ok, _ = LZ4HeaderChecksumOK(frame, MagicV1)
		require.False(t, ok, "magic 0's checksum is the frame format's for this header")
		_, err = io.ReadAll(lz4.NewReader(bytes.NewReader(frame)))
		require.Error(t, err, "a frame-format reader rejects Kafka's magic 0 header")

		require.NoError(t, SetLZ4HeaderChecksum(frame, MagicV1))
		require.Equal(t, correct, frame)
		out, err := io.ReadAll(lz4.NewReader(bytes.NewReader(frame)))
		require.NoError(t, err)
		require.Equal(t, "hello", string(out))
	}
	for _, bad := range [][]byte{nil, {4, 0x22, 0x4d, 0x18, 0x60, 0x40}, {1, 2, 3, 4, 5, 6, 7, 8}, {4, 0x22, 0x4d, 0x18, 0x68, 0x40, 0, 0}} {
		err := SetLZ4HeaderChecksum(bad, MagicV0)
		require.ErrorIs(t, err, base.ErrCorrupt, "% x", bad)
	}
}

// FuzzAppendMessage: whatever the fields, what AppendMessage writes frames
// as one entry, validates and reads back field for field.
func FuzzAppendMessage(f *testing.F) {
	f.Add(int64(3), uint8(1), int8(0), int64(1_700_000_000_000), []byte("k"), []byte("v"), false, false)
	f.Add(int64(0), uint8(0), int8(2), int64(0), []byte{}, []byte{}, true, true)
	f.Fuzz(func(t *testing.T, off int64, magic uint8, attrs int8, ts int64, key, value []byte, nullKey, nullValue bool) {
		m := Message{Offset: off, Magic: int8(magic % 2), Attributes: attrs, Timestamp: ts, Key: key, Value: value}
		if nullKey {
			m.Key = nil
		} else if m.Key == nil {
			m.Key = []byte{}
		}
		if nullValue {
			m.Value = nil
		} else if m.Value == nil {
			m.Value = []byte{}
		}
		b, err := AppendMessage(nil, m)
		require.NoError(t, err)
		e, rest, err := Parse(b)
		require.NoError(t, err)
		require.Empty(t, rest)
		require.Equal(t, len(b), e.Size())
		if m.Magic == MagicV0 {
			m.Timestamp = 0
		}
		require.Equal(t, m, messageOf(t, e))
	})
}
