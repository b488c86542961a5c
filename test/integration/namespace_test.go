package integration_test

import (
	"context"
	"strings"
	"testing"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
)

// TestMissingCollectionWarns: a Collection stream on a collection that does not exist (a typo)
// runs, and says so: a NamespaceMissing event at Spawn naming the namespace, and the warning in
// its status and in the console's row note. A stream on an existing collection warns of nothing.
func TestMissingCollectionWarns(t *testing.T) {
	e := newEnv(t)
	e.createColl("orders", false)
	r := e.startRuntime(nil)
	got := newHandled()
	typo := r.spawn(t, watchtree.Stream[Order]{Name: "typo", Collection: "ordrs", OnInsert: got.handler()})
	good := r.spawn(t, watchtree.Stream[Order]{Name: "good", Collection: "orders", OnInsert: got.handler()})
	ns := e.dbName + ".ordrs"
	ev := r.obs.wait(t, "NamespaceMissing", ofType[observe.NamespaceMissing]).(observe.NamespaceMissing)
	if ev.Stream != "typo" || ev.Namespace != ns || ev.Since.IsZero() {
		t.Errorf("NamespaceMissing{%s, %s, %v}, want stream typo, namespace %s, a time", ev.Stream, ev.Namespace, ev.Since, ns)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	st, err := typo.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != watchtree.StateRunning || len(st.Warnings) != 1 || !strings.Contains(st.Warnings[0], ns+" does not exist") {
		t.Errorf("typo's status: state %s, warnings %q; want running with the missing namespace named", st.State, st.Warnings)
	}
	gs, err := good.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(gs.Warnings) != 0 {
		t.Errorf("a stream on an existing collection warns: %q", gs.Warnings)
	}
	for _, m := range r.obs.find(ofType[observe.NamespaceMissing]) {
		if m.EventMeta().Stream != "typo" {
			t.Errorf("NamespaceMissing of stream %s", m.EventMeta().Stream)
		}
	}
}

// TestMissingCollectionWarningClearsOnFirstEvent: the warning leaves the status with the
// stream's first event (the collection exists then), not at the next minute's check. Before, it
// stayed up to a minute after the collection appeared.
func TestMissingCollectionWarningClearsOnFirstEvent(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	got := newHandled()
	late := r.spawn(t, watchtree.Stream[Order]{Name: "late", Collection: "later", OnInsert: got.handler()})
	status := func() watchtree.StreamStatus {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		st, err := late.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := status(); len(st.Warnings) != 1 {
		t.Fatalf("before the collection exists: warnings %q, want one", st.Warnings)
	}
	e.insertOrders("later", 1, 1)
	waitFor(t, "the first event handled", func() bool { return got.distinct() == 1 })
	waitFor(t, "the warning cleared", func() bool { return len(status().Warnings) == 0 },
		func() string { return strings.Join(status().Warnings, "; ") })
}
