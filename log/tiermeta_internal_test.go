package log

import (
	"io"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/index/vfs/vfstest"
)

// TestRemoteMetaDecodeRejects lists metadata files decodeRemoteMeta
// refuses with errRemoteMetadata.
func TestRemoteMetaDecodeRejects(t *testing.T) {
	const id1, id2 = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	tp := TopicPartition{"t", 0}
	for _, tc := range []struct{ name, data string }{
		{"header", "partlog-remote-log-metadata 3\n0\n"},
		{"no log start", "partlog-remote-log-metadata 2\n0\n"},
		{"negative log start", "partlog-remote-log-metadata 2\nstart -1\n0\n"},
		{"log start only", "partlog-remote-log-metadata 2\nstart 5\n"},
		{"log start in version 1", "partlog-remote-log-metadata 1\nstart 5\n0\n"},
		{"count", "partlog-remote-log-metadata 1\n2\ncopied " + id1 + " 0 9 1 100 -\n"},
		{"base order", "partlog-remote-log-metadata 1\n2\ncopied " + id1 + " 10 19 1 100 -\ncopied " + id2 + " 0 9 1 100 -\n"},
		{"overlap", "partlog-remote-log-metadata 1\n2\ncopied " + id1 + " 0 9 1 100 -\ncopied " + id2 + " 5 19 1 100 -\n"},
		{"end before base", "partlog-remote-log-metadata 1\n1\ncopied " + id1 + " 10 9 1 100 -\n"},
		{"end at MaxInt64", "partlog-remote-log-metadata 1\n1\ncopied " + id1 + " 10 9223372036854775807 1 100 -\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeRemoteMeta(tp, []byte(tc.data))
			require.ErrorIs(t, err, errRemoteMetadata)
		})
	}
	m, err := decodeRemoteMeta(tp, []byte("partlog-remote-log-metadata 1\n2\ncopied "+id1+" 0 9 1 100 -\ndeleting "+id2+" 10 19 1 100 3:10\n"))
	require.NoError(t, err)
	require.Len(t, m.segs, 2)
	require.Zero(t, m.start)
}

// TestRemoteMetaLogStartVersions: the whole log's start is written in the
// second version of the file, and a file without one in the first, which
// partlog read before the log start was recorded; both decode to what was
// encoded.
func TestRemoteMetaLogStartVersions(t *testing.T) {
	tp := TopicPartition{"t", 0}
	entry := remoteEntry{state: remoteCopied,
		desc: RemoteSegmentMetadata{ID: NewRemoteSegmentID(tp), BaseOffset: 0, EndOffset: 9, MaxTimestamp: 5, Size: 100}}
	for _, tc := range []struct {
		start  int64
		header string
	}{
		{0, "partlog-remote-log-metadata 1\n1\n"},
		{7, "partlog-remote-log-metadata 2\nstart 7\n1\n"},
	} {
		m := &remoteMeta{start: tc.start, segs: []remoteEntry{entry}}
		b := m.encode()
		require.True(t, strings.HasPrefix(string(b), tc.header), "start %d: %q", tc.start, b)
		got, err := decodeRemoteMeta(tp, b)
		require.NoError(t, err)
		assert.Equal(t, m, got)
	}
}

// FuzzRemoteMeta decodes arbitrary metadata files: never a panic; an
// error wraps errRemoteMetadata; what decodes has increasing, disjoint
// entries whose end + 1 does not overflow, and encodes to a file that
// decodes to the same entries.
func FuzzRemoteMeta(f *testing.F) {
	const id1, id2 = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	f.Add([]byte("partlog-remote-log-metadata 1\n0\n"))
	f.Add([]byte("partlog-remote-log-metadata 1\n2\ncopied " + id1 + " 0 9 1 100 -\ndeleting " + id2 + " 10 19 1 100 3:10,4:15\n"))
	f.Add([]byte("partlog-remote-log-metadata 1\n1\ncopying " + id1 + " 10 9223372036854775806 -1 0 -\n"))
	f.Add([]byte("partlog-remote-log-metadata 2\nstart 15\n2\ndeleting " + id1 + " 0 9 1 100 -\ncopied " + id2 + " 10 19 1 100 3:10,4:15\n"))
	tp := TopicPartition{"t", 0}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeRemoteMeta(tp, data)
		if err != nil {
			require.ErrorIs(t, err, errRemoteMetadata)
			return
		}
		for i, e := range m.segs {
			require.Less(t, e.desc.EndOffset, int64(math.MaxInt64))
			require.LessOrEqual(t, e.desc.BaseOffset, e.desc.EndOffset)
			if i > 0 {
				require.Greater(t, e.desc.BaseOffset, m.segs[i-1].desc.EndOffset)
			}
		}
		require.GreaterOrEqual(t, m.start, int64(0))
		again, err := decodeRemoteMeta(tp, m.encode())
		require.NoError(t, err)
		require.Equal(t, m.segs, again.segs)
		require.Equal(t, m.start, again.start)
	})
}

// eofAtEndFS opens files whose ReadAt returns io.EOF with a read that
// reaches the end of the file, as io.ReaderAt allows.
type eofAtEndFS struct{ vfs.FS }

func (f eofAtEndFS) Open(name string) (vfs.File, error) {
	file, err := f.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return eofAtEndFile{file}, nil
}

type eofAtEndFile struct{ vfs.File }

func (f eofAtEndFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(b, off)
	if err == nil {
		if fi, serr := f.Stat(); serr == nil && off+int64(n) == fi.Size() {
			err = io.EOF
		}
	}
	return n, err
}

// TestRemoteMetaLoadReadAtEOF: a full read that returns io.EOF loads.
func TestRemoteMetaLoadReadAtEOF(t *testing.T) {
	mem := vfstest.NewMem()
	require.NoError(t, mem.MkdirAll("/p", 0o755))
	tp := TopicPartition{"t", 0}
	m := &remoteMeta{segs: []remoteEntry{{state: remoteCopied,
		desc: RemoteSegmentMetadata{ID: NewRemoteSegmentID(tp), BaseOffset: 0, EndOffset: 9, MaxTimestamp: 5, Size: 100}}}}
	require.NoError(t, m.store(mem, "/p"))
	got, err := loadRemoteMeta(eofAtEndFS{mem}, "/p", tp)
	require.NoError(t, err)
	assert.Equal(t, m.segs, got.segs)
	_, err = mem.Stat(filepath.Join("/p", remoteMetadataFile))
	require.NoError(t, err)
}
