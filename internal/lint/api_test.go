package lint

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The "public-api" rule: an importer must be able to name every type the
// library's exported API uses. A type declared in an internal/ package may
// appear in an exported signature (a function's parameters or results, an
// exported field, method, variable or constant, or what an exported type is
// made of) only if an exported alias in a public package names it
// (type FS = vfs.FS); and then what that internal type exposes (its
// exported fields, its methods) must be nameable too. The rule works on
// go/types packages, so aliases, embedded types and generic instances are
// seen as the compiler sees them.

// isInternalPath reports whether an import path has an internal element.
func isInternalPath(p string) bool {
	return strings.HasPrefix(p, "internal/") || strings.Contains(p, "/internal/") || strings.HasSuffix(p, "/internal")
}

// checkPublicAPI returns a "public-api" violation for every internal type
// the exported API of pkgs (public packages, fully type-checked) reaches
// without an exported alias naming it.
func checkPublicAPI(pkgs []*types.Package) []string {
	// Internal types made nameable by an exported alias of a public
	// package, with the alias that names them.
	nameable := map[*types.TypeName]string{}
	for _, pkg := range pkgs {
		for _, name := range pkg.Scope().Names() {
			tn, ok := pkg.Scope().Lookup(name).(*types.TypeName)
			if !ok || !tn.Exported() || !tn.IsAlias() {
				continue
			}
			if target := namedObj(types.Unalias(tn.Type())); target != nil && target.Pkg() != nil && isInternalPath(target.Pkg().Path()) {
				nameable[target] = pkg.Name() + "." + name
			}
		}
	}
	w := &apiWalker{nameable: nameable, walked: map[*types.TypeName]bool{}}
	for _, pkg := range pkgs {
		for _, name := range pkg.Scope().Names() {
			obj := pkg.Scope().Lookup(name)
			if !obj.Exported() {
				continue
			}
			where := pkg.Name() + "." + name
			switch obj := obj.(type) {
			case *types.TypeName:
				if obj.IsAlias() {
					if target := namedObj(types.Unalias(obj.Type())); target != nil {
						w.walkNamed(where, target)
					} else {
						w.walk(where, types.Unalias(obj.Type()))
					}
					continue
				}
				w.walkNamed(where, obj)
			default: // *types.Func, *types.Var, *types.Const
				w.walk(where, obj.Type())
			}
		}
	}
	slices.Sort(w.out)
	return slices.Compact(w.out)
}

// namedObj returns the declared type name of t when t is a defined type.
func namedObj(t types.Type) *types.TypeName {
	if n, ok := t.(*types.Named); ok {
		return n.Origin().Obj()
	}
	return nil
}

// apiWalker walks the types an exported declaration exposes.
type apiWalker struct {
	nameable map[*types.TypeName]string
	walked   map[*types.TypeName]bool
	out      []string
}

// walkNamed walks what a declared type exposes: its underlying type and
// its exported methods. Each type is walked once.
func (w *apiWalker) walkNamed(where string, tn *types.TypeName) {
	if w.walked[tn] {
		return
	}
	w.walked[tn] = true
	n, ok := tn.Type().(*types.Named)
	if !ok {
		return
	}
	w.walk(where, n.Underlying())
	for m := range n.Origin().Methods() {
		if m.Exported() {
			w.walk(where+"."+m.Name(), m.Type())
		}
	}
}

// walk reports every internal type in t that no alias names, and walks
// into the types an importer would meet through t.
func (w *apiWalker) walk(where string, t types.Type) {
	switch t := t.(type) {
	case *types.Alias:
		if obj := t.Obj(); obj.Pkg() != nil && isInternalPath(obj.Pkg().Path()) {
			// An alias declared in an internal package: nameable only
			// through what it stands for.
			w.walk(where, types.Unalias(t))
			return
		}
		for a := range t.TypeArgs().Types() {
			w.walk(where, a)
		}
		// An alias of a public package: its declaration is walked on its
		// own; here only what it stands for matters when that is internal.
		if target := namedObj(types.Unalias(t)); target != nil && target.Pkg() != nil && isInternalPath(target.Pkg().Path()) {
			w.walkNamed(where, target)
		}
	case *types.Named:
		obj := t.Origin().Obj()
		for a := range t.TypeArgs().Types() {
			w.walk(where, a)
		}
		if obj.Pkg() == nil {
			return // error, comparable
		}
		if isInternalPath(obj.Pkg().Path()) {
			if _, ok := w.nameable[obj]; !ok {
				w.out = append(w.out, fmt.Sprintf("public-api: %s names %s.%s, an internal type an importer cannot name (export it through an alias)",
					where, obj.Pkg().Path(), obj.Name()))
			}
			w.walkNamed(where, obj)
			return
		}
		if !obj.Exported() {
			// An unexported type of a public package: an importer meets
			// its exported fields and methods without naming it.
			w.walkNamed(where, obj)
		}
	case *types.Pointer:
		w.walk(where, t.Elem())
	case *types.Slice:
		w.walk(where, t.Elem())
	case *types.Array:
		w.walk(where, t.Elem())
	case *types.Chan:
		w.walk(where, t.Elem())
	case *types.Map:
		w.walk(where, t.Key())
		w.walk(where, t.Elem())
	case *types.Signature:
		for v := range t.Params().Variables() {
			w.walk(where, v.Type())
		}
		for v := range t.Results().Variables() {
			w.walk(where, v.Type())
		}
	case *types.Struct:
		for f := range t.Fields() {
			if f.Exported() || f.Embedded() {
				w.walk(where+"."+f.Name(), f.Type())
			}
		}
	case *types.Interface:
		for i := range t.NumEmbeddeds() {
			w.walk(where, t.EmbeddedType(i))
		}
		for m := range t.ExplicitMethods() {
			if m.Exported() {
				w.walk(where+"."+m.Name(), m.Type())
			}
		}
	case *types.Union:
		for i := range t.Len() {
			w.walk(where, t.Term(i).Type())
		}
	}
}

// publicPackages lists the module's public library packages: neither
// internal nor under examples/.
func publicPackages(t *testing.T, root string) []string {
	t.Helper()
	out, err := goCmd(root, "list", "./...")
	require.NoError(t, err)
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, modulePath), "/")
		if isInternalPath(p) || !classify(rel).library {
			continue
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// goCmd runs the go command in dir and returns its standard output.
func goCmd(dir string, args ...string) ([]byte, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("the go command is needed: %w", err)
	}
	cmd := exec.Command(goBin, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// TestPublicAPI checks the "public-api" rule on the module's public
// packages, loaded from the compiler's export data (go list -export).
func TestPublicAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the library's export data")
	}
	root := moduleRoot(t)
	pkgs := publicPackages(t, root)
	require.GreaterOrEqual(t, len(pkgs), 5, "found only %v", pkgs)
	out, err := goCmd(root, append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}, pkgs...)...)
	require.NoError(t, err)
	exports := map[string]string{}
	for line := range strings.Lines(string(out)) {
		path, file, _ := strings.Cut(strings.TrimSpace(line), "\t")
		exports[path] = file
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	var loaded []*types.Package
	for _, p := range pkgs {
		pkg, err := imp.Import(p)
		require.NoError(t, err)
		loaded = append(loaded, pkg)
	}
	for _, v := range checkPublicAPI(loaded) {
		assert.Fail(t, v)
	}
	t.Logf("checked the exported API of %d packages", len(loaded))
}

// TestPublicAPIRule feeds the rule small packages that break it and that
// keep it.
func TestPublicAPIRule(t *testing.T) {
	const internalSrc = `package fsys
type File interface { Sync() error }
type FS interface { Open(name string) (File, error) }
type Err struct { Pos int64; Inner Detail }
type Detail struct{ N int }
func (e *Err) Error() string { return "" }
type Alias = File
`
	tests := []struct {
		name   string
		src    string
		expect []string // substrings of the expected violations, in order
	}{
		{"function parameter", `package pub
import "example.com/m/internal/fsys"
func Open(fs fsys.FS) {}`, []string{"pub.Open names example.com/m/internal/fsys.FS", "pub.Open.Open names example.com/m/internal/fsys.File"}},
		{"aliases make both nameable", `package pub
import "example.com/m/internal/fsys"
type FS = fsys.FS
type File = fsys.File
func Open(fs FS) {}
func Open2(fs fsys.FS) (fsys.File, error) { return nil, nil }`, nil},
		{"alias whose methods leak", `package pub
import "example.com/m/internal/fsys"
type FS = fsys.FS`, []string{"pub.FS.Open names example.com/m/internal/fsys.File"}},
		{"exported field", `package pub
import "example.com/m/internal/fsys"
type Config struct { FS fsys.FS; fs fsys.FS }
type File = fsys.File`, []string{"pub.Config.FS names example.com/m/internal/fsys.FS"}},
		{"unexported field only", `package pub
import "example.com/m/internal/fsys"
type Config struct { fs fsys.FS }`, nil},
		{"method result", `package pub
import "example.com/m/internal/fsys"
type P struct{}
func (P) FS() fsys.FS { return nil }
func (P) fs() fsys.FS { return nil }
type File = fsys.File`, []string{"pub.P.FS names example.com/m/internal/fsys.FS"}},
		{"struct behind an alias exposes its fields", `package pub
import "example.com/m/internal/fsys"
type Err = fsys.Err`, []string{"pub.Err.Inner names example.com/m/internal/fsys.Detail"}},
		{"internal alias", `package pub
import "example.com/m/internal/fsys"
var V fsys.Alias`, []string{"pub.V names example.com/m/internal/fsys.File"}},
		{"composite types", `package pub
import "example.com/m/internal/fsys"
type Errs = fsys.Err
type D = fsys.Detail
var M map[string][]*fsys.File
func F(ch chan fsys.Err) {}`, []string{"pub.M names example.com/m/internal/fsys.File"}},
		{"unexported type met through an exported function", `package pub
import "example.com/m/internal/fsys"
type impl struct{}
func (impl) FS() fsys.FS { return nil }
func New() impl { return impl{} }
type File = fsys.File`, []string{"pub.New.FS names example.com/m/internal/fsys.FS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fset := token.NewFileSet()
			internalPkg := typeCheck(t, fset, "example.com/m/internal/fsys", internalSrc, nil)
			pub := typeCheck(t, fset, "example.com/m/pub", tt.src, internalPkg)
			got := checkPublicAPI([]*types.Package{pub})
			require.Len(t, got, len(tt.expect), "want %d violations %q, got %q", len(tt.expect), tt.expect, got)
			for i, want := range tt.expect {
				assert.True(t, strings.HasPrefix(got[i], "public-api: "), "violation %d: want %q, got %q", i, want, got[i])
				assert.Contains(t, got[i], want, "violation %d: want %q, got %q", i, want, got[i])
			}
		})
	}
}

// typeCheck type-checks one file as package path; dep, when not nil, is
// the only package it may import.
func typeCheck(t *testing.T, fset *token.FileSet, path, src string, dep *types.Package) *types.Package {
	t.Helper()
	f, err := parser.ParseFile(fset, path+".go", src, 0)
	require.NoError(t, err)
	conf := types.Config{Importer: importerFunc(func(p string) (*types.Package, error) {
		if dep != nil && p == dep.Path() {
			return dep, nil
		}
		return nil, fmt.Errorf("unknown import %s", p)
	})}
	pkg, err := conf.Check(path, fset, []*ast.File{f}, nil)
	require.NoError(t, err)
	return pkg
}

// importerFunc adapts a function to types.Importer.
type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

// importerMain is a program of another module that uses index alone and
// segment alone, with a filesystem of its own written against package
// index/vfs, reaches a corruption error with errors.As, and runs a
// compaction policy and a retention policy of its own on a log.Partition
// (which does all the file work).
const importerMain = `package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/log"
	"github.com/partlog/partlog/segment"
)

// dropTemp is a compaction policy: the latest record of each key stays,
// except keys starting with "tmp-", which go.
type dropTemp struct {
	latest map[string]int64
	dec    batch.Decoder
}

func (d *dropTemp) Plan(ctx context.Context, v *log.View) (int64, error) {
	d.latest = map[string]int64{}
	segs := v.Segments()
	end := int64(0)
	for i, s := range segs {
		if s.Active || s.NextOffset > v.HighWatermark() {
			break
		}
		for b, err := range v.Batches(i, s.BaseOffset) {
			if err != nil {
				return 0, err
			}
			for rec, err := range b.All(&d.dec) {
				if err != nil {
					return 0, err
				}
				d.latest[string(rec.Key)] = rec.Offset
			}
		}
		end = s.NextOffset
	}
	return end, nil
}

func (d *dropTemp) Batch(batch.Batch) log.BatchDecision {
	return log.BatchDecision{Action: log.BatchFilter}
}

func (d *dropTemp) Keep(_ batch.Batch, rec batch.Record) log.RecordVerdict {
	if strings.HasPrefix(string(rec.Key), "tmp-") || d.latest[string(rec.Key)] != rec.Offset {
		return log.RecordDrop
	}
	return log.RecordKeep
}

// oldestOne is a retention policy: the oldest segment goes.
type oldestOne struct{}

func (oldestOne) Expired(v *log.View) int { return 1 }

// countFS counts the files it creates and leaves the rest to the OS.
type countFS struct {
	vfs.FS
	creates int
}

func (c *countFS) Create(name string) (vfs.File, error) {
	c.creates++
	return c.FS.Create(name)
}

func check(err error) {
	if err != nil {
		panic(err)
	}
}

func main() {
	dir, err := os.MkdirTemp("", "partlog-importer")
	check(err)
	defer os.RemoveAll(dir)

	// index alone, on the OS filesystem (a nil FS).
	oi, err := index.OpenOffsetIndex(nil, filepath.Join(dir, "00000000000000000000.index"), 0, 1024)
	check(err)
	check(oi.Append(9, 0))
	check(oi.Append(19, 4096))
	e := oi.Lookup(15)
	fmt.Println("index: offset 15 is in the batch at", e.Position, "ending at", e.Offset)
	check(oi.Close())

	// segment alone, through a filesystem of the program's own.
	fs := &countFS{FS: vfs.Default}
	segDir := filepath.Join(dir, "topic-0")
	check(os.Mkdir(segDir, 0o755))
	s, err := segment.Create(fs, segDir, 0, segment.Config{})
	check(err)
	bld := batch.NewBuilder(batch.BuilderOptions{})
	for i := range 3 {
		check(bld.Add(batch.Record{Value: fmt.Appendf(nil, "v%d", i), Timestamp: int64(i)}))
	}
	b, err := bld.Build()
	check(err)
	_, err = s.Append(b)
	check(err)
	fmt.Println("segment: next offset", s.NextOffset(), "files created through the FS:", fs.creates)
	check(s.Close())
	s, err = segment.Open(nil, segDir, 0, segment.Config{})
	check(err)
	fmt.Println("segment: reopened, next offset", s.NextOffset())
	check(s.Close())

	_, _, err = batch.Parse([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	var ce *batch.CorruptionError
	fmt.Println("corruption reached:", errors.As(err, &ce), ce.Field)

	// A policy of the program's own, carried out by the partition.
	p, err := log.Open(filepath.Join(dir, "custom-0"), log.Config{})
	check(err)
	for i, key := range []string{"a", "tmp-x", "a", "b", "tmp-y", "b"} {
		bld := batch.NewBuilder(batch.BuilderOptions{})
		check(bld.Add(batch.Record{Key: []byte(key), Value: fmt.Appendf(nil, "%s%d", key, i), Timestamp: 1}))
		b, err := bld.Build()
		check(err)
		_, err = p.AppendBatch(b)
		check(err)
		if i == 2 {
			check(p.Roll())
		}
	}
	check(p.Roll())
	res, err := p.Compact(context.Background(), &dropTemp{})
	check(err)
	fmt.Println("compaction: removed", res.RecordsRemoved, "cleaned to", res.CleanedTo)
	for rec, err := range p.Records(context.Background(), 0) {
		check(err)
		fmt.Print(" ", rec.Offset, "=", string(rec.Value))
		if rec.Offset == p.LogEndOffset()-1 {
			break
		}
	}
	fmt.Println()
	res, err = p.DeleteExpired(context.Background(), oldestOne{})
	check(err)
	fmt.Println("retention: deleted", res.SegmentsDeleted, "log start", p.LogStartOffset())
	check(p.Close())
}
`

// TestImporterProgram builds and runs importerMain as a module of its own
// that requires this one through a replace directive, offline (GOPROXY=off:
// every dependency comes from the module cache the repository's own build
// filled, checked against the repository's go.sum). It proves that segment
// and index are usable from outside the module, and that a compaction or
// retention policy can be written there (log.Cleaner, log.RetentionPolicy).
func TestImporterProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	root := moduleRoot(t)
	dir := t.TempDir()
	gomod := "module example.com/importer\n\ngo 1.26.0\n\nrequire github.com/partlog/partlog v0.0.0\n\nreplace github.com/partlog/partlog => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	for name, data := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "main.go": []byte(importerMain)} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	cmd := exec.Command(goBin, "run", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go run: %v\n%s", err, out)
	want := `index: offset 15 is in the batch at 0 ending at 9
segment: next offset 3 files created through the FS: 1
segment: reopened, next offset 3
corruption reached: true batchLength
compaction: removed 4 cleaned to 6
 2=a2 5=b5
retention: deleted 1 log start 6
`
	require.Equal(t, want, string(out), "output:\n%s\nwant:\n%s", out, want)
}
