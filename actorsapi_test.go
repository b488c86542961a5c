package watchtree_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestActorsAPIUsesPublicTypes walks the source of every actors/* package, and of the public
// leaves their API names (policy, clock, configerr): the actor packages
// are public by design (outside code may build an actor's Config, implement dispatcher.Router),
// so every type named in an exported declaration — an exported function's or method's
// signature, an exported type's definition with its exported fields and interface methods, an
// exported variable's or constant's declared type — must be importable: no internal/ type.
func TestActorsAPIUsesPublicTypes(t *testing.T) {
	dirs, err := filepath.Glob("actors/*")
	if err != nil {
		t.Fatal(err)
	}
	// The public leaves the actors' API names are held to the same rule.
	dirs = append(dirs, "policy", "clock", "configerr")
	found := map[string][]string{} // "pkg.Type" → where
	fset := token.NewFileSet()
	parsed := 0
	for _, dir := range dirs {
		for _, f := range parseDir(t, fset, dir, parser.SkipObjectResolution) {
			parsed++
			exportedInternalTypes(f, func(n ast.Node, path, typ string) {
				key := path[strings.LastIndex(path, "/")+1:] + "." + typ
				found[key] = append(found[key], fset.Position(n.Pos()).String())
			})
		}
	}
	if parsed < 12 {
		t.Fatalf("only %d files parsed: the walk is broken", parsed)
	}
	keys := make([]string, 0, len(found))
	for k := range found {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Errorf("%s, an internal type, is in the actors' exported API at %s: move it to a public package or unexport its use",
			k, strings.Join(found[k], ", "))
	}
}

// exportedInternalTypes calls found for every type of an internal/ package that an exported
// declaration of f names.
func exportedInternalTypes(f *ast.File, found func(n ast.Node, path, name string)) {
	imports := map[string]string{} // local name → path
	for _, imp := range f.Imports {
		path := strings.Trim(imp.Path.Value, `"`)
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		imports[name] = path
	}
	var walk func(e ast.Expr)
	walk = func(e ast.Expr) {
		switch x := e.(type) {
		case nil:
		case *ast.SelectorExpr:
			if pkg, ok := x.X.(*ast.Ident); ok && strings.Contains(imports[pkg.Name], "/internal/") {
				found(x, imports[pkg.Name], x.Sel.Name)
			}
		case *ast.StarExpr:
			walk(x.X)
		case *ast.ArrayType:
			walk(x.Len)
			walk(x.Elt)
		case *ast.MapType:
			walk(x.Key)
			walk(x.Value)
		case *ast.ChanType:
			walk(x.Value)
		case *ast.Ellipsis:
			walk(x.Elt)
		case *ast.ParenExpr:
			walk(x.X)
		case *ast.IndexExpr:
			walk(x.X)
			walk(x.Index)
		case *ast.IndexListExpr:
			walk(x.X)
			for _, i := range x.Indices {
				walk(i)
			}
		case *ast.BinaryExpr: // a constraint's union
			walk(x.X)
			walk(x.Y)
		case *ast.UnaryExpr: // ~T
			walk(x.X)
		case *ast.FuncType:
			fields(x.TypeParams, walk, false)
			fields(x.Params, walk, false)
			fields(x.Results, walk, false)
		case *ast.StructType:
			fields(x.Fields, walk, true)
		case *ast.InterfaceType:
			fields(x.Methods, walk, true)
		}
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() || (d.Recv != nil && !exportedReceiver(d.Recv.List[0].Type)) {
				continue
			}
			walk(d.Type)
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						fields(s.TypeParams, walk, false)
						walk(s.Type)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							walk(s.Type)
							break
						}
					}
				}
			}
		}
	}
}

// fields walks the types of a field list; with exportedOnly, only of its exported and embedded
// fields (a struct's or an interface's).
func fields(list *ast.FieldList, walk func(ast.Expr), exportedOnly bool) {
	if list == nil {
		return
	}
	for _, f := range list.List {
		if exportedOnly && len(f.Names) > 0 {
			exported := false
			for _, n := range f.Names {
				exported = exported || n.IsExported()
			}
			if !exported {
				continue
			}
		}
		walk(f.Type)
	}
}
