package watchtree

import (
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/watchtree/watchtree/internal/policy"
)

// internalAliasesLeft are the exported root types still declared as aliases of an internal/
// package's type, each with why it has not moved yet. The list only shrinks: a type moved to a
// declaration of its own leaves it, and TestNoExportedAliasOfInternal fails for a new alias and
// for a listed name that is no longer one.
var internalAliasesLeft = map[string]string{
	"StartPosition":     "opaque: moves with the constructors Resume, Latest and At (issue 40, item 1)",
	"HistoryLostPolicy": "opaque: moves with Fail, ResumeFromNow, Rebuild and observe's events (issue 40, item 1)",
	"InvalidatePolicy":  "reported by observe.Invalidated, which cannot import the root (issue 40, item 1)",
	"ConfigError":       "created inside internal/policy, matched with errors.As everywhere (issue 40, item 1)",
	"Clock":             "internal/clock's interface, implemented by the tests' fake clocks (issue 40, item 1)",
	"Timer":             "internal/clock's, returned by Clock.AfterFunc (issue 40, item 1)",
	"ServerReadings":    "internal/readings', the console's and metrics' memory of the server (issue 40, item 1)",
}

// TestNoExportedAliasOfInternal walks the root package's source: an exported type declared as an
// alias of a type of an internal/ package shows users `type X = internalpkg.Y` in go doc and
// nothing of its fields or values, which they cannot look up either. What users fill in is
// declared here, with its docs.
func TestNoExportedAliasOfInternal(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		imports := map[string]string{} // local name → import path
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			local := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				local = imp.Name.Name
			}
			imports[local] = path
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				if !ts.Name.IsExported() || !ts.Assign.IsValid() {
					continue
				}
				sel, ok := ts.Type.(*ast.SelectorExpr)
				if !ok {
					continue
				}
				pkg, _ := sel.X.(*ast.Ident)
				if pkg != nil && strings.Contains(imports[pkg.Name], "/internal/") {
					found[ts.Name.Name] = fset.Position(ts.Pos()).String() + ": type " + ts.Name.Name + " = " + imports[pkg.Name] + "." + sel.Sel.Name
				}
			}
		}
	}
	if len(files) < 10 {
		t.Fatalf("only %d files found: the walk is broken", len(files))
	}
	names := make([]string, 0, len(found))
	for name := range found {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if internalAliasesLeft[name] == "" {
			t.Errorf("%s: declare the type in the root with its fields documented, not as an alias of an internal type", found[name])
		}
	}
	for name := range internalAliasesLeft {
		if found[name] == "" {
			t.Errorf("internalAliasesLeft lists %s, which is no longer an alias of an internal type: remove it from the list", name)
		}
	}
}

// TestPolicyConversionsKeepEveryField: LeasePolicy and SnapshotPolicy convert to the actors' form
// field by field (their enum fields are root types, so a struct conversion cannot express them).
// Every field of the root type is set to a distinct non-zero value, converted, and found under the
// same name, with the same value, in the internal type, and the two types have the same fields:
// a field added to one side, or left out of the conversion, fails here.
func TestPolicyConversionsKeepEveryField(t *testing.T) {
	for _, tc := range []struct {
		name    string
		root    any                 // a pointer to a zero root value, filled in by fill
		convert func(any) any       // the root value to the internal one
		inner   reflect.Type        // the internal type
		extra   func(reflect.Value) // sets what fill cannot (an interface field)
	}{
		{"LeasePolicy", &LeasePolicy{}, func(p any) any { return p.(LeasePolicy).internal() }, reflect.TypeOf(policy.Lease{}), nil},
		{"SnapshotPolicy", &SnapshotPolicy{}, func(p any) any { return p.(SnapshotPolicy).internal() }, reflect.TypeOf(policy.Snapshot{}),
			func(v reflect.Value) { v.FieldByName("Filter").Set(reflect.ValueOf(map[string]int{"x": 1})) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rv := reflect.ValueOf(tc.root).Elem()
			for i := range rv.NumField() {
				fill(t, rv.Type().Field(i).Name, rv.Field(i), i+1)
			}
			if tc.extra != nil {
				tc.extra(rv)
			}
			got := reflect.ValueOf(tc.convert(rv.Interface()))
			if got.Type() != tc.inner {
				t.Fatalf("converted to %v, want %v", got.Type(), tc.inner)
			}
			if rv.NumField() != got.NumField() {
				t.Errorf("%s has %d fields, %v has %d", tc.name, rv.NumField(), tc.inner, got.NumField())
			}
			for i := range rv.NumField() {
				name := rv.Type().Field(i).Name
				g := got.FieldByName(name)
				if !g.IsValid() {
					t.Errorf("%v has no field %s", tc.inner, name)
					continue
				}
				want := rv.Field(i)
				if want.Kind() != reflect.Interface && want.Type().ConvertibleTo(g.Type()) {
					want = want.Convert(g.Type())
				}
				if !reflect.DeepEqual(g.Interface(), want.Interface()) {
					t.Errorf("%s.%s = %v became %v", tc.name, name, rv.Field(i).Interface(), g.Interface())
				}
			}
		})
	}
}

// fill sets v, the field name, to a non-zero value derived from n, so that two fields of one
// struct hold different values.
func fill(t *testing.T, name string, v reflect.Value, n int) {
	t.Helper()
	switch {
	case v.Type() == reflect.TypeOf(time.Duration(0)):
		v.SetInt(int64(n) * int64(time.Second))
	case v.CanInt():
		v.SetInt(int64(n))
	case v.CanUint():
		v.SetUint(uint64(n % math.MaxUint8))
	case v.CanFloat():
		v.SetFloat(float64(n) + 0.5)
	case v.Kind() == reflect.Bool:
		v.SetBool(true)
	case v.Kind() == reflect.String:
		v.SetString(name)
	case v.Kind() == reflect.Interface:
		// set by the case's extra
	default:
		t.Fatalf("field %s of kind %v: teach fill to set it", name, v.Kind())
	}
}
