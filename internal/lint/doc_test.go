package lint

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The "user-docs" rule: the documentation of a public package speaks to its
// users, in the names they can use. A package doc, or the doc comment of an
// exported declaration (function, method of an exported type, type, struct
// field, interface method, constant, variable), fails when it names
//
//   - an internal package ("internal/segment/repair");
//   - an exported name of an internal package whose name no public package
//     shares ("base.ErrCorrupt": a user's name for it is batch.ErrCorrupt;
//     "vfs.MemFS");
//   - a Go source file ("state.go", "log/doc.go");
//   - an unexported identifier of its own package (any non-test file:
//     top-level names, methods, struct fields, interface methods) as the
//     selected name of x.name ("Partition.mu.truncating", "p.flushMu") or
//     in a doc link ("[lockFile]");
//   - an unexported field or method of one of its exported types as a
//     whole word ("mu"), unless the word is plain English (plainEnglish)
//     or a parameter or result of the documented function;
//   - an unexported identifier of another package of the module as
//     pkg.name ("segment.sealSegment"), in a doc link, or as a camelCase
//     word ("snapLink", "acquireSnapshot", "ensureDefaults"): a word with
//     an upper-case letter after a lower-case start is never English.
//
// Kafka's own names of format fields and configuration properties
// (kafkaNames) are the user's names too. A bare word that is an
// unexported top-level name is not checked: in this module most of them
// are English ("offset", "state"), and a doc that means the identifier
// writes it as x.name, camelCase or a link, which the rule catches.
// Indented code blocks of a doc are a caller's code, whose variables are
// the caller's: their bare words are not checked, the other forms are.
// The why and how of the implementation belong in DESIGN.md and in code
// comments, which the rule does not read.

// plainEnglish lists the words that are unexported fields or methods of an
// exported type and also plain English a doc uses ("err" is Go's English).
// "mu" is not English.
var plainEnglish = map[string]bool{
	"add": true, "adopt": true, "all": true, "base": true, "batches": true,
	"bounds": true, "budget": true, "cleaning": true, "close": true,
	"closed": true, "closes": true, "control": true, "count": true,
	"created": true, "decompressed": true, "end": true, "epochs": true,
	"err": true, "failed": true, "guarded": true, "header": true,
	"holding": true, "lease": true, "legacy": true, "length": true,
	"limit": true, "load": true, "lock": true, "log": true, "logger": true,
	"mapping": true, "mark": true, "max": true, "next": true, "offline": true,
	"other": true, "path": true, "pin": true, "plain": true, "plan": true,
	"producer": true, "producers": true, "progress": true, "read": true,
	"rebuild": true, "recover": true, "refused": true, "release": true,
	"released": true, "remove": true, "reopens": true, "reserved": true,
	"rolled": true, "root": true, "scan": true, "sealed": true, "section": true,
	"sendfile": true, "size": true, "start": true, "state": true,
	"suffix": true, "synced": true, "trim": true, "truncated": true,
	"truncations": true, "use": true, "wait": true, "walk": true,
	"window": true, "workers": true,
}

// kafkaNames are Apache Kafka's names of format fields and configuration
// properties, which a user's doc may use although a package declares an
// identifier of the same spelling.
var kafkaNames = map[string]bool{
	// RecordBatch v2 and record fields.
	"baseOffset": true, "batchLength": true, "partitionLeaderEpoch": true,
	"lastOffsetDelta": true, "baseTimestamp": true, "maxTimestamp": true,
	"producerId": true, "producerEpoch": true, "baseSequence": true,
	"recordsCount": true, "offsetDelta": true, "timestampDelta": true,
	"hasDeleteHorizonMs": true,
	// Transaction markers, aborted transactions, producer snapshots.
	"coordinatorEpoch": true, "firstOffset": true, "lastOffset": true,
	"lastStableOffset": true, "currentTxnFirstOffset": true,
	// Configuration properties.
	"segment.bytes": true, "segment.index.bytes": true, "index.interval.bytes": true,
	"max.message.bytes": true, "min.cleanable.dirty.ratio": true,
	"num.recovery.threads.per.data.dir": true, "background.threads": true,
	"local.retention.bytes": true, "retention.bytes": true, "remote.log.manager.thread.pool.size": true,
	// Kafka's code, which docs cite for its rules.
	"LogSegment.recover": true,
}

// docPackage is one package of the module as the rule sees it.
type docPackage struct {
	rel        string // directory relative to the module root, "" for the root
	name       string
	files      map[string]*ast.File // non-test files, by path relative to the module root
	unexported map[string]bool
	members    map[string]bool // unexported fields and methods, a subset of unexported
}

// docFinding is one name a user-facing doc should not use.
type docFinding struct {
	pos  token.Position
	file string // relative to the module root
	word string
	in   string // the declaration whose doc names it
}

func (f docFinding) String() string {
	return fmt.Sprintf("%s:%d: %q in the doc of %s", f.file, f.pos.Line, f.word, f.in)
}

// loadDocPackages parses the non-test files of every package of the module
// under root (examples/, testdata and nested modules left out).
func loadDocPackages(fset *token.FileSet, root string) (map[string]*docPackage, error) {
	pkgs := map[string]*docPackage{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p == root {
				return nil
			}
			if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			if !classify(filepath.ToSlash(rel)).library {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		relFile, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		relFile = filepath.ToSlash(relFile)
		return addDocFile(fset, pkgs, relFile, src)
	})
	return pkgs, err
}

// addDocFile parses one non-test file into the package of its directory.
func addDocFile(fset *token.FileSet, pkgs map[string]*docPackage, relFile string, src []byte) error {
	f, err := parser.ParseFile(fset, relFile, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	rel := path.Dir(relFile)
	if rel == "." {
		rel = ""
	}
	p := pkgs[rel]
	if p == nil {
		p = &docPackage{rel: rel, name: f.Name.Name, files: map[string]*ast.File{}, unexported: map[string]bool{}, members: map[string]bool{}}
		pkgs[rel] = p
	}
	p.files[relFile] = f
	for name, member := range declaredNames(f) {
		if !ast.IsExported(name) && name != "_" && name != "init" && name != "main" {
			p.unexported[name] = true
			if member {
				p.members[name] = true
			}
		}
	}
	return nil
}

// declaredNames yields the names a file declares: top-level functions,
// methods, types, constants and variables, and the fields and interface
// methods of its types; member is true for methods, fields and interface
// methods.
func declaredNames(f *ast.File) func(yield func(name string, member bool) bool) {
	return func(yield func(string, bool) bool) {
		ok, member := true, false
		var fields func(t ast.Expr)
		fields = func(t ast.Expr) {
			ast.Inspect(t, func(n ast.Node) bool {
				var list *ast.FieldList
				switch n := n.(type) {
				case *ast.StructType:
					list = n.Fields
				case *ast.InterfaceType:
					list = n.Methods
				case *ast.FuncLit, *ast.BlockStmt:
					return false
				}
				if list != nil {
					for _, fl := range list.List {
						for _, id := range fl.Names {
							ok = ok && yield(id.Name, member)
						}
					}
				}
				return ok
			})
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				ok = ok && yield(d.Name.Name, d.Recv != nil && receiverExported(d))
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						ok = ok && yield(s.Name.Name, false)
						member = s.Name.IsExported()
						fields(s.Type)
					case *ast.ValueSpec:
						for _, id := range s.Names {
							ok = ok && yield(id.Name, false)
						}
					}
				}
			}
			if !ok {
				return
			}
		}
	}
}

// receiverExported reports whether a method's receiver type is exported.
func receiverExported(d *ast.FuncDecl) bool {
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
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}

// userDocs yields the comment groups a user reads in the file, each with
// the name of what it documents: the package doc, and the docs of exported
// declarations.
func userDocs(f *ast.File) func(yield func(userDoc) bool) {
	return func(yield func(userDoc) bool) {
		ok := true
		var params map[string]bool
		emit := func(in string, groups ...*ast.CommentGroup) {
			for _, g := range groups {
				if g != nil && ok {
					ok = yield(userDoc{in: in, group: g, params: params})
				}
			}
		}
		emit("package "+f.Name.Name, f.Doc)
		var members func(owner string, t ast.Expr)
		members = func(owner string, t ast.Expr) {
			var list *ast.FieldList
			switch t := t.(type) {
			case *ast.StructType:
				list = t.Fields
			case *ast.InterfaceType:
				list = t.Methods
			}
			if list == nil {
				return
			}
			for _, fl := range list.List {
				name := ""
				for _, id := range fl.Names {
					if id.IsExported() {
						name = id.Name
					}
				}
				if len(fl.Names) == 0 { // an embedded field or interface
					name = baseTypeName(fl.Type)
				}
				if name == "" || !ast.IsExported(name) {
					continue
				}
				emit(owner+"."+name, fl.Doc, fl.Comment)
				members(owner+"."+name, fl.Type)
			}
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() || d.Recv != nil && !receiverExported(d) {
					continue
				}
				params = map[string]bool{}
				for _, fl := range []*ast.FieldList{d.Recv, d.Type.TypeParams, d.Type.Params, d.Type.Results} {
					if fl == nil {
						continue
					}
					for _, f := range fl.List {
						for _, id := range f.Names {
							params[id.Name] = true
						}
					}
				}
				in := d.Name.Name
				if d.Recv != nil {
					in = baseTypeName(d.Recv.List[0].Type) + "." + in
				}
				emit(in, d.Doc)
				params = nil
			case *ast.GenDecl:
				anyExported := false
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							anyExported = true
							emit(s.Name.Name, s.Doc, s.Comment)
							members(s.Name.Name, s.Type)
						}
					case *ast.ValueSpec:
						for _, id := range s.Names {
							if id.IsExported() {
								anyExported = true
								emit(id.Name, s.Doc, s.Comment)
								break
							}
						}
					}
				}
				if anyExported {
					in := d.Tok.String()
					if len(d.Specs) == 1 {
						switch s := d.Specs[0].(type) {
						case *ast.TypeSpec:
							in = s.Name.Name
						case *ast.ValueSpec:
							in = s.Names[0].Name
						}
					}
					emit(in, d.Doc)
				}
			}
			if !ok {
				return
			}
		}
	}
}

// userDoc is a comment group a user reads.
type userDoc struct {
	in     string // what it documents
	group  *ast.CommentGroup
	params map[string]bool // a function's parameter, result and receiver names
}

// baseTypeName names a type expression's base type: T for T, *T, T[X] and pkg.T.
func baseTypeName(t ast.Expr) string {
	switch x := t.(type) {
	case *ast.StarExpr:
		return baseTypeName(x.X)
	case *ast.IndexExpr:
		return baseTypeName(x.X)
	case *ast.IndexListExpr:
		return baseTypeName(x.X)
	case *ast.SelectorExpr:
		return x.Sel.Name
	case *ast.Ident:
		return x.Name
	}
	return ""
}

// docChecker holds what the rule knows of the module.
type docChecker struct {
	pkgs     map[string]*docPackage
	byName   map[string][]*docPackage // package name -> packages of that name
	anyUnexp map[string]bool          // every unexported identifier of the module
	// internalNames are the names of the internal packages that no public
	// package shares (base, vfs, mmap, ...; not segment or index).
	internalNames map[string]bool
}

func newDocChecker(pkgs map[string]*docPackage) *docChecker {
	c := &docChecker{pkgs: pkgs, byName: map[string][]*docPackage{}, anyUnexp: map[string]bool{}, internalNames: map[string]bool{}}
	public := map[string]bool{}
	for _, p := range pkgs {
		c.byName[p.name] = append(c.byName[p.name], p)
		for n := range p.unexported {
			c.anyUnexp[n] = true
		}
		if isInternalDir(p.rel) {
			c.internalNames[p.name] = true
		} else {
			public[p.name] = true
		}
	}
	for n := range public {
		delete(c.internalNames, n)
	}
	return c
}

// qualified reports whether name is unexported in a module package called
// qual.
func (c *docChecker) qualified(qual, name string) bool {
	for _, p := range c.byName[qual] {
		if p.unexported[name] {
			return true
		}
	}
	return false
}

func isIdentStart(r byte) bool { return r == '_' || r < 0x80 && unicode.IsLetter(rune(r)) }
func isIdentByte(r byte) bool  { return isIdentStart(r) || r >= '0' && r <= '9' }

// camelCase reports whether w starts lower-case and has an upper-case
// letter after that: an identifier, never an English word.
func camelCase(w string) bool {
	if w == "" || !unicode.IsLower(rune(w[0])) {
		return false
	}
	return strings.IndexFunc(w[1:], unicode.IsUpper) >= 0
}

// checkLine returns the words of one doc line of package p that the rule
// refuses. code is true for a line of an indented code block.
func (c *docChecker) checkLine(p *docPackage, line string, code bool, params map[string]bool) []string {
	var out []string
	if i := strings.Index(line, "internal/"); i >= 0 && (i == 0 || !isIdentByte(line[i-1])) {
		j := i + len("internal/")
		for j < len(line) && (isIdentByte(line[j]) || line[j] == '/') {
			j++
		}
		out = append(out, line[i:j])
	}
	for i := 0; i+3 <= len(line); i++ {
		// A source file: name.go, not pkg.go.dev.
		if line[i:i+3] != ".go" || i == 0 || !isIdentByte(line[i-1]) || i+3 < len(line) && (isIdentByte(line[i+3]) || line[i+3] == '.' && i+4 < len(line) && isIdentStart(line[i+4])) {
			continue
		}
		k := i
		for k > 0 && (isIdentByte(line[k-1]) || strings.IndexByte("/-.", line[k-1]) >= 0) {
			k--
		}
		out = append(out, line[k:i+3])
	}
	for i := 0; i < len(line); {
		if !isIdentStart(line[i]) || i > 0 && (isIdentByte(line[i-1]) || strings.IndexByte("./-'", line[i-1]) >= 0) {
			i++
			continue
		}
		// A chain a.b.c starting at i.
		var parts []string
		j := i
		for {
			k := j
			for k < len(line) && isIdentByte(line[k]) {
				k++
			}
			parts = append(parts, line[j:k])
			j = k
			if j+1 < len(line) && line[j] == '.' && isIdentStart(line[j+1]) {
				j++
				continue
			}
			break
		}
		bracketed := i > 0 && line[i-1] == '[' && j < len(line) && line[j] == ']'
		chain := strings.Join(parts, ".")
		i = j
		switch {
		case j < len(line) && line[j] == '/':
			continue // a path or an address: docs/format.md, github.com/...
		case len(parts) >= 2 && (parts[0] == "base" || c.internalNames[parts[0]]) && ast.IsExported(parts[1]):
			out = append(out, chain) // base.ErrCorrupt, vfs.MemFS
			continue
		case kafkaNames[chain]:
			continue
		case len(parts) >= 2 && strings.Trim(parts[0], "N") == "":
			continue // a file name pattern: NNNNNNNNNNNNNNNNNNNN.log
		}
		if len(parts) == 1 {
			w := parts[0]
			switch {
			case bracketed && p.unexported[w]:
				out = append(out, w)
			case code, params[w], len(w) == 1, kafkaNames[w]:
			case camelCase(w) && c.anyUnexp[w]:
				out = append(out, w)
			case p.members[w] && !plainEnglish[w]:
				out = append(out, w)
			}
			continue
		}
		for k, name := range parts[1:] {
			if ast.IsExported(name) || len(name) < 2 {
				continue
			}
			if p.unexported[name] || c.qualified(parts[k], name) || c.anyUnexp[name] && (camelCase(name) || bracketed) {
				out = append(out, chain)
				break
			}
		}
	}
	return out
}

// checkDocs returns the findings in the user docs of the packages whose
// directories are listed.
func (c *docChecker) checkDocs(fset *token.FileSet, dirs []string) []docFinding {
	var out []docFinding
	for _, rel := range dirs {
		p := c.pkgs[rel]
		if p == nil {
			continue
		}
		for _, file := range slices.Sorted(maps.Keys(p.files)) {
			for d := range userDocs(p.files[file]) {
				for _, cm := range d.group.List {
					text := cm.Text
					line0 := fset.Position(cm.Slash)
					var lines []string
					if strings.HasPrefix(text, "//") {
						lines = []string{strings.TrimPrefix(text, "//")}
					} else {
						lines = strings.Split(strings.TrimSuffix(strings.TrimPrefix(text, "/*"), "*/"), "\n")
					}
					for k, l := range lines {
						code := strings.HasPrefix(l, "\t") // gofmt indents a doc's code blocks with a tab
						for _, w := range c.checkLine(p, l, code, d.params) {
							pos := line0
							pos.Line += k
							out = append(out, docFinding{pos: pos, file: file, word: w, in: d.in})
						}
					}
				}
			}
		}
	}
	return out
}

// isInternalDir reports whether the package directory rel (relative to the
// module root) is an internal package.
func isInternalDir(rel string) bool {
	return rel == "internal" || strings.HasPrefix(rel, "internal/") || strings.Contains(rel, "/internal/") || strings.HasSuffix(rel, "/internal")
}

// userDocPackages lists the public packages: the module's library packages
// outside internal/.
func userDocPackages(pkgs map[string]*docPackage) []string {
	var dirs []string
	for rel := range pkgs {
		if isInternalDir(rel) {
			continue
		}
		dirs = append(dirs, rel)
	}
	slices.Sort(dirs)
	return dirs
}

// TestUserDocs checks the "user-docs" rule on the public packages.
func TestUserDocs(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	pkgs, err := loadDocPackages(fset, root)
	require.NoError(t, err)
	dirs := userDocPackages(pkgs)
	for _, want := range []string{"", "batch", "index", "segment", "log", "log/logtest", "compaction"} {
		require.Contains(t, dirs, want, "public package %q not found", want)
	}
	c := newDocChecker(pkgs)
	for _, f := range c.checkDocs(fset, dirs) {
		assert.Fail(t, "user-docs: "+f.String(), "a user's doc names what a user cannot see or use; say what a caller can rely on, in exported names, and move the how to DESIGN.md or a code comment")
	}
	t.Logf("checked the docs of %d packages", len(dirs))
}

// TestUserDocsRule feeds the rule small packages whose docs break it and
// keep it. Each case's source is package log of a module that also has a
// public package segment and an internal package vfs.
func TestUserDocsRule(t *testing.T) {
	const segmentSrc = `package segment

// Segment is a segment.
type Segment struct{ refs int }

func (s *Segment) pin() {}

func sealSegment() {}

const maxTimestamp = 35

// FS is a filesystem.
type FS interface{}
`
	const vfsSrc = `package vfs

// MemFS is an in-memory filesystem.
type MemFS struct{}
`
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"clean", `// Package log stores a partition. Open it with [Open]; see
// docs/format.md, github.com/partlog/partlog/log and pkg.go.dev. Kafka's
// segment.bytes and a batch's maxTimestamp are Kafka's names; segment.FS
// is public; e.g. a state.
package log

// Partition is a log.
type Partition struct{ mu int }

// Open opens p, e.g. for p.Close; errors wrap batch.ErrCorrupt.
func Open() {}

var state int
`, nil},
		{"a field as a word", `package log

// Partition is serialized by mu.
type Partition struct{ mu int }
`, []string{"mu"}},
		{"a field as x.name, twice", `package log

// Partition is serialized by Partition.mu.truncating, and p.flushMu.
type Partition struct{ mu, flushMu int; truncating bool }
`, []string{"Partition.mu.truncating", "p.flushMu"}},
		{"an unexported function and a doc link", `package log

// Open takes a reference (acquireSnapshot); see [lockFile].
func Open() {}

func acquireSnapshot() {}
func lockFile() {}
`, []string{"acquireSnapshot", "lockFile"}},
		{"plain English and a parameter", `package log

// Partition reads the state and its snapshot.
type Partition struct{ state, snapshot, cursor int }

// Seek moves to cursor.
func (p *Partition) Seek(cursor int) {}

// Tell returns cursor.
func (p *Partition) Tell() int { return 0 }
`, []string{"snapshot", "cursor"}},
		{"an internal package, an internal name, a file", `// Package log is a log (internal/segment/repair does the rest).
package log

// ErrX wraps base.ErrCorrupt; see state.go and log/doc.go. Tests use
// vfs.MemFS.
var ErrX error
`, []string{"internal/segment/repair", "state.go", "log/doc.go", "base.ErrCorrupt", "vfs.MemFS"}},
		{"another package's unexported name", `package log

// Open calls segment.sealSegment and Segment.pin, keeping refs.
func Open() {}
`, []string{"segment.sealSegment"}},
		{"a camelCase name of another package", `package log

// Open seals with sealSegment.
func Open() {}
`, []string{"sealSegment"}},
		{"a field doc, a line comment, a method doc, a constant", `package log

// Config configures.
type Config struct {
	// Size uses flushMu.
	Size int // and mu
}

// Close takes mu.
func (p *Partition) Close() {}

// Partition is a partition.
type Partition struct{ mu, flushMu int }

const (
	// Max is the most under mu.
	Max = 1
)
`, []string{"flushMu", "mu", "mu", "mu"}},
		{"unexported declarations and code blocks", `package log

// open takes mu.
func open() {}

// Open, for example:
//
//	mu := 1
//	p.flushMu.Lock()
func Open() {}

// Partition holds a partition.
type Partition struct{ mu, flushMu int }

// partition holds mu.
type partition struct{ mu int }

// Get takes mu, but on an unexported type.
func (p *partition) Get() {}
`, []string{"p.flushMu.Lock"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fset := token.NewFileSet()
			pkgs := map[string]*docPackage{}
			require.NoError(t, addDocFile(fset, pkgs, "segment/segment.go", []byte(segmentSrc)))
			require.NoError(t, addDocFile(fset, pkgs, "internal/vfs/vfs.go", []byte(vfsSrc)))
			require.NoError(t, addDocFile(fset, pkgs, "log/x.go", []byte(tt.src)))
			c := newDocChecker(pkgs)
			require.Equal(t, []string{"log", "segment"}, userDocPackages(pkgs))
			var got []string
			for _, f := range c.checkDocs(fset, []string{"log"}) {
				got = append(got, f.word)
			}
			assert.Equal(t, tt.want, got)
		})
	}
	// The word lists hold words, not identifiers a doc must not use.
	for w := range plainEnglish {
		assert.False(t, camelCase(w), "plainEnglish: %q is an identifier", w)
		assert.NotEqual(t, "mu", w)
	}
}
