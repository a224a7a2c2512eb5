package lint

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// modulePath is the module the rules are about.
const modulePath = "github.com/partlog/partlog"

// allowedModules are the third-party modules library code may import
// (DESIGN.md, "Dependencies").
var allowedModules = []string{
	"github.com/klauspost/crc32",
	"github.com/klauspost/compress",
	"github.com/pierrec/lz4/v4",
	"github.com/cespare/xxhash/v2",
	"golang.org/x/sys",
}

// testSupportModules are also allowed in test-support packages such as
// log/logtest.
var testSupportModules = []string{
	"github.com/stretchr/testify",
	"pgregory.net/rapid",
}

// allowedModule reports whether library code may import imp, a package of
// another module: one of allowedModules, or with testSupport (a
// test-support package or a test) one of testSupportModules too.
func allowedModule(imp string, testSupport bool) bool {
	for _, m := range allowedModules {
		if under(imp, m) {
			return true
		}
	}
	if testSupport {
		for _, m := range testSupportModules {
			if under(imp, m) {
				return true
			}
		}
	}
	return false
}

// layers ranks the top-level folders: imports may only point to the same
// rank or below.
var layers = map[string]int{
	"internal":   0,
	"batch":      1,
	"index":      2,
	"segment":    3,
	"log":        4,
	"compaction": 5,
	"":           6, // the root package: the module overview
}

// under reports whether imp is mod or a package below it.
func under(imp, mod string) bool { return imp == mod || strings.HasPrefix(imp, mod+"/") }

func isStd(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".")
}

// pkgInfo describes the package a file belongs to.
type pkgInfo struct {
	rel         string // directory relative to the module root, slash-separated ("" for the root)
	library     bool   // not under examples/
	testSupport bool   // the last element ends in "test" (log/logtest)
}

// placedLayers places packages whose layer is not their top-level
// folder's: index/vfs, the filesystem interface, imports nothing of the
// module and sits on the lowest layer, so that the internal packages that
// open files (mmap, checkpoint, the test filesystems) may use it;
// internal/base, the error vocabulary of the layers above batch, is built
// on batch.CorruptionError, internal/checkpoint reports through it, and
// internal/epochs reads its checkpoint file; internal/producer, a
// Partition's producer state, imports batch and is imported by log, so it
// sits on log's layer.
var placedLayers = map[string]string{
	"index/vfs":           "internal",
	"internal/base":       "batch",
	"internal/checkpoint": "batch",
	"internal/epochs":     "batch",
	"internal/producer":   "log",
}

func (p pkgInfo) layer() (string, int) {
	top, _, _ := strings.Cut(p.rel, "/")
	for dir, layer := range placedLayers {
		if under(p.rel, dir) {
			top = layer
		}
	}
	r, ok := layers[top]
	if !ok {
		return top, -1
	}
	return top, r
}

func classify(rel string) pkgInfo {
	top, _, _ := strings.Cut(rel, "/")
	return pkgInfo{
		rel:         rel,
		library:     top != "examples",
		testSupport: rel != "" && strings.HasSuffix(path.Base(rel), "test"),
	}
}

// checkFile returns the rule violations of one parsed file, each as
// "rule: message".
func checkFile(fset *token.FileSet, f *ast.File, p pkgInfo, isTest bool) []string {
	var out []string
	report := func(pos token.Pos, rule, format string, args ...any) {
		out = append(out, fmt.Sprintf("%s: %s: %s", fset.Position(pos), rule, fmt.Sprintf(format, args...)))
	}
	atomicName, osName := "", ""
	for _, spec := range f.Imports {
		imp, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			report(spec.Pos(), "allowed-imports", "bad import path %s", spec.Path.Value)
			continue
		}
		local := path.Base(imp)
		if spec.Name != nil {
			local = spec.Name.Name
		}
		switch imp {
		case "sync/atomic":
			atomicName = local
		case "os":
			osName = local
		}
		if !p.library {
			continue
		}
		if under(imp, modulePath+"/examples") {
			report(spec.Pos(), "no-examples-import", "%s imports %s", p.rel, imp)
		}
		if imp == "log" {
			report(spec.Pos(), "no-std-log", "the standard log package; use log/slog via the configured logger")
		}
		if isTest {
			// A test may import any layer; of other modules, what its
			// package may and the test-support ones. A test that needs
			// another module (a Kafka client) lives in a module of its
			// own (internal/interop), so the library's go.mod never
			// requires it.
			if !isStd(imp) && !under(imp, modulePath) && !allowedModule(imp, true) {
				report(spec.Pos(), "allowed-imports", "%s (a test) imports %s, which the library's module does not require; a test needing it belongs in a module of its own (internal/interop)", p.rel, imp)
			}
			continue
		}
		switch {
		case isStd(imp):
		case under(imp, modulePath):
			own, ownRank := p.layer()
			target := strings.TrimPrefix(strings.TrimPrefix(imp, modulePath), "/")
			tgt, tgtRank := classify(target).layer()
			if ownRank >= 0 && tgtRank > ownRank {
				report(spec.Pos(), "layering", "%s (layer %q) imports %s (layer %q, above it)", p.rel, own, imp, tgt)
			}
		default:
			if !allowedModule(imp, p.testSupport) {
				report(spec.Pos(), "allowed-imports", "%s imports %s, which DESIGN.md does not allow in the library", p.rel, imp)
			}
		}
	}
	if !p.library || (atomicName == "" && osName == "") {
		return out
	}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		x, ok := sel.X.(*ast.Ident)
		if !ok || x.Obj != nil { // x.Obj != nil: a local variable, not the package
			return true
		}
		name := sel.Sel.Name
		switch x.Name {
		case atomicName:
			for _, prefix := range []string{"Add", "Load", "Store", "Swap", "CompareAndSwap", "And", "Or"} {
				if strings.HasPrefix(name, prefix) {
					report(call.Pos(), "typed-atomics", "atomic.%s: use the typed atomics (atomic.Int64 ...)", name)
					break
				}
			}
		case osName:
			switch name {
			case "IsNotExist", "IsExist", "IsPermission":
				report(call.Pos(), "no-os-is", "os.%s: use errors.Is(err, fs.Err...)", name)
			}
		}
		return true
	})
	return out
}

// moduleRoot finds the directory of go.mod, checking it is this module.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	require.NoError(t, err)
	for {
		f, err := os.Open(filepath.Join(dir, "go.mod"))
		if err == nil {
			sc := bufio.NewScanner(f)
			sc.Scan()
			f.Close()
			require.Equal(t, "module "+modulePath, strings.TrimSpace(sc.Text()), "go.mod in %s is not %s", dir, modulePath)
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "go.mod not found")
		dir = parent
	}
}

// walkGoFiles parses every Go file of the module rooted at root (nested
// modules, testdata, vendor and dot or underscore folders left out) and
// calls check with the file, its package folder relative to the root ("" for
// the root) and whether it is a test file; tests false leaves test files
// out. It returns how many files it parsed.
func walkGoFiles(t *testing.T, root string, fset *token.FileSet, tests bool, check func(f *ast.File, rel string, test bool)) int {
	t.Helper()
	files := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			if p != root {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir // a nested module is not ours to check
				}
			}
			return nil
		}
		test := strings.HasSuffix(name, "_test.go")
		if !strings.HasSuffix(name, ".go") || (test && !tests) {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "." {
			rel = ""
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if !assert.NoError(t, err, "parse") {
			return nil
		}
		files++
		check(f, rel, test)
		return nil
	})
	require.NoError(t, err)
	require.NotEqual(t, 0, files, "no Go files found")
	return files
}

// TestLint checks every Go file of the module against the rules.
func TestLint(t *testing.T) {
	fset := token.NewFileSet()
	files := walkGoFiles(t, moduleRoot(t), fset, true, func(f *ast.File, rel string, test bool) {
		for _, v := range checkFile(fset, f, classify(rel), test) {
			assert.Fail(t, v)
		}
	})
	t.Logf("checked %d files", files)
}

// TestRules feeds each rule a file that breaks it and one that does not.
func TestRules(t *testing.T) {
	tests := []struct {
		name   string
		pkg    string
		test   bool
		src    string
		expect string // the rule expected to fire; "" for none
	}{
		{"std and own imports", "segment", false, `package segment
import ("io"; "github.com/partlog/partlog/index"; "github.com/partlog/partlog/internal/vfs")`, ""},
		{"allowed module", "batch", false, `package batch
import ("github.com/klauspost/compress/zstd"; "github.com/pierrec/lz4/v4"; "golang.org/x/sys/unix")`, ""},
		{"franz-go in library", "log", false, `package log
import "github.com/twmb/franz-go/pkg/kgo"`, "allowed-imports"},
		{"testify in library", "index", false, `package index
import "github.com/stretchr/testify/require"`, "allowed-imports"},
		{"testify in tests", "index", true, `package index
import "github.com/stretchr/testify/require"`, ""},
		{"franz-go in a library test", "batch", true, `package batch
import "github.com/twmb/franz-go/pkg/kmsg"`, "allowed-imports"},
		{"rapid and codecs in a library test", "batch", true, `package batch
import ("pgregory.net/rapid"; "github.com/klauspost/compress/zstd"; "github.com/partlog/partlog/log")`, ""},
		{"rapid in logtest", "log/logtest", false, `package logtest
import "pgregory.net/rapid"`, ""},
		{"examples import", "log", true, `package log
import "github.com/partlog/partlog/examples/quickstart"`, "no-examples-import"},
		{"examples may use franz-go", "examples/broker", false, `package main
import "github.com/twmb/franz-go/pkg/kgo"`, ""},
		{"batch imports index", "batch", false, `package batch
import "github.com/partlog/partlog/index"`, "layering"},
		{"index imports segment", "index", false, `package index
import "github.com/partlog/partlog/segment"`, "layering"},
		{"segment imports log", "segment", false, `package segment
import "github.com/partlog/partlog/log"`, "layering"},
		{"log imports compaction", "log", false, `package log
import "github.com/partlog/partlog/compaction"`, "layering"},
		{"internal imports batch", "internal/mmap", false, `package mmap
import "github.com/partlog/partlog/batch"`, "layering"},
		{"logtest imports log", "log/logtest", false, `package logtest
import "github.com/partlog/partlog/log"`, ""},
		{"compaction imports log", "compaction", false, `package compaction
import "github.com/partlog/partlog/log"`, ""},
		{"raw atomic", "segment", false, `package segment
import "sync/atomic"
var n int64
func f() { atomic.AddInt64(&n, 1) }`, "typed-atomics"},
		{"raw atomic renamed, in a test", "segment", true, `package segment
import a "sync/atomic"
var n int32
func f() int32 { return a.LoadInt32(&n) }`, "typed-atomics"},
		{"typed atomic", "segment", false, `package segment
import "sync/atomic"
var n atomic.Int64
func f() { n.Add(1); var p atomic.Pointer[int]; _ = p.Load() }`, ""},
		{"os.IsNotExist", "log", false, `package log
import "os"
func f(err error) bool { return os.IsNotExist(err) }`, "no-os-is"},
		{"os.IsExist in test", "index", true, `package index
import "os"
func f(err error) bool { return os.IsExist(err) }`, "no-os-is"},
		{"os.Open is fine", "index", false, `package index
import "os"
func f() { os.Open("x") }`, ""},
		{"std log", "segment", false, `package segment
import "log"`, "no-std-log"},
		{"std log in test", "segment", true, `package segment
import "log"`, "no-std-log"},
		{"slog", "segment", false, `package segment
import "log/slog"`, ""},
		{"own log package", "compaction", false, `package compaction
import plog "github.com/partlog/partlog/log"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "x.go", tt.src, 0)
			require.NoError(t, err)
			got := checkFile(fset, f, classify(tt.pkg), tt.test)
			if tt.expect == "" {
				require.Empty(t, got, "unexpected: %v", got)
				return
			}
			require.Len(t, got, 1, "want one %q violation, got %v", tt.expect, got)
			require.Contains(t, got[0], ": "+tt.expect+": ", "want one %q violation, got %v", tt.expect, got)
		})
	}
	require.Len(t, Rules, 11, "Rules lists %d rules", len(Rules))
}
