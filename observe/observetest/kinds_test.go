package observetest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/watchtree/watchtree/observe"
)

// TestSamplesCoverEveryKind: one sample per kind, each of its own kind.
func TestSamplesCoverEveryKind(t *testing.T) {
	sm := Samples()
	for _, k := range observe.Kinds() {
		if ev, ok := sm[k]; !ok {
			t.Errorf("no sample of kind %v", k)
		} else if ev.Kind() != k {
			t.Errorf("the sample of kind %v is of kind %v", k, ev.Kind())
		}
	}
	if len(sm) != len(observe.Kinds()) {
		t.Errorf("%d samples for %d kinds", len(sm), len(observe.Kinds()))
	}
}

// recorder is a testing.TB that keeps what was reported as an error.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestEveryKindReportsEachMistake: an exporter that exports every kind but the one it lists
// passes; one that exports a listed kind, ignores an unlisted one, lists one without a reason or
// lists a value that is no kind fails, naming it.
func TestEveryKindReportsEachMistake(t *testing.T) {
	exportsAllBut := func(skip observe.Kind) func(observe.Event) bool {
		return func(ev observe.Event) bool { return ev.Kind() != skip }
	}
	r := &recorder{TB: t}
	EveryKind(r, map[observe.Kind]string{observe.KindGapRecorded: "a reason"}, exportsAllBut(observe.KindGapRecorded))
	if len(r.errs) != 0 {
		t.Fatalf("a correct account failed: %q", r.errs)
	}
	for _, c := range []struct {
		name     string
		listed   map[observe.Kind]string
		exports  func(observe.Event) bool
		mentions string
	}{
		{"an unlisted kind exports nothing", nil, exportsAllBut(observe.KindGapRecorded), "kind gap exports nothing"},
		{"a listed kind exports", map[observe.Kind]string{observe.KindStarted: "r"}, exportsAllBut(0), "kind started exports something"},
		{"a listing without a reason", map[observe.Kind]string{observe.KindGapRecorded: ""}, exportsAllBut(observe.KindGapRecorded), "without a reason"},
		{"a listing of no kind", map[observe.Kind]string{observe.Kind(250): "r"}, exportsAllBut(0), "Kind(250) is listed as unexported but is no kind"},
	} {
		r := &recorder{TB: t}
		EveryKind(r, c.listed, c.exports)
		if len(r.errs) != 1 || !strings.Contains(r.errs[0], c.mentions) {
			t.Errorf("%s: reported %q, want one error mentioning %q", c.name, r.errs, c.mentions)
		}
	}
}
