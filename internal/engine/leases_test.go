package engine

import (
	"context"
	"github.com/watchtree/watchtree/internal/policyx"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/policy"
	"github.com/watchtree/watchtree/store/memstore"
)

// The balancer's fair share: ⌈M/N⌉; an instance below it may take a free lease, one above it
// hands the excess over, one lease at a time per stream.
func TestBalancerShare(t *testing.T) {
	b := &balancer{streams: map[string]bool{}, handing: map[string]bool{}, instances: 3}
	for _, s := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		b.streams[s] = false
	}
	// M = 7, N = 3: share 3.
	for _, s := range []string{"a", "b"} {
		if !b.MayAcquire() {
			t.Fatalf("leading %v: MayAcquire false below the share", b.streams)
		}
		b.Leading(s, true)
	}
	b.Leading("c", true)
	if b.MayAcquire() {
		t.Fatal("MayAcquire true at the share (3 of ⌈7/3⌉)")
	}
	if b.ShouldHandOver("a") {
		t.Fatal("ShouldHandOver at the share")
	}
	b.Leading("d", true)
	b.Leading("e", true) // 5 led, share 3: two excess
	if !b.ShouldHandOver("a") || b.ShouldHandOver("a") {
		t.Fatal("the first excess lease is handed over once")
	}
	if !b.ShouldHandOver("b") {
		t.Fatal("the second excess lease is handed over too")
	}
	if b.ShouldHandOver("c") {
		t.Fatal("a third handover while two are under way would go below the share")
	}
	b.Leading("a", false)
	b.Leading("b", false)
	if b.ShouldHandOver("c") {
		t.Fatal("ShouldHandOver at the share after the handovers")
	}
	b.instances = 1 // alone: the share is every stream
	if !b.MayAcquire() {
		t.Fatal("MayAcquire false for a lone instance")
	}
}

// TestBalancerWarnsOfASameNamedInstance: a second live process with this instance's
// InstanceName (its default InstanceID "<name>-<pid>-<hex>" in the lease store's heartbeats) is
// warned of once, and reported until it leaves; an instance of another name is not.
func TestBalancerWarnsOfASameNamedInstance(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	leases := memstore.NewLeases(memstore.Options{})
	ctx := context.Background()
	for _, id := range []string{"api-1-4242-0a1b2c", "api-12-77-abcdef", "api-1-custom"} {
		if err := leases.Heartbeat(ctx, id, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	b := newBalancer(leases, policyx.WithDefaults(policy.Lease{TTL: time.Minute, RenewEvery: 20 * time.Millisecond}), "api-1-17-ffffff", "api-1", time.Second, clock.Real(), zap.New(core))
	defer b.stop(context.Background())
	deadline := time.Now().Add(testWait)
	for len(b.duplicates()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no duplicate reported")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := b.duplicates(); len(got) != 1 || got[0] != "api-1-4242-0a1b2c" {
		t.Fatalf("duplicates %v, want the one api-1 instance (not api-12, not a hand-set ID)", got)
	}
	if err := leases.Leave(ctx, "api-1-4242-0a1b2c"); err != nil {
		t.Fatal(err)
	}
	for len(b.duplicates()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("duplicate still reported after it left: %v", b.duplicates())
		}
		time.Sleep(5 * time.Millisecond)
	}
	warned := logs.FilterMessageSnippet("InstanceName").All()
	if len(warned) != 1 || warned[0].ContextMap()["instance_name"] != "api-1" {
		t.Fatalf("%d warnings, want one naming api-1: %v", len(warned), logs.All())
	}
}

// TestInstanceWarningsReachTheConsole: the balancer's duplicates are the console's instance
// warnings, naming the InstanceName and the other instance; none without a balancer.
func TestInstanceWarningsReachTheConsole(t *testing.T) {
	rt := &Runtime{cfg: Config{InstanceID: "api-1-17-ffffff", InstanceName: "api-1"}}
	if w := (consoleBackend{rt}).Instance().Warnings; len(w) != 0 {
		t.Fatalf("warnings without a balancer: %v", w)
	}
	rt.bal = &balancer{dups: []string{"api-1-4242-0a1b2c"}}
	in := consoleBackend{rt}.Instance()
	if len(in.Warnings) != 1 || !strings.Contains(in.Warnings[0], `InstanceName "api-1"`) || !strings.Contains(in.Warnings[0], "api-1-4242-0a1b2c") ||
		in.Name != "api-1" || in.ID != "api-1-17-ffffff" {
		t.Fatalf("instance %+v", in)
	}
}
