package storetest

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/store"
)

// caseTimeout bounds every store call a case makes, so a hanging store fails the case.
const caseTimeout = 20 * time.Second

// testCtx returns a context cancelled after caseTimeout or when the test ends.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	t.Cleanup(cancel)
	return ctx
}

// baseTime is a fixed instant, already at millisecond precision, for records of cases that do
// not depend on the store's clock.
var baseTime = time.Date(2026, 3, 14, 15, 9, 26, 535_000_000, time.UTC)

// token returns a resume-token document {_data: data}.
func token(data string) bson.Raw {
	b, err := bson.Marshal(bson.D{{Key: "_data", Value: data}})
	if err != nil {
		panic(err)
	}
	return b
}

// doc returns the raw BSON of d.
func doc(d bson.D) bson.Raw {
	b, err := bson.Marshal(d)
	if err != nil {
		panic(err)
	}
	return b
}

// differ collects field mismatches between two records.
type differ struct{ diffs []string }

func (d *differ) str(name, want, got string) {
	if want != got {
		d.diffs = append(d.diffs, fmt.Sprintf("%s: want %q, got %q", name, want, got))
	}
}

func (d *differ) num(name string, want, got int64) {
	if want != got {
		d.diffs = append(d.diffs, fmt.Sprintf("%s: want %d, got %d", name, want, got))
	}
}

func (d *differ) raw(name string, want, got bson.Raw) {
	if !bytes.Equal(want, got) {
		d.diffs = append(d.diffs, fmt.Sprintf("%s: want %v, got %v", name, want, got))
	}
}

func (d *differ) ts(name string, want, got bson.Timestamp) {
	if want != got {
		d.diffs = append(d.diffs, fmt.Sprintf("%s: want %v, got %v", name, want, got))
	}
}

func (d *differ) time(name string, want, got time.Time) {
	if !want.Equal(got) || want.IsZero() != got.IsZero() {
		d.diffs = append(d.diffs, fmt.Sprintf("%s: want %v, got %v", name, want, got))
	}
}

func (d *differ) String() string { return strings.Join(d.diffs, "; ") }

// diffRecord lists the fields in which got differs from want, two records of one struct type
// of package store, in the order the struct declares them, leaving out the fields named in
// skip. Strings are compared as written, numbers by value, raw BSON by its bytes (nil equals
// empty), timestamps exactly, and times by Equal and by zeroness (so a zero time does not equal
// the epoch). Walking the struct rather than naming each field means a field added to a record
// is compared without being listed here; a field of a type it cannot compare panics, so that
// one is never skipped silently.
func diffRecord[R any](want, got R, skip ...string) string {
	var d differ
	wv, gv := reflect.ValueOf(want), reflect.ValueOf(got)
	for i := range wv.NumField() {
		name := wv.Type().Field(i).Name
		if slices.Contains(skip, name) {
			continue
		}
		w, g := wv.Field(i), gv.Field(i)
		switch wf := w.Interface().(type) {
		case time.Time:
			d.time(name, wf, g.Interface().(time.Time))
		case bson.Raw:
			d.raw(name, wf, g.Interface().(bson.Raw))
		case bson.Timestamp:
			d.ts(name, wf, g.Interface().(bson.Timestamp))
		default:
			switch w.Kind() {
			case reflect.String:
				d.str(name, w.String(), g.String())
			case reflect.Bool:
				if w.Bool() != g.Bool() {
					d.diffs = append(d.diffs, fmt.Sprintf("%s: want %v, got %v", name, w.Bool(), g.Bool()))
				}
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
				d.num(name, w.Int(), g.Int())
			case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
				d.num(name, int64(w.Uint()), int64(g.Uint()))
			default:
				panic(fmt.Sprintf("storetest: diffRecord cannot compare %s.%s of type %s", wv.Type(), name, w.Type()))
			}
		}
	}
	return d.String()
}

// notStored lists the Checkpoint fields a checkpoint diff leaves out: Rewind is a flag of the
// save, never stored.
var notStored = []string{"Rewind"}

// diffCheckpoint diffs two checkpoints but for what is not stored.
func diffCheckpoint(want, got store.Checkpoint) string { return diffRecord(want, got, notStored...) }

// wantRecords fails the test unless got holds want's records in want's order, exactly as
// diffRecord compares them (leaving out the fields in skip). what names the listing call in
// the message, and key names a record in the order printed with it.
func wantRecords[R any](t *testing.T, what string, got, want []R, key func(R) string, skip ...string) {
	t.Helper()
	keys := func(rs []R) []string {
		out := make([]string, len(rs))
		for i, r := range rs {
			out[i] = key(r)
		}
		return out
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %v, want %v", what, keys(got), keys(want))
	}
	for i := range want {
		if d := diffRecord(want[i], got[i], skip...); d != "" {
			t.Fatalf("%s[%d]: %s (order %v)", what, i, d, keys(got))
		}
	}
}

// doneContexts returns the two done contexts every suite's DoneContext case calls each store
// method with, by name, with the error the call must return (errors.Is).
func doneContexts(t *testing.T) []struct {
	name string
	ctx  context.Context
	want error
} {
	return []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"cancelled", cancelledCtx(), context.Canceled},
		{"deadline", expiredCtx(t), context.DeadlineExceeded},
	}
}

// suiteCase is one named case of a contract suite, run on a fresh store S.
type suiteCase[S any] struct {
	name string
	run  func(t *testing.T, s S)
}

// runSuite runs each case as a subtest on a store of its own from newStore.
func runSuite[S any](t *testing.T, newStore func(t *testing.T) S, cases []suiteCase[S]) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newStore(t)) })
	}
}

// clockedCase is one named case of a suite whose store reads the suite's clock: the case may
// move it.
type clockedCase[S any] struct {
	name string
	run  func(t *testing.T, s S, clk *clock.Fake)
}

// runClockedSuite runs each case as a subtest on a store of its own from newStore, whose clock
// is a fake one that starts at the wall-clock time (so that a real server's TTL monitor, which
// uses its own clock, does not delete records while a case runs) and only moves when the case
// advances it.
func runClockedSuite[S any](t *testing.T, newStore func(t *testing.T, now func() time.Time) S, cases []clockedCase[S]) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewFake(time.Now().UTC().Truncate(time.Millisecond))
			c.run(t, newStore(t, clk.Now), clk)
		})
	}
}

// unclocked adapts a case that leaves the clock alone to a clockedCase's run.
func unclocked[S any](run func(t *testing.T, s S)) func(t *testing.T, s S, clk *clock.Fake) {
	return func(t *testing.T, s S, _ *clock.Fake) { run(t, s) }
}

// cancelledCtx returns an already-cancelled context.
func cancelledCtx() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// expiredCtx returns a context whose deadline has already passed.
func expiredCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	t.Cleanup(cancel)
	return ctx
}

// promptly fails the test if f takes longer than a second: a call on a done context must not
// wait for the network.
func promptly(t *testing.T, what string, f func() error) error {
	t.Helper()
	start := time.Now()
	err := f()
	if d := time.Since(start); d > time.Second {
		t.Errorf("%s on a done context took %s, want well under 1s", what, d)
	}
	return err
}

// timeMs returns n milliseconds.
func timeMs[N ~int | ~int64 | ~uint64](n N) time.Duration { return time.Duration(n) * time.Millisecond }

// sh returns the shared scope of stream (no instance).
func sh(stream string) store.Scope { return store.Scope{Stream: stream} }

// inst returns the scope of stream's instance.
func inst(stream, instance string) store.Scope {
	return store.Scope{Stream: stream, Instance: instance}
}
