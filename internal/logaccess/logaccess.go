// Package logaccess gives log/logtest, the partition's reference model,
// what it reads of a partition's files that is not part of package log's
// API. Package log sets the variables when it is initialized (logtest
// imports log, so they are set before it runs).
package logaccess

// CheckProducerSnapshot reports whether data, the bytes of a producer
// state snapshot file (Kafka's .snapshot format), decodes; the error wraps
// the log's corruption marker. The partition skips a snapshot that does
// not.
var CheckProducerSnapshot func(data []byte) error
