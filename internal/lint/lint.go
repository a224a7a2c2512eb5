// Package lint holds partlog's project rules as a test (lint_test.go), in
// the manner of pebble's internal/lint: run `go test ./internal/lint` and it
// parses every Go file of the module and fails on:
//
//   - a library package (the root package, batch, index, segment, log,
//     compaction, internal/... and their subpackages; not examples/)
//     importing anything but the standard library, the module's own
//     packages, and the modules DESIGN.md allows (klauspost/crc32,
//     klauspost/compress, pierrec/lz4/v4, cespare/xxhash/v2,
//     golang.org/x/sys); test-support packages (a name ending in "test",
//     such as log/logtest) and tests may also use testify and rapid,
//     and nothing else: the library's go.mod requires no more (a test
//     needing a Kafka client lives in the module internal/interop);
//   - any file of the module outside examples/ importing examples/, and a
//     library package importing a Kafka client (franz-go);
//   - an import pointing up the layers: internal < batch < index < segment <
//     log < compaction (a package may import its own layer and those below;
//     index/vfs, which imports nothing of the module, is on the lowest;
//     internal/base, internal/checkpoint and internal/epochs are on
//     batch's);
//   - a raw sync/atomic function call (atomic.AddInt64 ...): typed atomics
//     only;
//   - os.IsNotExist, os.IsExist or os.IsPermission: use errors.Is with
//     io/fs errors;
//   - the standard "log" package anywhere in the library, tests included
//     (use log/slog through the embedder's logger);
//   - public-api (api_test.go): an exported declaration of a public
//     library package (not internal/, not examples/) that reaches a type
//     of an internal/ package no exported alias names (type FS = vfs.FS):
//     an importer could not name it (nor pass a value of it, nor use
//     errors.As on it). The check loads the packages' export data with
//     go/types and walks every exported function, method, field,
//     variable and type, and what an aliased internal type exposes.
//     TestImporterProgram also builds a program of another module that
//     uses segment and index alone, offline;
//   - modules (modules_test.go): a module importing log, batch and
//     compaction gets none of a broker's modules (franz-go, etcd raft,
//     protobuf) in its go.sum or module graph after go mod tidy
//     (TestImporterGoSum), and no example, in the library's module or
//     a module of its own under examples/, imports an internal/ package
//     (TestExamplesUsePublicAPI);
//   - user-docs (doc_test.go): a package doc or an exported name's doc in
//     a public package that names an internal package, an internal
//     package's name (base.ErrCorrupt), a source file or an unexported
//     identifier (mu, Partition.flushMu, acquireSnapshot);
//   - readme (readme_test.go): the README's program is
//     examples/readme/main.go byte for byte, builds in a module of its own
//     with the README's go get line, offline, and prints what the README
//     shows; every command of the README is run by that test or .ci/run;
//     every relative link of the repository's markdown files resolves;
//   - no-foreign-assign (imports_test.go): a non-test file assigning to a
//     name of another package (pkg.Name = ..., pkg.Name[i] = ...,
//     pkg.Name.Field = ..., pkg.Name++), whatever its type: no package
//     fills in another's function variables from init;
//   - no-internal-alias (imports_test.go): an exported type alias of a
//     public library package whose right-hand side names a type of an
//     internal package (type X = internalpkg.Y).
//
// surface_test.go lists each public package's exported names (go test -v
// -run TestSurface) for reviewers; it sets no ceiling.
//
// Nested modules (examples/broker, internal/interop) are not the
// library's: TestLint does not walk them.
//
// Packages that do not exist yet are simply not there to check. Example:
//
//	go test ./internal/lint
//
// The package itself exports nothing but [Rules], the list of rule names.
package lint

// Rules names the checks lint_test.go runs, in the order they are
// reported.
var Rules = []string{
	"allowed-imports",
	"no-examples-import",
	"layering",
	"typed-atomics",
	"no-os-is",
	"no-std-log",
	"public-api",
	"user-docs",
	"readme",
	"no-foreign-assign",
	"no-internal-alias",
}
