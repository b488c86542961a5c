package main

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"google.golang.org/protobuf/proto"

	wtstatus "github.com/watchtree/watchtree/status"
)

// notInRow lists the fields of status.Stream that the console row leaves out, each with the
// reason. The row is one line of the streams table; describe answers with the supervisor's
// StatusReply as well, where these are. A field added to the status must reach the row or be
// listed here: TestStatusFieldsReachTheRowAndTheJSON fails otherwise, and it fails too for a
// field listed here that reaches the row after all.
var notInRow = map[string]string{
	"Handled":            "the outcome counts beyond settled and dead-lettered are describe's status.settlements",
	"Filtered":           "the outcome counts beyond settled and dead-lettered are describe's status.settlements",
	"Unhandled":          "the outcome counts beyond settled and dead-lettered are describe's status.settlements",
	"Skipped":            "the outcome counts beyond settled and dead-lettered are describe's status.settlements",
	"SettledThrough":     "a cluster time for AwaitCaughtUp; the row shows the read position's lag, describe's status.settled_through has it",
	"LastStop":           "the stop command answers with its report (describe's status.last_stop has it too)",
	"Snapshot":           "snapshot progress is describe's status.snapshot",
	"OnDemand":           "on-demand snapshot progress is describe's status.on_demand",
	"Lease.Instance":     "this instance's ID is the instance's, not the stream's (instance.id)",
	"Lease.Why":          "the role's reason is describe's status.lease.why",
	"Lease.Acquisitions": "the lease counters are describe's status.lease",
	"Lease.Losses":       "the lease counters are describe's status.lease",
	"Lease.HandOvers":    "the lease counters are describe's status.lease",
	"Lease.Fenced":       "the lease counters are describe's status.lease",
}

// TestStatusFieldsReachTheRowAndTheJSON walks every field of status.Stream by reflection (into
// the structs its pointers point to), gives each a distinct non-zero value, and checks that
// each one reaches the console row (status.Row) and the CLI's JSON of it (marshalJSON): with
// the field zeroed, both change. So a field added to the status later cannot be forgotten by
// the console or the CLI without being listed in notInRow with a reason.
func TestStatusFieldsReachTheRowAndTheJSON(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	var st wtstatus.Stream
	n := 0
	leaves := fill(t, reflect.ValueOf(&st).Elem(), "", now, &n)
	row := wtstatus.Row(st, now)
	js, err := marshalJSON(row, false)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, l := range leaves {
		seen[l.path] = true
		old := reflect.New(l.v.Type()).Elem()
		old.Set(l.v)
		l.v.SetZero()
		without := wtstatus.Row(st, now)
		jsWithout, err := marshalJSON(without, false)
		if err != nil {
			t.Fatal(err)
		}
		l.v.Set(old)
		inRow, inJSON := !proto.Equal(row, without), !bytes.Equal(js, jsWithout)
		why, exempt := notInRow[l.path]
		switch {
		case exempt && (inRow || inJSON):
			t.Errorf("%s reaches the row now: take it out of notInRow (%q)", l.path, why)
		case !exempt && !inRow:
			t.Errorf("%s does not reach the console row (status.Row): map it there, or list it in notInRow with the reason", l.path)
		case !exempt && !inJSON:
			t.Errorf("%s reaches the row but not the CLI's JSON", l.path)
		}
	}
	for path := range notInRow {
		if !seen[path] {
			t.Errorf("notInRow lists %s, which status.Stream does not have", path)
		}
	}
}

type leaf struct {
	path string
	v    reflect.Value
}

// fill sets every field of the struct v to a distinct non-zero value and returns the fields
// the test zeroes one by one: the leaves, and a pointer to a struct as a whole when its path is
// in notInRow (its fields are not walked then).
func fill(t *testing.T, v reflect.Value, prefix string, now time.Time, counter *int) []leaf {
	var out []leaf
	for i := range v.NumField() {
		f, sf := v.Field(i), v.Type().Field(i)
		path := prefix + sf.Name
		*counter++
		n := *counter // distinct within the walk
		switch x := f.Addr().Interface().(type) {
		case *time.Time:
			*x = now.Add(-time.Duration(n) * time.Second)
		case *time.Duration:
			*x = time.Duration(n) * time.Millisecond
		case *bson.Timestamp:
			*x = bson.Timestamp{T: uint32(n), I: uint32(n)}
		case *bson.Raw:
			// A resume token whose _data starts with a cluster time (0x82, seconds, increment).
			*x, _ = bson.Marshal(bson.D{{Key: "_data", Value: fmt.Sprintf("82%08X%08X04", now.Unix()-int64(n), n)}})
		case *[]string:
			*x = []string{fmt.Sprintf("warning %d", n)}
		default:
			switch f.Kind() {
			case reflect.String:
				f.SetString(fmt.Sprintf("value %d", n))
			case reflect.Uint32, reflect.Uint64:
				f.SetUint(uint64(n))
			case reflect.Int, reflect.Int64:
				f.SetInt(int64(n))
			case reflect.Float64:
				f.SetFloat(float64(n) + 0.5)
			case reflect.Bool:
				f.SetBool(true)
			case reflect.Pointer:
				f.Set(reflect.New(f.Type().Elem()))
				if _, whole := notInRow[path]; whole {
					fill(t, f.Elem(), path+".", now, counter)
					out = append(out, leaf{path, f})
					continue
				}
				out = append(out, fill(t, f.Elem(), path+".", now, counter)...)
				continue
			default:
				t.Fatalf("%s: no value for a %v: teach the test one", path, f.Type())
			}
		}
		out = append(out, leaf{path, f})
	}
	return out
}
