package lint

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What an importer of the library gets, and what the examples may use.
// The library's module requires only what its packages need; the broker
// example and the Kafka-client interop tests are modules of their own
// (examples/broker, internal/interop), joined by go.work. The examples use
// the public API alone: they show what a user can write.

// brokerModules are modules only a broker or a Kafka client needs, which
// an importer of the library must never get (their go.sum lines start so).
var brokerModules = []string{
	"github.com/twmb/franz-go",
	"go.etcd.io/raft",
	"google.golang.org/protobuf",
}

const importerTidyMain = `package main

import (
	"fmt"
	"os"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/compaction"
	"github.com/partlog/partlog/log"
)

func main() {
	dir, err := os.MkdirTemp("", "partlog-tidy")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	p, err := log.Open(dir, log.Config{})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	bld := batch.NewBuilder(batch.BuilderOptions{})
	if err := bld.Add(batch.Record{Value: []byte("v")}); err != nil {
		panic(err)
	}
	b, err := bld.Build()
	if err != nil {
		panic(err)
	}
	if _, err := p.AppendBatch(b); err != nil {
		panic(err)
	}
	r, err := compaction.NewRunner(compaction.Config{CleanupPolicy: "compact"}, compaction.RunnerOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println(r != nil, p.LogEndOffset())
}
`

// goOffline runs the go command in dir outside any workspace, offline
// (GOPROXY=off: every module comes from the module cache the repository's
// own build filled) and returns its combined output.
func goOffline(t *testing.T, dir string, args ...string) []byte {
	t.Helper()
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	cmd := exec.Command(goBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go %s: %v\n%s", strings.Join(args, " "), err, out)
	return out
}

// TestImporterGoSum runs go mod tidy in a module of its own that imports
// log, batch and compaction (a replace directive points at this
// repository; offline) and checks that neither its go.sum nor its module
// graph (go list -m all) names any of the broker's modules: an importer of
// the library gets the library's dependencies, not a broker's. The go.sum
// starts as the library's: tidy keeps what the importer needs and drops
// the rest. The graph is the stricter check: with the broker in the
// library's module (its go.mod requiring franz-go, raft and protobuf),
// the importer's tidy go.sum held none of them either (module graph
// pruning leaves out the checksums of modules none of its packages use),
// but go list -m all named all four, and a go get of the library would
// have weighed their versions.
func TestImporterGoSum(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go mod tidy and builds a program")
	}
	root := moduleRoot(t)
	dir := t.TempDir()
	gomod := "module example.com/tidyimporter\n\ngo 1.26.0\n\nrequire github.com/partlog/partlog v0.0.0\n\nreplace github.com/partlog/partlog => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	for name, data := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "main.go": []byte(importerTidyMain)} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	goOffline(t, dir, "mod", "tidy")
	goOffline(t, dir, "build", "-o", filepath.Join(dir, "importer"), ".")
	got, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	require.NoError(t, err)
	require.NotEmpty(t, got, "tidy left no go.sum")
	graph := goOffline(t, dir, "list", "-m", "all")
	for what, text := range map[string][]byte{"go.sum": got, "module graph (go list -m all)": graph} {
		for line := range strings.Lines(string(text)) {
			for _, m := range brokerModules {
				assert.False(t, under(strings.Fields(line)[0], m), "the importer's %s names %s: %s", what, m, strings.TrimSpace(line))
			}
		}
	}
	t.Logf("the importer's module graph:\n%s", graph)
}

// exampleModules returns the directories of the modules under examples/
// (a go.mod of their own), relative to the root.
func exampleModules(t *testing.T, root string) []string {
	t.Helper()
	var mods []string
	err := filepath.WalkDir(filepath.Join(root, "examples"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "go.mod" {
			rel, err := filepath.Rel(root, filepath.Dir(p))
			if err != nil {
				return err
			}
			mods = append(mods, rel)
		}
		return nil
	})
	require.NoError(t, err)
	return mods
}

// internalImports lists, for every package go list finds for patterns in
// dir (outside any workspace) and its tests (go list -test: the test
// variants carry the test files' imports), the imports of an internal/
// package of this module, each as "package imports path", and counts the
// packages. Only the packages under examples/ are the examples' own code:
// the library's packages they import use its internal ones, as they
// should, so go list -deps lists those whatever the examples import.
func internalImports(t *testing.T, dir string, patterns ...string) (found []string, pkgs int) {
	t.Helper()
	out := goOutsideWorkspace(t, dir, append([]string{"list", "-test", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}"}, patterns...)...)
	for line := range strings.Lines(string(out)) {
		pkg, imports, _ := strings.Cut(strings.TrimSpace(line), "\t")
		if !under(pkg, modulePath+"/examples") {
			continue
		}
		pkgs++
		for _, imp := range strings.Fields(imports) {
			if under(imp, modulePath+"/internal") {
				found = append(found, pkg+" imports "+imp)
			}
		}
	}
	return found, pkgs
}

// goOutsideWorkspace runs the go command in dir outside any workspace,
// with the module proxy the environment sets (an example module's own
// dependencies may not be in the cache yet), and returns its standard
// output.
func goOutsideWorkspace(t *testing.T, dir string, args ...string) []byte {
	t.Helper()
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	cmd := exec.Command(goBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOTOOLCHAIN=local")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	return out
}

// TestExamplesUsePublicAPI: no example imports an internal/ package of
// the library, in its code or its tests; the examples show what a user of
// the library can write. It covers the examples of the library's module
// (go list ./examples/...) and every module under examples/.
func TestExamplesUsePublicAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("lists the examples' packages with the go command")
	}
	root := moduleRoot(t)
	found, pkgs := internalImports(t, root, "./examples/...")
	mods := exampleModules(t, root)
	require.NotEmpty(t, mods, "no module under examples/ (examples/broker is one)")
	for _, m := range mods {
		f, n := internalImports(t, filepath.Join(root, m), "./...")
		require.NotZero(t, n, "no package of the module %s", m)
		found, pkgs = append(found, f...), pkgs+n
	}
	for _, f := range found {
		assert.Fail(t, f)
	}
	t.Logf("%d packages of examples (tests included) in %d modules", pkgs, len(mods)+1)
}
