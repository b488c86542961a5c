// Package defaultcheck compares configuration structs field by field for the tests that keep
// every default in one place: an actor's zero Config as its New fills it against the actor's
// DefaultConfig (the actor applies no default of its own), and a configuration the runtime
// builds against the same DefaultConfig (the runtime leaves nothing for the actor to fill).
//
// Only value fields count: fields of func, interface, pointer, channel and unsafe-pointer kind
// are dependencies (a clock, a logger, a store), whose nil means "none" or "the real one", not a
// default value.
package defaultcheck

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// Mismatches returns the value fields of filled that differ from want, as
// "Field: got X, want Y". filled and want must be structs of the same type.
func Mismatches(filled, want any) []string {
	var out []string
	each(filled, want, func(name string, f, w reflect.Value) {
		if !reflect.DeepEqual(f.Interface(), w.Interface()) {
			out = append(out, fmt.Sprintf("%s: got %v, want %v", name, f.Interface(), w.Interface()))
		}
	})
	return out
}

// Unresolved returns the value fields that are zero in cfg but not in defaults, as
// "Field (default X)": the fields the actor would still fill in.
func Unresolved(cfg, defaults any) []string {
	var out []string
	each(cfg, defaults, func(name string, c, d reflect.Value) {
		if c.IsZero() && !d.IsZero() {
			out = append(out, fmt.Sprintf("%s (default %v)", name, d.Interface()))
		}
	})
	return out
}

// each calls fn with every exported value field of the structs a and b (of one type).
func each(a, b any, fn func(name string, x, y reflect.Value)) {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Type() != vb.Type() || va.Kind() != reflect.Struct {
		panic(fmt.Sprintf("defaultcheck: want two structs of one type, got %T and %T", a, b))
	}
	for i := range va.NumField() {
		sf := va.Type().Field(i)
		if !sf.IsExported() {
			continue
		}
		switch sf.Type.Kind() {
		case reflect.Func, reflect.Interface, reflect.Pointer, reflect.Chan, reflect.UnsafePointer:
			continue
		case reflect.Slice:
			if sf.Type.Elem().Kind() == reflect.Struct || sf.Type.Elem().Kind() == reflect.Pointer || sf.Type.Elem().Kind() == reflect.Func {
				continue // a slice of dependencies (siblings, middleware)
			}
		}
		fn(sf.Name, va.Field(i), vb.Field(i))
	}
}

// ValueFields returns the names of the exported value fields of the struct v, the fields
// Mismatches and Unresolved compare: a table of defaults covers them all.
func ValueFields(v any) []string {
	var out []string
	each(v, v, func(name string, _, _ reflect.Value) { out = append(out, name) })
	return out
}

// Check is an actor's TestActorDefaults: fill is the actor's withDefaults (what New does to the
// Config it is given) and defaults its DefaultConfig. The actor applies no default of its own
// when filling a zero Config gives exactly defaults, and DefaultConfig holds resolved values
// only when filling it again changes nothing. A default added to withDefaults alone fails it.
func Check[C any](t testing.TB, fill func(C) C, defaults C) {
	t.Helper()
	var zero C
	if d := Mismatches(fill(zero), defaults); len(d) > 0 {
		t.Errorf("New fills a zero %T with values its DefaultConfig does not hold:\n%s", zero, strings.Join(d, "\n"))
	}
	if d := Mismatches(fill(defaults), defaults); len(d) > 0 {
		t.Errorf("New changes the values of its DefaultConfig (%T):\n%s", zero, strings.Join(d, "\n"))
	}
}
