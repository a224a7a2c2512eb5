package main

import (
	"encoding/binary"
	"io"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A Fetch response is mostly record batches, and partlog stores them in the
// exact bytes a Fetch response carries. So instead of copying them into an
// encoded response (what kmsg's AppendTo does), the broker encodes everything
// around them itself and sends each partition's batches with
// plog.Records.WriteTo, which uses sendfile(2) from the segment file to the
// socket. The encoding below covers what this broker puts in a Fetch
// response, versions 4 to 12; a test checks it byte for byte against kmsg's.

// zeroCopyFetch is the Fetch versions the zero-copy encoding covers; the
// older ones (legacy messages, down-converted in memory) and newer ones go
// through kmsg.
var zeroCopyFetch = versionRange{4, 12}

// recordSet is what the zero-copy path needs from a read: plog.Records.
type recordSet interface {
	Bytes() []byte
	WriteTo(w io.Writer) (int64, error)
}

// fetchResponse is a Fetch response whose partitions' RecordBatches come from
// reads that must be closed after the response was written. recs[i][j]
// belongs to Topics[i].Partitions[j] (nil when that partition's bytes, if
// any, are in its RecordBatches; no bytes are sent as an empty records
// field, never a null one).
// It is a kmsg.Response (AppendTo copies the batches), and writeFetch sends
// it without copying them.
type fetchResponse struct {
	*kmsg.FetchResponse
	recs [][]recordSet
	// waits lists the partitions read, each with the high watermark the
	// read saw, for a fetch that parks (see waitAny).
	waits []waitTarget
}

// framePiece is a run of encoded bytes followed, optionally, by a record set
// sent as is.
type framePiece struct {
	b   []byte
	rec recordSet
}

// fetchFrame encodes the whole response frame (size, response header, body)
// as pieces. It supports the fields this broker sets: no tagged fields (a version above 12 or a response using
// them must go through kmsg).
func fetchFrame(corr int32, resp *fetchResponse) []framePiece {
	v := resp.Version
	flexible := v >= 12
	var pieces []framePiece
	b := make([]byte, 4, 256)
	total := 0
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	if flexible {
		b = append(b, 0) // response header tags
	}
	b = binary.BigEndian.AppendUint32(b, uint32(resp.ThrottleMillis))
	if v >= 7 {
		b = binary.BigEndian.AppendUint16(b, uint16(resp.ErrorCode))
		b = binary.BigEndian.AppendUint32(b, uint32(resp.SessionID))
	}
	b = appendArrayLen(b, len(resp.Topics), flexible)
	for i := range resp.Topics {
		t := &resp.Topics[i]
		b = appendString(b, t.Topic, flexible)
		b = appendArrayLen(b, len(t.Partitions), flexible)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			b = binary.BigEndian.AppendUint32(b, uint32(p.Partition))
			b = binary.BigEndian.AppendUint16(b, uint16(p.ErrorCode))
			b = binary.BigEndian.AppendUint64(b, uint64(p.HighWatermark))
			b = binary.BigEndian.AppendUint64(b, uint64(p.LastStableOffset))
			if v >= 5 {
				b = binary.BigEndian.AppendUint64(b, uint64(p.LogStartOffset))
			}
			// AbortedTransactions: null at read_uncommitted, the
			// list (maybe empty) at read_committed.
			b = appendAbortedTxns(b, p.AbortedTransactions, flexible)
			if v >= 11 {
				b = binary.BigEndian.AppendUint32(b, uint32(p.PreferredReadReplica))
			}
			var rs recordSet
			if i < len(resp.recs) && j < len(resp.recs[i]) {
				rs = resp.recs[i][j]
			}
			switch {
			case rs != nil:
				b = appendBytesLen(b, len(rs.Bytes()), flexible)
				total += len(b) + len(rs.Bytes())
				pieces = append(pieces, framePiece{b: b, rec: rs})
				b = make([]byte, 0, 128)
			case len(p.RecordBatches) == 0:
				// Empty, never null (-1): Kafka sends MemoryRecords.EMPTY
				// for a partition without records, and clients rely on it.
				b = appendBytesLen(b, 0, flexible)
			default:
				b = appendBytesLen(b, len(p.RecordBatches), flexible)
				b = append(b, p.RecordBatches...)
			}
			if flexible {
				b = append(b, 0) // partition tags
			}
		}
		if flexible {
			b = append(b, 0) // topic tags
		}
	}
	if flexible {
		b = append(b, 0) // response tags
	}
	total += len(b)
	pieces = append(pieces, framePiece{b: b})
	binary.BigEndian.PutUint32(pieces[0].b, uint32(total-4))
	return pieces
}

// appendAbortedTxns appends a partition's AbortedTransactions: null for a
// nil list, else the entries (int64 producer id, int64 first offset, and
// for flexible versions an empty tagged-field section each).
func appendAbortedTxns(b []byte, list []kmsg.FetchResponseTopicPartitionAbortedTransaction, flexible bool) []byte {
	if list == nil {
		if flexible {
			return append(b, 0)
		}
		return binary.BigEndian.AppendUint32(b, 0xffffffff)
	}
	b = appendArrayLen(b, len(list), flexible)
	for _, a := range list {
		b = binary.BigEndian.AppendUint64(b, uint64(a.ProducerID))
		b = binary.BigEndian.AppendUint64(b, uint64(a.FirstOffset))
		if flexible {
			b = append(b, 0)
		}
	}
	return b
}

// appendArrayLen appends an array (or bytes) length: int32, or for
// flexible versions a compact uvarint of n+1.
func appendArrayLen(b []byte, n int, flexible bool) []byte {
	if flexible {
		return binary.AppendUvarint(b, uint64(n)+1)
	}
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

// appendBytesLen appends the length of a non-null bytes field.
func appendBytesLen(b []byte, n int, flexible bool) []byte {
	return appendArrayLen(b, n, flexible)
}

// appendString appends a non-null string: int16 length, or for flexible
// versions a compact uvarint of len+1.
func appendString(b []byte, s string, flexible bool) []byte {
	if flexible {
		b = binary.AppendUvarint(b, uint64(len(s))+1)
	} else {
		b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	}
	return append(b, s...)
}

// writeFetch writes the frame to w: encoded bytes with Write, batches with
// their WriteTo (sendfile when w is a TCP connection and the segment has a
// file descriptor).
func writeFetch(w io.Writer, corr int32, resp *fetchResponse) error {
	for _, p := range fetchFrame(corr, resp) {
		if len(p.b) > 0 {
			if _, err := w.Write(p.b); err != nil {
				return err
			}
		}
		if p.rec != nil {
			if _, err := p.rec.WriteTo(w); err != nil {
				return err
			}
		}
	}
	return nil
}
