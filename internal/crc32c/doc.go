// Package crc32c computes CRC-32C (Castagnoli), the checksum of Kafka's
// RecordBatch v2 and of producer-state snapshots, for every package of the
// module: batch, and the internal packages that patch batch headers.
//
// Every checksum goes through Update. On amd64 with AVX-512 and
// VPCLMULQDQ, inputs of at least 512 bytes are folded 256 bytes at a time
// with carry-less multiplies (crc_amd64.s), about twice the speed of the
// SSE 4.2 CRC32 instruction loop that klauspost/crc32 (and the standard
// library) use for CRC-32C; shorter inputs, other machines and the purego
// build tag use klauspost/crc32. UpdateSmall serves the few bytes of a
// header copy without letting them escape.
//
//	crc := crc32c.UpdateSmall(0, header[21:61]) // the header's checksummed bytes
//	crc = crc32c.Update(crc, records)           // then the records
package crc32c
