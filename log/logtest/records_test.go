package logtest_test

import (
	"io"
	iofs "io/fs"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/index/vfs/vfstest"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// TestCompareRecords checks that the first difference is named by its
// offset, its field and both values.
func TestCompareRecords(t *testing.T) {
	rec := func(off int64, key, value string) logtest.Record {
		return logtest.Record{Offset: off, Timestamp: 10 + off, Key: []byte(key), Value: []byte(value)}
	}
	want := []logtest.Record{rec(2, "a", "x"), rec(3, "b", "y")}
	require.NoError(t, logtest.CompareRecords([]logtest.Record{rec(2, "a", "x"), rec(3, "b", "y")}, want))
	for _, c := range []struct {
		name string
		got  []logtest.Record
		msg  string
	}{
		{"value", []logtest.Record{rec(2, "a", "x"), rec(3, "b", "z")}, `offset 3: value: got "z", want "y"`},
		{"key", []logtest.Record{rec(2, "c", "x"), rec(3, "b", "y")}, `offset 2: key: got "c", want "a"`},
		{"null key", []logtest.Record{{Offset: 2, Timestamp: 12, Value: []byte("x")}, rec(3, "b", "y")}, `offset 2: key: got null, want "a"`},
		{"timestamp", []logtest.Record{{Offset: 2, Timestamp: 1, Key: []byte("a"), Value: []byte("x")}, rec(3, "b", "y")}, `offset 2: timestamp: got 1, want 12`},
		{"offset", []logtest.Record{rec(2, "a", "x"), rec(4, "b", "y")}, `offset 3: offset: got 4, want 3`},
		{"missing", []logtest.Record{rec(2, "a", "x")}, `offset 3: record: got none, want {timestamp 13 key "b" value "y"}`},
		{"extra", append([]logtest.Record{rec(2, "a", "x"), rec(3, "b", "y")}, rec(4, "c", "w")), `offset 4: record: got {timestamp 14 key "c" value "w"}, want none`},
		{"headers", []logtest.Record{rec(2, "a", "x"), {Offset: 3, Timestamp: 13, Key: []byte("b"), Value: []byte("y"),
			Headers: []batch.RecordHeader{{Key: []byte("h"), Value: nil}}}}, `offset 3: headers: got ["h"=null], want none`},
	} {
		err := logtest.CompareRecords(c.got, want)
		require.ErrorIs(t, err, logtest.ErrMismatch, c.name)
		require.EqualError(t, err, c.msg, c.name)
	}
}

// TestCheckNamesTheField: when a read returns another batch than the
// model's, Check names the offset, the field and both values.
func TestCheckNamesTheField(t *testing.T) {
	p, err := plog.Open(t.TempDir(), plog.Config{})
	require.NoError(t, err)
	defer p.Close()
	m := logtest.NewModel(0, false)
	bld := batch.NewBuilder(batch.BuilderOptions{})
	for i, v := range []string{"a", "b", "c"} {
		require.NoError(t, bld.Add(batch.Record{Key: []byte{'k', byte('0' + i)}, Value: []byte(v), Timestamp: 100 + int64(i)}))
	}
	info, err := p.AppendBuilder(bld)
	require.NoError(t, err)
	// The model is told of the same records, but one value differs.
	other := batch.NewBuilder(batch.BuilderOptions{})
	for i, v := range []string{"a", "x", "c"} {
		require.NoError(t, other.Add(batch.Record{Key: []byte{'k', byte('0' + i)}, Value: []byte(v), Timestamp: 100 + int64(i)}))
	}
	require.NoError(t, m.AppendBuilder(other, info))
	err = logtest.Check(p, m)
	var mm *logtest.MismatchError
	require.ErrorAs(t, err, &mm)
	require.Equal(t, logtest.MismatchError{Offset: 1, Field: "value", Got: `"b"`, Want: `"x"`}, *mm)
	require.Contains(t, err.Error(), `offset 1: value: got "b", want "x"`)
}

// TestModelAppendBuilder checks the model's records and its check of the
// AppendInfo it is given.
func TestModelAppendBuilder(t *testing.T) {
	p, err := plog.Open(t.TempDir(), plog.Config{})
	require.NoError(t, err)
	defer p.Close()
	m := logtest.NewModel(0, false)
	bld := batch.NewBuilder(batch.BuilderOptions{})
	require.NoError(t, bld.Add(batch.Record{Key: nil, Value: []byte("v"), Timestamp: 5,
		Headers: []batch.RecordHeader{{Key: []byte("h"), Value: []byte("1")}}}))
	require.NoError(t, bld.Add(batch.Record{Key: []byte("k"), Value: nil, Timestamp: 6}))
	info, err := p.AppendBuilder(bld)
	require.NoError(t, err)

	wrong := info
	wrong.LastOffset++
	err = m.Clone().AppendBuilder(bld, wrong)
	require.ErrorIs(t, err, logtest.ErrMismatch)
	require.ErrorContains(t, err, "offset 0: append last offset: got 2, want 1")

	require.NoError(t, m.AppendBuilder(bld, info))
	require.NoError(t, logtest.Check(p, m))
	want := []logtest.Record{
		{Offset: 0, Timestamp: 5, Value: []byte("v"), Headers: []batch.RecordHeader{{Key: []byte("h"), Value: []byte("1")}}},
		{Offset: 1, Timestamp: 6, Key: []byte("k")},
	}
	require.NoError(t, logtest.CompareRecords(m.Records(0, m.HighWatermark()), want))
	require.Len(t, m.Records(1, 2), 1)
	r, err := p.ReadFrom(0, 1<<20)
	require.NoError(t, err)
	got, err := logtest.DecodeRecords(r.Bytes())
	require.NoError(t, r.Close())
	require.NoError(t, err)
	require.NoError(t, logtest.CompareRecords(got, want))
}

// TestCrashFS checks the crash point: the state is taken just before
// operation at, the live filesystem goes on, and a negative at never
// crashes.
func TestCrashFS(t *testing.T) {
	write := func(cfs *logtest.CrashFS) {
		f, err := cfs.Create("/f") // operation 0
		require.NoError(t, err)
		d, err := cfs.OpenDir("/") // 1
		require.NoError(t, err)
		require.NoError(t, d.Sync())       // 2: the entry of /f is durable
		require.NoError(t, d.Close())      // 3
		_, err = f.Write([]byte("synced")) // 4
		require.NoError(t, err)
		require.NoError(t, f.Sync())          // 5
		_, err = f.Write([]byte("+unsynced")) // 6
		require.NoError(t, err)
		require.NoError(t, f.Close()) // 7
	}
	count := logtest.NewCrashFS(-1, vfstest.CrashOptions{})
	write(count)
	require.Equal(t, int64(8), count.Ops())
	require.False(t, count.Crashed())
	require.Nil(t, count.State())

	cfs := logtest.NewCrashFS(6, vfstest.CrashOptions{})
	write(cfs)
	require.True(t, cfs.Crashed())
	require.Equal(t, "synced+unsynced", string(readAllFile(t, cfs.Live(), "/f")), "the live filesystem went on")
	require.Equal(t, "synced", string(readAllFile(t, cfs.State(), "/f")), "the crash kept the synced bytes only")

	early := logtest.NewCrashFS(2, vfstest.CrashOptions{})
	write(early)
	_, err := early.State().Stat("/f")
	require.ErrorIs(t, err, iofs.ErrNotExist, "a crash before the directory sync loses the entry")
}

// readAllFile returns the contents of the named file of fsys.
func readAllFile(t *testing.T, fsys vfs.FS, name string) []byte {
	t.Helper()
	f, err := fsys.Open(name)
	require.NoError(t, err)
	defer f.Close()
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	return b
}
