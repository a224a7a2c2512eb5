package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/partlog/partlog/index/vfs"
)

// producerIDFile is the file in the data directory that records how far
// producer ids have been reserved. Kafka keeps the same fact in ZooKeeper
// (/latest_producer_id_block) or in the KRaft metadata log
// (ProducerIdsRecord); a single broker keeps it next to its partitions.
const producerIDFile = "partlog-broker-producer-ids"

// producerIDBlock is how many ids one reservation covers: Kafka's
// ProducerIdManager also hands out blocks of 1000.
const producerIDBlock = 1000

// producerIDVersion is the first line of producerIDFile.
const producerIDVersion = 0

// errProducerIDFile reports a producerIDFile the broker cannot read: it
// refuses to start rather than risk handing out an id twice.
var errProducerIDFile = errors.New("broker: invalid producer id file")

// producerIDs hands out producer ids that are never reused, across
// restarts too: before an id of a new block is returned, the block's end is
// written atomically (tmp file, fsync, rename, directory fsync) to
// producerIDFile. A restart continues at the recorded end, skipping what
// was left of the last block, as Kafka does.
type producerIDs struct {
	fs   vfs.FS
	path string

	mu       sync.Mutex
	next     int64 // the id the next call returns
	reserved int64 // ids below reserved are durably reserved
}

// openProducerIDs reads dir's producerIDFile (absent: nothing reserved yet)
// and starts at the larger of the recorded end and floor (one past the
// largest producer id the partitions know, so a data directory written
// before the file existed, or whose file was removed, reuses no id those
// partitions still hold).
func openProducerIDs(fsys vfs.FS, dir string, floor int64) (*producerIDs, error) {
	p := &producerIDs{fs: fsys, path: filepath.Join(dir, producerIDFile)}
	end, err := readProducerIDFile(fsys, p.path)
	if err != nil {
		return nil, err
	}
	p.next = max(end, floor)
	p.reserved = p.next
	return p, nil
}

// readProducerIDFile returns the reserved end recorded at path, 0 when the
// file does not exist.
func readProducerIDFile(fsys vfs.FS, path string) (int64, error) {
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	buf := make([]byte, 64)
	n, err := f.ReadAt(buf, 0)
	if n == len(buf) {
		return 0, fmt.Errorf("%w: %s: longer than %d bytes", errProducerIDFile, path, len(buf)-1)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	lines := strings.Split(string(buf[:n]), "\n")
	if len(lines) != 3 || lines[2] != "" {
		return 0, fmt.Errorf("%w: %s: want two lines (version, next id), got %q", errProducerIDFile, path, buf[:n])
	}
	if v, err := strconv.ParseInt(lines[0], 10, 32); err != nil || v != producerIDVersion {
		return 0, fmt.Errorf("%w: %s: version %q, want %d", errProducerIDFile, path, lines[0], producerIDVersion)
	}
	end, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || end < 0 {
		return 0, fmt.Errorf("%w: %s: next id %q is not a non-negative integer", errProducerIDFile, path, lines[1])
	}
	return end, nil
}

// allocate returns a fresh producer id. When the reserved block is used
// up it first reserves the next one durably; if that write fails, no id is
// returned (and none is consumed), so an id a client holds is always
// covered by the file.
func (p *producerIDs) allocate() (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next == math.MaxInt64 {
		return 0, fmt.Errorf("broker: producer ids exhausted")
	}
	if p.next >= p.reserved {
		end := p.next + min(producerIDBlock, math.MaxInt64-p.next)
		data := fmt.Appendf(nil, "%d\n%d\n", producerIDVersion, end)
		if err := vfs.WriteFileAtomic(p.fs, p.path, data); err != nil {
			return 0, fmt.Errorf("broker: reserving producer ids %d..%d in %s: %w", p.next, end-1, p.path, err)
		}
		p.reserved = end
	}
	id := p.next
	p.next++
	return id, nil
}
