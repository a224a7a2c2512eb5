package batch

import "bytes"

// allCodecs is every codec a batch may use.
var allCodecs = []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}

// interopRecords returns records exercising null and empty keys and
// values, headers with null values, and negative timestamp deltas.
func interopRecords() []Record {
	return []Record{
		{Key: []byte("key-0"), Value: []byte("value-0"), Timestamp: 1700000000000,
			Headers: []RecordHeader{{Key: []byte("h1"), Value: []byte("x")}, {Key: []byte("h2"), Value: nil}}},
		{Key: nil, Value: []byte("null key"), Timestamp: 1700000000005},
		{Key: []byte{}, Value: nil, Timestamp: 1699999999990},
		{Key: []byte("big"), Value: bytes.Repeat([]byte("0123456789abcdef"), 5000), Timestamp: 1700000000100,
			Headers: []RecordHeader{{Key: []byte{}, Value: []byte{}}}},
	}
}
