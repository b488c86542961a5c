package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/watchtree/watchtree"
)

// TestSharedSingleLeaderStandbyNeverJoins (issue 38: "SingleLeader members attach only where
// this instance leads them"): two runtimes run the same SingleLeader Shared stream. Over a few
// seconds of writes only the leader's runtime opens a cursor for it, catch-up (the stream's
// comment) or hub (the hub's comment); the standby's client sends neither and its handler runs
// for nothing. When the leader's runtime stops, the standby takes over, opens its cursors and
// handles every write made after, none lost and, the handover being graceful, none twice.
func TestSharedSingleLeaderStandbyNeverJoins(t *testing.T) {
	const name = "sl-shared"
	e := newEnv(t)
	rts := make([]*rtEnv, 2)
	gots := []*handled{newHandled(), newHandled()}
	hs := make([]*watchtree.Handle, 2)
	for i := range rts {
		rts[i] = e.startRuntime(func(c *watchtree.Config) {
			c.InstanceID = fmt.Sprintf("instance-%d", i)
			c.Lease = testLease
		})
		spec := sharedOrders(name, "orders", gots[i])
		spec.Mode = watchtree.SingleLeader
		spec.Checkpoint = watchtree.CheckpointPolicy{SaveEvery: 10, SaveInterval: 100 * time.Millisecond}
		hs[i] = rts[i].spawn(t, spec)
	}
	role := func(i int) string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := hs[i].Status(ctx)
		if err != nil || st.Lease == nil {
			return ""
		}
		return st.Lease.Role
	}
	lead := -1
	waitFor(t, "one leader and one standby", func() bool {
		r0, r1 := role(0), role(1)
		switch {
		case r0 == watchtree.RoleLeader && r1 == watchtree.RoleStandby:
			lead = 0
		case r1 == watchtree.RoleLeader && r0 == watchtree.RoleStandby:
			lead = 1
		}
		return lead >= 0
	})
	stand := 1 - lead
	leader, standby := rts[lead], rts[stand]
	hubC, streamC := hubComment(e.dbName), "watchtree:"+name
	t.Logf("instance-%d leads, instance-%d stands by", lead, stand)

	// A few seconds of writes, ten at a time, each batch handled before the next.
	var n int64
	for start := time.Now(); time.Since(start) < 3*time.Second; {
		e.insertOrders("orders", n+1, n+10)
		n += 10
		waitFor(t, fmt.Sprintf("the leader handled orders 1..%d", n), func() bool { return int64(gots[lead].distinct()) >= n },
			func() string { return fmt.Sprintf("%d handled", gots[lead].distinct()) })
		if s, h := standby.cmds.positionedAggregates(streamC), standby.cmds.aggregates(hubC); s != 0 || h != 0 {
			t.Fatalf("after %d writes the standby's client opened %d catch-up cursors (comment %q) and %d hub cursors (comment %q), want none",
				n, s, streamC, h, hubC)
		}
		if r := role(stand); r != watchtree.RoleStandby {
			t.Fatalf("after %d writes instance-%d is %q, want standby", n, stand, r)
		}
	}
	ls, lh := leader.cmds.positionedAggregates(streamC), leader.cmds.aggregates(hubC)
	t.Logf("%d orders in %d batches: the leader opened %d catch-up cursors and %d hub cursors; the standby none (its position captures at Spawn: %d)",
		n, n/10, ls, lh, standby.cmds.aggregates(streamC)-standby.cmds.positionedAggregates(streamC))
	if ls < 1 || lh < 1 {
		t.Errorf("the leader opened %d catch-up and %d hub cursors, want at least one of each", ls, lh)
	}
	if d := gots[stand].deliveries(); d != 0 {
		t.Errorf("the standby handled %d events", d)
	}
	exactly(t, "leader", gots[lead], 1, n)

	// The leader's runtime stops: the standby takes over and handles every write made after.
	leader.stop(t)
	stopped := n
	e.insertOrders("orders", n+1, n+50)
	n += 50
	waitFor(t, "the standby took over", func() bool { return role(stand) == watchtree.RoleLeader })
	e.insertOrders("orders", n+1, n+50)
	n += 50
	waitFor(t, "the new leader handled every order written after the stop", func() bool {
		docs := gots[stand].docs()
		for id := stopped + 1; id <= n; id++ {
			if !docs[id] {
				return false
			}
		}
		return true
	}, func() string { return fmt.Sprintf("%d handled by the new leader", gots[stand].distinct()) })
	if ss := standby.cmds.positionedAggregates(streamC); ss < 1 {
		t.Errorf("the new leader opened no catch-up cursor (comment %q): it did not resume from the stream's position", streamC)
	}
	// Caught up, the new leader's member attaches to a hub of its own runtime; what is written
	// then reaches it there.
	waitFor(t, "the new leader's hub cursor", func() bool { return standby.cmds.aggregates(hubC) >= 1 })
	e.insertOrders("orders", n+1, n+20)
	n += 20
	waitFor(t, "the new leader handled the last writes", func() bool { return int64(gots[stand].distinct()) >= n-stopped },
		func() string {
			return fmt.Sprintf("%d of %d handled by the new leader", gots[stand].distinct(), n-stopped)
		})
	t.Logf("after the takeover the new leader opened %d catch-up cursors and %d hub cursors",
		standby.cmds.positionedAggregates(streamC), standby.cmds.aggregates(hubC))
	// Across both: every order once; the graceful stop left nothing to handle again.
	all := newHandled()
	for _, g := range gots {
		g.mu.Lock()
		for id, c := range g.byID {
			all.byID[id] += c
			all.byDoc[g.docOfEvent[id]] = append(all.byDoc[g.docOfEvent[id]], 0)
			for range c {
				all.order = append(all.order, id)
			}
		}
		g.mu.Unlock()
	}
	exactly(t, "both instances", all, 1, n)
}
