package watchtree

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/watchtree/watchtree/policy"
)

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
