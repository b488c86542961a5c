package engine

import "testing"

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
