package watchtree

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportedIdentifiersHaveDocComments walks the public packages (all but internal/, cmd/,
// examples/, test/bench, test/integration and the generated messages/) and fails for every
// exported type, function, method of an exported type, constant, variable, interface method or
// struct field without a doc comment. A field without one of its own is documented when it sits
// on the line after a documented field (a group: "OnInsert, OnUpdate, ... handle ..."); a
// constant or variable by its block's comment.
func TestExportedIdentifiersHaveDocComments(t *testing.T) {
	skip := []string{"internal", "cmd", "examples", "messages", "proto", "docs", "test/bench", "test/integration", "test/mongosim/clients"}
	missing := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			for _, s := range skip {
				if path == s || strings.HasPrefix(path, s+"/") || strings.Contains(path, "/internal") {
					return filepath.SkipDir
				}
			}
			if strings.HasPrefix(d.Name(), ".") && path != "." || d.Name() == "node_modules" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" || ast.IsGenerated(f) {
			return nil
		}
		for _, what := range undocumented(fset, f) {
			t.Errorf("%s: %s has no doc comment", what.pos, what.name)
			missing++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if missing > 0 {
		t.Logf("%d exported identifiers without a doc comment: say what each is, with its unit, default and failure behaviour where it has them", missing)
	}
}

type undocumentedIdent struct {
	pos  token.Position
	name string
}

func undocumented(fset *token.FileSet, f *ast.File) []undocumentedIdent {
	var out []undocumentedIdent
	add := func(pos token.Pos, name string) { out = append(out, undocumentedIdent{fset.Position(pos), name}) }
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() || d.Doc != nil {
				continue
			}
			if d.Recv == nil {
				add(d.Pos(), "func "+d.Name.Name)
				continue
			}
			if recv := receiverName(d.Recv.List[0].Type); ast.IsExported(recv) {
				add(d.Pos(), "method "+recv+"."+d.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					if s.Doc == nil && d.Doc == nil {
						add(s.Pos(), "type "+s.Name.Name)
					}
					switch tt := s.Type.(type) {
					case *ast.StructType:
						out = append(out, undocumentedFields(fset, s.Name.Name, tt.Fields)...)
					case *ast.InterfaceType:
						out = append(out, undocumentedFields(fset, s.Name.Name, tt.Methods)...)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() && s.Doc == nil && s.Comment == nil && d.Doc == nil {
							add(n.Pos(), n.Name)
						}
					}
				}
			}
		}
	}
	return out
}

func undocumentedFields(fset *token.FileSet, typ string, fields *ast.FieldList) []undocumentedIdent {
	var out []undocumentedIdent
	documented, prevEnd := false, -10
	for _, fld := range fields.List {
		line := fset.Position(fld.Pos()).Line
		has := fld.Doc != nil || fld.Comment != nil
		grouped := !has && documented && line == prevEnd+1
		for _, n := range fld.Names {
			if n.IsExported() && !has && !grouped {
				out = append(out, undocumentedIdent{fset.Position(n.Pos()), typ + "." + n.Name})
			}
		}
		documented = has || grouped
		prevEnd = fset.Position(fld.End()).Line
	}
	return out
}

func receiverName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return receiverName(t.X)
	case *ast.IndexExpr:
		return receiverName(t.X)
	case *ast.IndexListExpr:
		return receiverName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return ""
}
