package watchtree_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"regexp"
	"strings"
	"testing"
)

// aliasFieldLine is one line of an alias's field list: "  - Name Type: what it is (default ...)".
var aliasFieldLine = regexp.MustCompile(`^\s+- (\w+) ([\w.\[\]*]+): \S`)

// TestPolicyAliasesListTheirFields: the root's policy types are aliases of package policy's
// (RetryPolicy = policy.Retry, ...), and go doc of an alias prints its own comment only, not the
// fields of the type it names. So each alias of a policy struct lists, in its comment, every
// field of that struct with its type, as "  - Name Type: ... (default ...)", and nothing else:
// `go doc watchtree.RetryPolicy` shows the fields a user fills in, and a field added to,
// renamed in or removed from the policy fails here until the root's list follows.
func TestPolicyAliasesListTheirFields(t *testing.T) {
	fset := token.NewFileSet()
	structs := map[string]map[string]string{} // policy type → field → type
	for _, f := range parseDir(t, fset, "policy", parser.SkipObjectResolution) {
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || !ts.Name.IsExported() {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			fields := map[string]string{}
			for _, fl := range st.Fields.List {
				for _, id := range fl.Names {
					if id.IsExported() {
						fields[id.Name] = types.ExprString(fl.Type)
					}
				}
			}
			if len(fields) > 0 {
				structs[ts.Name.Name] = fields
			}
			return false
		})
	}
	checked := 0
	for _, f := range parseDir(t, fset, ".", parser.ParseComments|parser.SkipObjectResolution) {
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.TYPE {
				continue
			}
			for _, spec := range gen.Specs {
				ts := spec.(*ast.TypeSpec)
				sel, ok := ts.Type.(*ast.SelectorExpr)
				if !ts.Assign.IsValid() || !ok {
					continue
				}
				if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "policy" {
					continue
				}
				want, ok := structs[sel.Sel.Name]
				if !ok {
					continue // an enum or an opaque value: no fields to list
				}
				checked++
				doc := ts.Doc
				if doc == nil {
					doc = gen.Doc
				}
				listed := map[string]string{}
				if doc != nil {
					for _, line := range strings.Split(doc.Text(), "\n") {
						if m := aliasFieldLine.FindStringSubmatch(line); m != nil {
							listed[m[1]] = m[2]
						}
					}
				}
				where := fset.Position(ts.Pos())
				for field, typ := range want {
					got, ok := listed[field]
					switch {
					case !ok:
						t.Errorf("%s: %s's comment does not list policy.%s's field %s (add \"  - %s %s: ... (default ...)\")",
							where, ts.Name.Name, sel.Sel.Name, field, field, typ)
					case got != typ:
						t.Errorf("%s: %s's comment lists %s as %s; policy.%s declares it %s", where, ts.Name.Name, field, got, sel.Sel.Name, typ)
					}
				}
				for field := range listed {
					if _, ok := want[field]; !ok {
						t.Errorf("%s: %s's comment lists %s, which policy.%s does not have", where, ts.Name.Name, field, sel.Sel.Name)
					}
				}
			}
		}
	}
	if checked < 5 {
		t.Fatalf("only %d aliases of policy structs found (RetryPolicy, RestartPolicy, CheckpointPolicy, LeasePolicy, SnapshotPolicy at least): the walk is broken", checked)
	}
}
