package watchtree

import (
	"context"
	"testing"
	"time"
)

// TestLeaseExpiryFollowsRenewals: Status().Lease.ExpiresAt of a healthy leader is the expiry
// of its latest renewal, so it stays ahead of now; before, it stayed the expiry at acquisition
// and a healthy leader looked expired after one TTL.
func TestLeaseExpiryFollowsRenewals(t *testing.T) {
	e := newRTEnv(t)
	rt, _ := e.newRuntime(t, func(c *Config) {
		c.Lease = LeasePolicy{TTL: 3 * time.Second, RenewEvery: 500 * time.Millisecond}
	})
	ctx, cancel := context.WithTimeout(context.Background(), rtWait)
	defer cancel()
	h, err := rt.Spawn(ctx, Stream[outageDoc]{Name: "led", Collection: "led", Mode: SingleLeader,
		OnInsert: func(context.Context, *Event[outageDoc]) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	var first time.Time
	deadline := time.Now().Add(rtWait)
	for {
		st, err := h.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if l := st.Lease; l != nil && l.Role == RoleLeader && !l.ExpiresAt.IsZero() {
			if first.IsZero() {
				first = l.ExpiresAt
			} else if l.ExpiresAt.After(first.Add(time.Second)) {
				return // renewed and shown
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Status().Lease.ExpiresAt stayed %v (acquisition's), the lease renews every 500ms: %+v", first, st.Lease)
		}
		time.Sleep(50 * time.Millisecond) // polling tick
	}
}
