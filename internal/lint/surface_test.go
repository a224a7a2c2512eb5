package lint

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The surface listing: TestSurface lists, for reviewers, the exported
// identifiers each public library package declares (counted as
// exportedNames counts them), so that a change's additions to what
// importers see show in go test -v -run TestSurface ./internal/lint. It
// sets no ceiling: a count of names is not the goal (issue 25), and a
// ceiling rewarded hiding names behind function variables and internal
// aliases. What stays exported follows DESIGN.md ("Public API").
var surfacePackages = []string{"batch", "compaction", "index", "index/vfs", "index/vfs/vfstest", "log", "log/logtest", "segment"}

// exportedNames returns the exported identifiers declared in the non-test
// files of the package in dir: top-level functions, types, variables and
// constants, and the methods of exported types ("Type.Method"; a method
// of an unexported type is not counted). Struct fields and interface
// methods are not counted. A missing directory has none.
func exportedNames(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					names = append(names, d.Name.Name)
					continue
				}
				t := d.Recv.List[0].Type
				if s, ok := t.(*ast.StarExpr); ok {
					t = s.X
				}
				switch x := t.(type) {
				case *ast.IndexExpr:
					t = x.X
				case *ast.IndexListExpr:
					t = x.X
				}
				if id, ok := t.(*ast.Ident); ok {
					if !id.IsExported() {
						continue
					}
					names = append(names, id.Name+"."+d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names = append(names, "type "+s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, id := range s.Names {
							if id.IsExported() {
								names = append(names, id.Name)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(names)
	return names, nil
}

// TestSurface lists each public package's exported identifiers, with its
// count, in the test log.
func TestSurface(t *testing.T) {
	root := moduleRoot(t)
	total := 0
	for _, pkg := range surfacePackages {
		names, err := exportedNames(filepath.Join(root, filepath.FromSlash(pkg)))
		require.NoError(t, err, pkg)
		total += len(names)
		t.Logf("package %s exports %d identifiers:\n\t%s", pkg, len(names), strings.Join(names, "\n\t"))
	}
	t.Logf("exported surface: %d identifiers", total)
}

// TestSurfaceCountsLikeTheTool checks exportedNames on a small package.
func TestSurfaceCountsLikeTheTool(t *testing.T) {
	dir := t.TempDir()
	src := `package p

const A, b = 1, 2
var (
	C int
	d int
)
type E struct{ F int }
type g struct{}
type H[T any] struct{}
type I interface{ J() }
func K() {}
func l() {}
func (E) M() {}
func (*E) n() {}
func (g) O() {}
func (*H[T]) P() {}
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p_test.go"), []byte("package p\n\nfunc Q() {}\n"), 0o644))
	names, err := exportedNames(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{"A", "C", "E.M", "H.P", "K", "type E", "type H", "type I"}, names, fmt.Sprint(names))
}
