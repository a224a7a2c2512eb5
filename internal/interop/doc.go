// Package interop checks partlog's batch encoding against codecs nobody
// here wrote: franz-go's protocol structs (kmsg) build batches that
// package batch reads, and read batches that package batch builds. It is a
// module of its own, so that the library's module requires no Kafka
// client: run its tests from this directory (go test ./...).
//
// The package itself has no API; its tests are the point.
package interop
