package lint

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two rules that keep the import graph honest (issue 25):
//
//   - "no-foreign-assign": no non-test file assigns to a name of another
//     package (pkg.Name = ..., pkg.Name[i] = ..., pkg.Name.Field = ...,
//     pkg.Name++). A package-level function variable that another package
//     fills in from init hides the dependency from readers and tools and
//     depends on init order; whatever the type, another package's state
//     is that package's to change. Share an internal package, or export a
//     function.
//   - "no-internal-alias": no public library package (neither internal nor
//     under examples/) declares an exported type alias whose right-hand
//     side names a type of an internal package (type X = internalpkg.Y):
//     go doc shows such an alias without the type's fields and methods,
//     and the public package is then a facade over the real one. Declare
//     the type where its users see it.
//
// Both read the source with go/parser alone; test files are not checked.

// importNames maps the names f's imports are known by in f to their
// paths (a dot or blank import has none).
func importNames(f *ast.File) map[string]string {
	names := map[string]string{}
	for _, spec := range f.Imports {
		imp, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			continue
		}
		local := path.Base(imp)
		if strings.HasPrefix(local, "v") && strings.Contains(imp, "/") {
			// A major version suffix (…/lz4/v4): the package is named by
			// the element before it.
			if _, err := strconv.Atoi(local[1:]); err == nil {
				local = path.Base(path.Dir(imp))
			}
		}
		if spec.Name != nil {
			local = spec.Name.Name
		}
		if local == "." || local == "_" {
			continue
		}
		names[local] = imp
	}
	return names
}

// packageRef returns the import path of the package x names in f, when x
// is an identifier naming one of f's imports (not a local variable of the
// same name), and "" otherwise. f must be parsed with object resolution.
func packageRef(x ast.Expr, imports map[string]string) string {
	id, ok := x.(*ast.Ident)
	if !ok || id.Obj != nil { // id.Obj != nil: a declared name, not an import
		return ""
	}
	return imports[id.Name]
}

// assignedPackage returns the import path of the package whose name the
// assignment target lhs starts from (pkg.Name, pkg.Name[i],
// pkg.Name.Field, *pkg.Ptr), with the target as written up to that name
// (pkg.Name), or "" when lhs is not another package's.
func assignedPackage(lhs ast.Expr, imports map[string]string) (imp, target string) {
	for {
		switch e := lhs.(type) {
		case *ast.ParenExpr:
			lhs = e.X
		case *ast.StarExpr:
			lhs = e.X
		case *ast.IndexExpr:
			lhs = e.X
		case *ast.IndexListExpr:
			lhs = e.X
		case *ast.SelectorExpr:
			if imp := packageRef(e.X, imports); imp != "" {
				return imp, e.X.(*ast.Ident).Name + "." + e.Sel.Name
			}
			lhs = e.X
		default:
			return "", ""
		}
	}
}

// checkForeignAssign returns a "no-foreign-assign" violation for every
// assignment in f to a name of an imported package.
func checkForeignAssign(fset *token.FileSet, f *ast.File) []string {
	imports := importNames(f)
	if len(imports) == 0 {
		return nil
	}
	var out []string
	report := func(lhs ast.Expr) {
		if imp, target := assignedPackage(lhs, imports); imp != "" {
			out = append(out, fmt.Sprintf("%s: no-foreign-assign: assigns %s (package %s): share an internal package or export a function instead",
				fset.Position(lhs.Pos()), target, imp))
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch s := n.(type) {
		case *ast.AssignStmt:
			if s.Tok == token.DEFINE {
				return true
			}
			for _, lhs := range s.Lhs {
				report(lhs)
			}
		case *ast.IncDecStmt:
			report(s.X)
		case *ast.RangeStmt:
			if s.Tok == token.ASSIGN {
				if s.Key != nil {
					report(s.Key)
				}
				if s.Value != nil {
					report(s.Value)
				}
			}
		}
		return true
	})
	return out
}

// checkInternalAlias returns a "no-internal-alias" violation for every
// exported type alias of f, a file of a public library package, whose
// right-hand side names a type of an internal package.
func checkInternalAlias(fset *token.FileSet, f *ast.File, p pkgInfo) []string {
	if !p.library || isInternalPath(p.rel) || p.rel == "internal" {
		return nil
	}
	imports := importNames(f)
	var out []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.TYPE {
			continue
		}
		for _, s := range g.Specs {
			ts := s.(*ast.TypeSpec)
			if !ts.Assign.IsValid() || !ts.Name.IsExported() {
				continue
			}
			ast.Inspect(ts.Type, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if imp := packageRef(sel.X, imports); imp != "" && isInternalPath(imp) {
					out = append(out, fmt.Sprintf("%s: no-internal-alias: type %s = %s.%s: an alias of a type of %s shows importers no fields; declare the type in %s",
						fset.Position(ts.Pos()), ts.Name.Name, path.Base(imp), sel.Sel.Name, imp, p.rel))
				}
				return false
			})
		}
	}
	return out
}

// TestHonestImports checks every non-test Go file of the module against
// the no-foreign-assign and no-internal-alias rules.
func TestHonestImports(t *testing.T) {
	fset := token.NewFileSet()
	files := walkGoFiles(t, moduleRoot(t), fset, false, func(f *ast.File, rel string, _ bool) {
		for _, v := range checkForeignAssign(fset, f) {
			assert.Fail(t, v)
		}
		for _, v := range checkInternalAlias(fset, f, classify(rel)) {
			assert.Fail(t, v)
		}
	})
	t.Logf("checked %d files", files)
}

// TestForeignAssignRule feeds the no-foreign-assign rule files that break
// it and files that keep it.
func TestForeignAssignRule(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // the names reported, in order
	}{
		{"hook set from init", `package batch
import "github.com/partlog/partlog/internal/batchaccess"
func init() { batchaccess.ValidateTimes = validateTimes }`, []string{"batchaccess.ValidateTimes"}},
		{"renamed import, several targets", `package log
import ba "github.com/partlog/partlog/internal/batchaccess"
func f() { ba.A, ba.B = 1, 2 }`, []string{"ba.A", "ba.B"}},
		{"element, field, pointer and increment", `package log
import "github.com/partlog/partlog/internal/logaccess"
func f() {
	logaccess.Table[3] = 1
	logaccess.Config.Limit = 2
	*logaccess.Ptr = 3
	logaccess.Count++
	for logaccess.Key = range m {}
}`, []string{"logaccess.Table", "logaccess.Config", "logaccess.Ptr", "logaccess.Count", "logaccess.Key"}},
		{"standard library too", `package log
import "net/http"
func f() { http.DefaultClient = nil }`, []string{"http.DefaultClient"}},
		{"versioned import path", `package batch
import "github.com/pierrec/lz4/v4"
func f() { lz4.Level = 1 }`, []string{"lz4.Level"}},
		{"own package-level variable", `package log
var hook func()
func f() { hook = nil }`, nil},
		{"local variable shadowing the import", `package log
import "github.com/partlog/partlog/batch"
func f() { var batch struct{ X int }; batch.X = 1 }`, nil},
		{"parameter shadowing the import", `package log
import "github.com/partlog/partlog/batch"
type T struct{ X int }
func f(batch *T) { batch.X = 1 }`, nil},
		{"field of a value of another package's type", `package log
import "github.com/partlog/partlog/batch"
func f() { var r batch.Record; r.Offset = 1; p := &r; p.Key = nil }`, nil},
		{"reading and calling", `package log
import "github.com/partlog/partlog/internal/batchaccess"
func f(b []byte) int { batchaccess.PutCRC(b, 0); x := batchaccess.HeaderSize; return x }`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "x.go", tt.src, 0)
			require.NoError(t, err)
			got := checkForeignAssign(fset, f)
			require.Len(t, got, len(tt.want), "got %v", got)
			for i, name := range tt.want {
				require.Contains(t, got[i], ": no-foreign-assign: assigns "+name+" ", "got %v", got)
			}
		})
	}
}

// TestInternalAliasRule feeds the no-internal-alias rule files that break
// it and files that keep it.
func TestInternalAliasRule(t *testing.T) {
	tests := []struct {
		name string
		pkg  string
		src  string
		want []string // the aliases reported, in order
	}{
		{"alias of an internal type", "batch", `package batch
import "github.com/partlog/partlog/internal/base"
type CorruptionError = base.CorruptionError`, []string{"CorruptionError"}},
		{"renamed import, generic and pointer", "segment", `package segment
import (
	iseg "github.com/partlog/partlog/internal/segment"
	"github.com/partlog/partlog/internal/vfs"
)
type (
	Segment = iseg.Segment
	List = iseg.List[int]
	FilePtr = *vfs.File
)`, []string{"Segment", "List", "FilePtr"}},
		{"internal type inside a composite", "log", `package log
import "github.com/partlog/partlog/internal/vfs"
type Files = map[string]vfs.File`, []string{"Files"}},
		{"alias of a public type", "log", `package log
import "github.com/partlog/partlog/batch"
type Record = batch.Record`, nil},
		{"unexported alias", "log", `package log
import "github.com/partlog/partlog/internal/vfs"
type file = vfs.File`, nil},
		{"defined type, not an alias", "log", `package log
import "github.com/partlog/partlog/internal/vfs"
type FS vfs.FS`, nil},
		{"internal package may alias", "internal/base", `package base
import "github.com/partlog/partlog/batch"
import "github.com/partlog/partlog/internal/corrupt"
type CorruptionError = batch.CorruptionError
type Error = corrupt.Error`, nil},
		{"examples are not public packages", "examples/broker", `package main
import "github.com/partlog/partlog/internal/vfs"
type FS = vfs.FS`, nil},
		{"alias of an own type", "log", `package log
type T struct{}
type X = T`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "x.go", tt.src, 0)
			require.NoError(t, err)
			got := checkInternalAlias(fset, f, classify(tt.pkg))
			require.Len(t, got, len(tt.want), "got %v", got)
			for i, name := range tt.want {
				require.Contains(t, got[i], ": no-internal-alias: type "+name+" = ", "got %v", got)
			}
		})
	}
}
