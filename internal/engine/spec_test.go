package engine

import (
	"testing"

	"github.com/watchtree/watchtree/store"
)

// TestSpecRecords: the mode decides whose records a stream keeps, in one place. An
// AllInstances stream keeps them per instance name; a SingleLeader stream keeps the shared
// position (the lease holder writes it), whichever instance runs it.
func TestSpecRecords(t *testing.T) {
	all := &Spec{Name: "orders"}
	if got := all.Records("pod-a"); got != (store.Scope{Stream: "orders", Instance: "pod-a"}) {
		t.Errorf("AllInstances scope = %+v", got)
	}
	leader := &Spec{Name: "orders", SingleLeader: true}
	for _, inst := range []string{"pod-a", "pod-b"} {
		if got := leader.Records(inst); got != (store.Scope{Stream: "orders"}) || !got.Shared() {
			t.Errorf("SingleLeader scope on %s = %+v, want the shared one", inst, got)
		}
	}
}

// TestSpecScope: Collection and Database alone decide what is watched, and every scope names
// itself.
func TestSpecScope(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		want Scope
	}{
		{Spec{Database: "shop", Collection: "orders"}, ScopeCollection},
		{Spec{Collection: "orders"}, ScopeCollection},
		{Spec{Database: "shop"}, ScopeDatabase},
		{Spec{}, ScopeCluster},
	} {
		if got := tc.spec.Scope(); got != tc.want {
			t.Errorf("%+v: scope %v, want %v", tc.spec, got, tc.want)
		}
	}
	for _, w := range []Scope{ScopeCollection, ScopeDatabase, ScopeCluster, 9} {
		if w.String() == "" {
			t.Errorf("empty String for %d", w)
		}
	}
}
