package lint

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The "surface" rule: the exported API of the public library packages may
// not grow back silently. surfaceCeiling holds, per package, the number of
// exported identifiers it declares (counted as exportedNames counts them);
// a change that adds one raises the ceiling in the same commit, on purpose,
// and a change that removes some lowers it. Internal packages are not
// part of the surface.
var surfaceCeiling = map[string]int{
	"batch":          91, // includes Decoder.AppendLegacyFiltered (compaction rewrites legacy wrappers, issue 27)
	"index":          60, // the implementation since issue 25: what a segment needs of its indexes (Resize, Reset, Check, ...)
	"index/vfs":      10,
	"segment":        121, // the implementation since issue 25: what a partition needs of a segment (Ref, leases, spares, ...); includes ErrDeleted (a deleted segment whose files are gone, issue 28)
	"log":            139, // includes AppendBuilder, RestoreProducers and ProducerSnapshot (features of a round), Records.All (one-record reads, issue 16) and LegacyCleaner (issue 27)
	"log/logtest":    32,
	"compaction":     34,
	"segment/repair": 0, // moved to log/internal/repair
}

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

// TestSurface fails when a public package declares more exported
// identifiers than its ceiling, listing them, and reports a package that
// shrank below its ceiling (lower the ceiling then, so that the freed room
// is not refilled unnoticed).
func TestSurface(t *testing.T) {
	root := moduleRoot(t)
	total, ceiling := 0, 0
	for _, pkg := range slices.Sorted(maps.Keys(surfaceCeiling)) {
		names, err := exportedNames(filepath.Join(root, filepath.FromSlash(pkg)))
		require.NoError(t, err, pkg)
		total += len(names)
		ceiling += surfaceCeiling[pkg]
		if !assert.LessOrEqual(t, len(names), surfaceCeiling[pkg],
			"surface: package %s exports %d identifiers, more than its ceiling %d: unexport what importers do not need (export_test.go for tests, internal/ for machinery) or raise the ceiling on purpose; its names:\n%s",
			pkg, len(names), surfaceCeiling[pkg], strings.Join(names, "\n")) {
			continue
		}
		assert.Equal(t, surfaceCeiling[pkg], len(names),
			"surface: package %s exports %d identifiers, below its ceiling %d: lower the ceiling", pkg, len(names), surfaceCeiling[pkg])
	}
	t.Logf("exported surface: %d identifiers (ceiling %d)", total, ceiling)
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
