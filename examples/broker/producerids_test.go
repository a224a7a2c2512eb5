package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/partlog/partlog/index/vfs"
)

// initProducerID asks the broker for an idempotent producer id.
func initProducerID(t *testing.T, addr string) *kmsg.InitProducerIDResponse {
	t.Helper()
	rc := dialRaw(t, addr)
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	req.TransactionTimeoutMillis = 60000
	return rc.do(req).(*kmsg.InitProducerIDResponse)
}

// InitProducerID hands out ids from durably reserved blocks of 1000: ids
// are consecutive within a run, and a restart continues at the next block,
// so no id is handed out twice even though the broker does not remember
// how many of the last block it used.
func TestInitProducerIDNeverReused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seen := make(map[int64]bool)
	get := func(b *testBroker, want int64) {
		t.Helper()
		resp := initProducerID(t, b.addr)
		require.Zero(t, resp.ErrorCode, "%v", kerr.ErrorForCode(resp.ErrorCode))
		assert.Equal(t, want, resp.ProducerID)
		assert.Zero(t, resp.ProducerEpoch)
		assert.False(t, seen[resp.ProducerID], "producer id %d handed out twice", resp.ProducerID)
		seen[resp.ProducerID] = true
	}
	file := filepath.Join(dir, producerIDFile)

	b := startBroker(t, dir, 1)
	_, err := os.Stat(file)
	assert.ErrorIs(t, err, os.ErrNotExist, "no block is reserved before an id is asked for")
	get(b, 0)
	get(b, 1)
	get(b, 2)
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "0\n1000\n", string(data))
	b.stop(t)

	b = startBroker(t, dir, 1)
	get(b, 1000)
	get(b, 1001)
	b.stop(t)

	b = startBroker(t, dir, 1)
	get(b, 2000)
	data, err = os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "0\n3000\n", string(data))
}

// A data directory without the id file (written by an older broker, or the
// file was removed) continues above every producer id its partitions know.
func TestInitProducerIDAboveStoredProducers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := startBroker(t, dir, 1)
	rc := dialRaw(t, b.addr)
	got := produceRaw(t, rc, 9, "orders", 0, idemBatch(t, 5000, 0, 0, 2, false))
	require.Zero(t, got.ErrorCode)
	b.stop(t)
	_, err := os.Stat(filepath.Join(dir, producerIDFile))
	require.ErrorIs(t, err, os.ErrNotExist)

	b = startBroker(t, dir, 1)
	resp := initProducerID(t, b.addr)
	require.Zero(t, resp.ErrorCode)
	assert.EqualValues(t, 5001, resp.ProducerID)
}

// A damaged id file stops the broker from starting (it could otherwise hand
// out an id twice); the error names the file.
func TestProducerIDFileInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, data string }{
		{"empty", ""},
		{"no newline", "0\n1000"},
		{"one line", "1000\n"},
		{"extra line", "0\n1000\n7\n"},
		{"unknown version", "1\n1000\n"},
		{"not a number", "0\nabc\n"},
		{"negative", "0\n-5\n"},
		{"too long", "0\n" + string(make([]byte, 100)) + "\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, producerIDFile), []byte(tc.data), 0o644))
			_, err := openProducerIDs(vfs.Default, dir, 0)
			require.ErrorIs(t, err, errProducerIDFile)
			assert.Contains(t, err.Error(), producerIDFile)
		})
	}
}

// When the next block cannot be reserved no id is returned and none is
// consumed; InitProducerID answers COORDINATOR_LOAD_IN_PROGRESS, which
// clients retry.
func TestProducerIDReservationFails(t *testing.T) {
	t.Parallel()
	fs := &failingFS{FS: vfs.Default}
	dir := t.TempDir()
	ids, err := openProducerIDs(fs, dir, 0)
	require.NoError(t, err)
	for _, op := range []string{"create", "write", "sync", "rename"} {
		fs.failNext(op)
		_, err := ids.allocate()
		require.ErrorIs(t, err, errInjected, op)
		assert.Contains(t, err.Error(), producerIDFile)
	}
	id, err := ids.allocate()
	require.NoError(t, err)
	assert.Zero(t, id, "a failed reservation consumed an id")
	end, err := readProducerIDFile(fs, filepath.Join(dir, producerIDFile))
	require.NoError(t, err)
	assert.EqualValues(t, producerIDBlock, end)

	s := &server{prodIDPool: ids, log: slog.New(slog.DiscardHandler)}
	fs.failNext("create")
	ids.next = ids.reserved // the block is used up
	resp := s.initProducerID(kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
	assert.Equal(t, kerr.CoordinatorLoadInProgress.Code, resp.ErrorCode)
	assert.EqualValues(t, -1, resp.ProducerID)
}

// errInjected is the error failingFS fails an operation with.
var errInjected = errors.New("injected failure")

// failingFS is a filesystem (the operating system's, embedded) that fails
// the next operation of one kind, once: "create", "rename", and a created
// file's "write" or "sync".
type failingFS struct {
	vfs.FS
	mu   sync.Mutex
	fail string
}

// failNext makes the next operation of kind op fail.
func (f *failingFS) failNext(op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = op
}

// take returns the injected error when op is the operation to fail, and
// then fails nothing more.
func (f *failingFS) take(op, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != op {
		return nil
	}
	f.fail = ""
	return fmt.Errorf("%s %s: %w", op, name, errInjected)
}

func (f *failingFS) Create(name string) (vfs.File, error) {
	if err := f.take("create", name); err != nil {
		return nil, err
	}
	file, err := f.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &failingFile{File: file, fs: f, name: name}, nil
}

func (f *failingFS) Rename(oldname, newname string) error {
	if err := f.take("rename", oldname); err != nil {
		return err
	}
	return f.FS.Rename(oldname, newname)
}

// failingFile is a file failingFS created.
type failingFile struct {
	vfs.File
	fs   *failingFS
	name string
}

func (f *failingFile) Write(p []byte) (int, error) {
	if err := f.fs.take("write", f.name); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *failingFile) Sync() error {
	if err := f.fs.take("sync", f.name); err != nil {
		return err
	}
	return f.File.Sync()
}
