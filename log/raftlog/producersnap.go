package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// A raft snapshot carries the leader's producer state as the bytes of its
// partition's producer snapshot file (Partition.ProducerSnapshot), which a
// follower hands to Partition.RestoreProducers as they are. This package
// reads nothing in them; it only checks, when a snapshot arrives or an
// interrupted install is read back, that they are such a file: Kafka's
// <offset>.snapshot format, version 1, big-endian:
//
//	version int16 (1) | crc uint32 (CRC-32C of bytes [6, end)) |
//	count int32 | count entries of 46 bytes
//
// Damage is then reported where it is found (a raft state error naming
// the snapshot) rather than when the install restores the producers.

// Producer snapshot layout constants (Kafka's frozen format).
const (
	producerSnapVersion    = 1
	producerSnapCRCStart   = 6  // after version and crc
	producerSnapHeaderSize = 10 // version, crc, count
	producerSnapEntrySize  = 46
)

// errProducerSnapshot marks producer state bytes that are not a producer
// snapshot file.
var errProducerSnapshot = errors.New("raftlog: not a producer snapshot")

// castagnoli is the CRC-32C table of the producer snapshot's checksum.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkProducerSnapshot reports whether data is a producer snapshot file:
// version 1, its CRC-32C matching, a count that agrees with its length.
// The error wraps errProducerSnapshot.
func checkProducerSnapshot(data []byte) error {
	if len(data) < producerSnapHeaderSize {
		return fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", errProducerSnapshot, len(data), producerSnapHeaderSize)
	}
	if v := int16(binary.BigEndian.Uint16(data)); v != producerSnapVersion {
		return fmt.Errorf("%w: version %d, want %d", errProducerSnapshot, v, producerSnapVersion)
	}
	if want, got := binary.BigEndian.Uint32(data[2:]), crc32.Checksum(data[producerSnapCRCStart:], castagnoli); want != got {
		return fmt.Errorf("%w: CRC-32C %08x, computed %08x", errProducerSnapshot, want, got)
	}
	n := int32(binary.BigEndian.Uint32(data[producerSnapCRCStart:]))
	if n < 0 || int64(len(data)-producerSnapHeaderSize) != int64(n)*producerSnapEntrySize {
		return fmt.Errorf("%w: %d entries in %d bytes", errProducerSnapshot, n, len(data))
	}
	return nil
}
