package log

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/checkpoint"
)

// remoteMetadataFile is the partition's record of its remote segments
// (tiered storage): which copies exist, which are being made and which are
// being deleted. It is written whole and atomically (tmp file, fsync,
// rename, directory fsync) at every change of state, so a crash leaves the
// old or the new record.
const remoteMetadataFile = "remote-log-metadata"

// remoteMetadataHeader is the first line of the file (its format version)
// while no log start is recorded; remoteMetadataHeaderStart the first line
// of the files that record one, on the line after it ("start <offset>"). A
// file without a log start keeps the first version, which partlog read
// before the log start was recorded.
const (
	remoteMetadataHeader      = "partlog-remote-log-metadata 1"
	remoteMetadataHeaderStart = "partlog-remote-log-metadata 2"
)

// remoteState is where a remote segment is in its life.
type remoteState uint8

const (
	// remoteCopying: recorded before the copy starts. A crash leaves the
	// copy unfinished, or finished but not recorded as such: the next
	// pass deletes it remotely and drops the record, and the segment,
	// still local, is copied again under a new ID.
	remoteCopying remoteState = iota
	// remoteCopied: the copy is complete and durable; reads may use it
	// and local retention may delete the local segment it covers.
	remoteCopied
	// remoteDeleting: total retention expired it, a truncation cut it,
	// or its partition is being deleted; recorded before the remote
	// delete, dropped after it. Reads no longer use it.
	remoteDeleting
)

var remoteStateNames = [...]string{remoteCopying: "copying", remoteCopied: "copied", remoteDeleting: "deleting"}

// remoteMeta is the remote log metadata of one partition: its remote
// segments in increasing offset order, without overlaps (each starts past
// the end of the one before; decodeRemoteMeta refuses others).
//
// The copies are contiguous with the log: the copier copies the durable
// sealed segments in order, each only when it starts at or after the end
// of the copies (copiedEnd), and stops at one that holds offsets on both
// sides of it; so the "copied" records and the local segments from
// copiedEnd on hold every offset of the log from the first copy's base
// up. A truncation to an offset records "deleting" every copy holding
// offsets at or past it before the cut is visible, and so does attach
// with the log end (a crash may take the end of the log: copies are only
// made of durable segments, so only a truncation the crash kept half of
// leaves one there); a copy is recorded "copied" only when no truncation
// came since its segment was chosen (partTier.copySegment).
//
// start is the log start of the whole log (Kafka's logStartOffset; the
// local log start lies at or above it): DeleteRecordsBefore raises it,
// a truncation that restarts the whole log lowers it to the restart's
// offset, and nothing below it is copied or read. The copies wholly below
// it are recorded "deleting" in the same write that raises it, and no copy
// started before is recorded after it (partTier.moveStart), so no record
// in use lies wholly below it. 0 when nothing moved it.
type remoteMeta struct {
	start int64
	segs  []remoteEntry
}

// remoteEntry is one remote segment and its state.
type remoteEntry struct {
	state remoteState
	desc  RemoteSegmentMetadata
}

// encode renders m in the file's text format.
func (m *remoteMeta) encode() []byte {
	var b bytes.Buffer
	if m.start > 0 {
		fmt.Fprintf(&b, "%s\nstart %d\n", remoteMetadataHeaderStart, m.start)
	} else {
		b.WriteString(remoteMetadataHeader)
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "%d\n", len(m.segs))
	for _, e := range m.segs {
		md := e.desc
		fmt.Fprintf(&b, "%s %s %d %d %d %d ", remoteStateNames[e.state], md.ID.ID, md.BaseOffset, md.EndOffset, md.MaxTimestamp, md.Size)
		if len(md.LeaderEpochs) == 0 {
			b.WriteString("-")
		}
		for i, ep := range md.LeaderEpochs {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%d:%d", ep.Epoch, ep.StartOffset)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// errRemoteMetadata marks a remote-log-metadata file that does not parse.
var errRemoteMetadata = errors.New("damaged remote-log-metadata")

// decodeRemoteMeta parses the file's contents for the partition tp.
func decodeRemoteMeta(tp TopicPartition, data []byte) (*remoteMeta, error) {
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	m := &remoteMeta{}
	switch lines[0] {
	case remoteMetadataHeader:
	case remoteMetadataHeaderStart:
		// The log start line, then the entries as in the first version.
		var start string
		var ok bool
		if len(lines) > 1 {
			start, ok = strings.CutPrefix(lines[1], "start ")
		}
		off, err := strconv.ParseInt(start, 10, 64)
		if !ok || err != nil || off < 0 {
			return nil, fmt.Errorf("%w: log start line %q", errRemoteMetadata, lines[min(1, len(lines)-1)])
		}
		m.start = off
		lines = lines[1:]
	default:
		return nil, fmt.Errorf("%w: header %q", errRemoteMetadata, lines[0])
	}
	if len(lines) < 2 {
		return nil, fmt.Errorf("%w: no entry count", errRemoteMetadata)
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n != len(lines)-2 {
		return nil, fmt.Errorf("%w: count %q for %d entries", errRemoteMetadata, lines[1], len(lines)-2)
	}
	for i, l := range lines[2:] {
		f := strings.Fields(l)
		if len(f) != 7 {
			return nil, fmt.Errorf("%w: entry %d: %q", errRemoteMetadata, i, l)
		}
		var e remoteEntry
		st := slices.Index(remoteStateNames[:], f[0])
		if st < 0 {
			return nil, fmt.Errorf("%w: entry %d: state %q", errRemoteMetadata, i, f[0])
		}
		e.state = remoteState(st)
		e.desc.ID = RemoteSegmentID{TopicPartition: tp, ID: f[1]}
		if !e.desc.ID.Valid() {
			return nil, fmt.Errorf("%w: entry %d: id %q", errRemoteMetadata, i, f[1])
		}
		nums := []*int64{&e.desc.BaseOffset, &e.desc.EndOffset, &e.desc.MaxTimestamp, &e.desc.Size}
		for j, p := range nums {
			if *p, err = strconv.ParseInt(f[2+j], 10, 64); err != nil {
				return nil, fmt.Errorf("%w: entry %d: %w", errRemoteMetadata, i, err)
			}
		}
		if f[6] != "-" {
			for _, pair := range strings.Split(f[6], ",") {
				es, os, ok := strings.Cut(pair, ":")
				ep, err1 := strconv.ParseInt(es, 10, 32)
				off, err2 := strconv.ParseInt(os, 10, 64)
				if !ok || err1 != nil || err2 != nil {
					return nil, fmt.Errorf("%w: entry %d: epochs %q", errRemoteMetadata, i, f[6])
				}
				e.desc.LeaderEpochs = append(e.desc.LeaderEpochs, EpochStart{Epoch: int32(ep), StartOffset: off})
			}
		}
		// The end is a batch's last offset: below MaxInt64, so that the
		// offset after it (EndOffset + 1) is one.
		if e.desc.BaseOffset < 0 || e.desc.EndOffset < e.desc.BaseOffset || e.desc.EndOffset == math.MaxInt64 || e.desc.Size < 0 {
			return nil, fmt.Errorf("%w: entry %d: offsets %d..%d, size %d", errRemoteMetadata, i, e.desc.BaseOffset, e.desc.EndOffset, e.desc.Size)
		}
		if len(m.segs) > 0 && e.desc.BaseOffset <= m.segs[len(m.segs)-1].desc.EndOffset {
			prev := m.segs[len(m.segs)-1].desc
			return nil, fmt.Errorf("%w: entry %d: offsets %d..%d overlap or precede entry %d's %d..%d",
				errRemoteMetadata, i, e.desc.BaseOffset, e.desc.EndOffset, i-1, prev.BaseOffset, prev.EndOffset)
		}
		m.segs = append(m.segs, e)
	}
	return m, nil
}

// loadRemoteMeta reads the partition's file; a missing file is an empty
// record.
func loadRemoteMeta(fs vfs.FS, dir string, tp TopicPartition) (*remoteMeta, error) {
	f, err := fs.Open(filepath.Join(dir, remoteMetadataFile))
	if errors.Is(err, errNotExist) {
		return &remoteMeta{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	data := make([]byte, fi.Size())
	// io.ReaderAt allows io.EOF with a read that reaches the end.
	if n, err := f.ReadAt(data, 0); err != nil && len(data) > 0 && (n < len(data) || !errors.Is(err, io.EOF)) {
		return nil, err
	}
	return decodeRemoteMeta(tp, data)
}

// store writes m durably.
func (m *remoteMeta) store(fs vfs.FS, dir string) error {
	return checkpoint.WriteAtomic(fs, filepath.Join(dir, remoteMetadataFile), m.encode())
}

// clone returns a copy of m whose slice the caller may change.
func (m *remoteMeta) clone() *remoteMeta {
	return &remoteMeta{start: m.start, segs: slices.Clone(m.segs)}
}

// copiedEnd returns the offset after the last copied segment, or -1 when
// none is copied.
func (m *remoteMeta) copiedEnd() int64 {
	for i := len(m.segs) - 1; i >= 0; i-- {
		if m.segs[i].state == remoteCopied {
			return m.segs[i].desc.EndOffset + 1
		}
	}
	return -1
}

// locate says where a read of offset, below the local log start
// localStart, starts (law 3 for the whole log): in the copied segment md
// that holds offset or, when offset lies in a gap of a follower's offsets
// between two copies, in the first copy after it (copyServed); at the
// local log start when the gap runs from the last copy below localStart up
// to it (copyLocal); nowhere when offset is below the first copy, outside
// the whole log (copyNone). Only "copied" records count: the others hold
// no offset of the log a read may see.
func (m *remoteMeta) locate(offset, localStart int64) (RemoteSegmentMetadata, copyRead) {
	below := false // a copy ends below offset: offset is in the whole log
	for _, e := range m.segs {
		if e.state != remoteCopied {
			continue
		}
		if e.desc.BaseOffset >= localStart {
			break // held locally too: the local segments answer
		}
		if e.desc.EndOffset >= offset {
			if e.desc.BaseOffset <= offset || below {
				return e.desc, copyServed
			}
			return RemoteSegmentMetadata{}, copyNone // below the first copy
		}
		below = true
	}
	if below {
		return RemoteSegmentMetadata{}, copyLocal
	}
	return RemoteSegmentMetadata{}, copyNone
}

// copied reports whether m records the copy id "copied".
func (m *remoteMeta) copied(id RemoteSegmentID) bool {
	i := m.index(id)
	return i >= 0 && m.segs[i].state == remoteCopied
}

// index returns the position of the entry of id, or -1.
func (m *remoteMeta) index(id RemoteSegmentID) int {
	return slices.IndexFunc(m.segs, func(e remoteEntry) bool { return e.desc.ID == id })
}
