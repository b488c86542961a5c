package watchtree_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxPublicSurface bounds the exported identifiers of the library's importable packages (see
// publicSurface for what counts). A change that grows the public API past the bound has to raise
// it here, on purpose and in review, saying what it added; a change that shrinks it lowers it.
// Each step's reason is in this file's history (git log -p surface_test.go).
//
// Where the 759 are (go test -v -run TestPublicSurface): the root's user API, 178, with the
// aliases it keeps so that code written against it needs one import (the policies, the status
// type and its state and role names, Clock, ConfigError); observe's events, 110 (each event's
// Kind and String methods count); the console protocol and the actors' messages, 88 (protobuf
// types and enums; the methods protoc generates do not count); the stores' contract and three
// implementations, 47 + 43 + 32 + 15 (an implementation's methods are its contract's); policy,
// 36, and status, 25 (with Row, the console row the CLI's module tests its JSON against), the
// leaves the root aliases, which the public actors need; the actors and
// the tree's contract (actors/streamtree), about 70; the sinks and the suites every adapter
// module runs (sinktest, storetest, observetest), about 50; clock, configerr, console, health,
// the metric adapters and store/leasewatch, the rest. Plumbing that only the module calls is
// behind internal/ (the policies' defaults, validators and readers in internal/policyx, the
// reader of a supervisor's status reply in internal/statusx).
const maxPublicSurface = 759

// TestPublicSurface keeps the public API small: it counts the exported identifiers of every
// importable package of the library and its adapters and fails above maxPublicSurface. The
// per-package counts are logged (go test -v -run TestPublicSurface).
func TestPublicSurface(t *testing.T) {
	counts, err := publicSurface(".")
	if err != nil {
		t.Fatal(err)
	}
	dirs := make([]string, 0, len(counts))
	total := 0
	for dir, n := range counts {
		dirs = append(dirs, dir)
		total += n
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		t.Logf("%4d %s", counts[dir], dir)
	}
	t.Logf("%4d in %d packages", total, len(dirs))
	if len(dirs) < 10 {
		t.Fatalf("only %d packages found: the walk is broken", len(dirs))
	}
	if total > maxPublicSurface {
		t.Errorf("the public surface has %d exported identifiers, more than %d", total, maxPublicSurface)
	}
}

// publicSurface counts, per package directory below root, the exported identifiers a user can
// name: top-level types, functions, variables and constants, and the exported methods of
// exported types. Left out: internal/ (not importable), main packages, tests, examples/ and
// test/ (test/mongosim is a product of its own, with its own module; test/integration and
// test/bench are test code), and the methods protoc generates on every message and enum (Reset,
// String, ProtoReflect, Descriptor and a getter per field: they come with the type, which
// counts). A type of an internal package that a public package re-exports with an alias is
// public through it: its exported methods count, under the internal package's directory.
func publicSurface(root string) (map[string]int, error) {
	counts := map[string]int{}
	fset := token.NewFileSet()
	// aliased: internal import path → the type names public packages alias from it.
	aliased := map[string]map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch name := d.Name(); {
			case path == root:
			case name == "internal", name == "testdata", name == "node_modules", name == "examples",
				strings.HasPrefix(name, "."), path == filepath.Join(root, "test"):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" {
			return nil
		}
		generated := strings.HasSuffix(path, ".pb.go")
		dir := filepath.Dir(path)
		noteInternalAliases(f, aliased)
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if !decl.Name.IsExported() {
					continue
				}
				if decl.Recv != nil && (generated || !exportedReceiver(decl.Recv.List[0].Type)) {
					continue
				}
				counts[dir]++
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						if spec.Name.IsExported() {
							counts[dir]++
						}
					case *ast.ValueSpec:
						for _, name := range spec.Names {
							if name.IsExported() {
								counts[dir]++
							}
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	const module = "github.com/watchtree/watchtree/"
	for path, types := range aliased {
		dir := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(path, module)))
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			return nil, err
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
			if err != nil {
				return nil, err
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if ok && fn.Recv != nil && fn.Name.IsExported() && types[receiverName(fn.Recv.List[0].Type)] {
					counts[dir]++
				}
			}
		}
	}
	return counts, nil
}

// noteInternalAliases records in aliased the types f re-exports from internal packages
// (type X = pkg.Y, pkg imported from a path with an internal/ element).
func noteInternalAliases(f *ast.File, aliased map[string]map[string]bool) {
	internalAliases(f, func(_ *ast.TypeSpec, path, name string) {
		if aliased[path] == nil {
			aliased[path] = map[string]bool{}
		}
		aliased[path][name] = true
	})
}

// internalAliases calls found for every exported type f declares as an alias of a type of an
// internal package: the declaration, the package's import path and the aliased type's name.
func internalAliases(f *ast.File, found func(ts *ast.TypeSpec, path, name string)) {
	imports := map[string]string{} // local name → path
	for _, imp := range f.Imports {
		path := strings.Trim(imp.Path.Value, `"`)
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		imports[name] = path
	}
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.TYPE {
			continue
		}
		for _, spec := range gen.Specs {
			ts := spec.(*ast.TypeSpec)
			sel, ok := ts.Type.(*ast.SelectorExpr)
			if !ts.Assign.IsValid() || !ok || !ts.Name.IsExported() {
				continue
			}
			pkg, ok := sel.X.(*ast.Ident)
			if !ok || !strings.Contains(imports[pkg.Name], "/internal/") {
				continue
			}
			found(ts, imports[pkg.Name], sel.Sel.Name)
		}
	}
}

// TestNoExportedAliasOfInternal walks the root package's source: an exported type declared as an
// alias of a type of an internal/ package shows users `type X = internalpkg.Y` in go doc and
// nothing of its fields or values, which they cannot look up either. What users fill in is
// declared in the root, or in a public leaf package the root aliases (clock, configerr, status),
// with its docs. No exception is left.
func TestNoExportedAliasOfInternal(t *testing.T) {
	found := map[string]string{}
	fset := token.NewFileSet()
	files := parseDir(t, fset, ".", parser.SkipObjectResolution)
	parsed := len(files)
	for _, f := range files {
		internalAliases(f, func(ts *ast.TypeSpec, path, name string) {
			found[ts.Name.Name] = fmt.Sprintf("%s: type %s = %s.%s", fset.Position(ts.Pos()), ts.Name.Name, path, name)
		})
	}
	if parsed < 10 {
		t.Fatalf("only %d files parsed: the walk is broken", parsed)
	}
	for _, where := range found {
		t.Errorf("%s: declare the type in the root (or a public leaf package it aliases) with its fields documented, not as an alias of an internal type", where)
	}
}

// receiverName returns the type name of a method's receiver (T, *T, T[P], *T[P]).
func receiverName(t ast.Expr) string {
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// exportedReceiver reports whether a method's receiver type is exported.
func exportedReceiver(t ast.Expr) bool { return ast.IsExported(receiverName(t)) }

// parseDir parses the non-test .go files of dir with mode, on fset, failing t on any error.
func parseDir(t *testing.T, fset *token.FileSet, dir string, mode parser.Mode) []*ast.File {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, mode)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}
