package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/messages"
)

// ledger counts a SingleLeader stream's deliveries by instance.
type ledger struct {
	mu  sync.Mutex
	got map[string]map[int64]int // instance → _id → deliveries
}

func (l *ledger) stream(instance string) watchtree.Stream[Order] {
	return watchtree.Stream[Order]{
		Name: "payments", Collection: "payments", Mode: watchtree.SingleLeader,
		OnInsert: func(_ context.Context, ev *watchtree.Event[Order]) error {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.got[instance] == nil {
				l.got[instance] = map[int64]int{}
			}
			l.got[instance][ev.FullDocument.ID]++
			return nil
		},
	}
}

// count returns how many of ids from..to instance handled, and the total deliveries of each id.
func (l *ledger) count(instance string, from, to int64) (handled int, total map[int64]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	total = map[int64]int{}
	for id := from; id <= to; id++ {
		if l.got[instance][id] > 0 {
			handled++
		}
		for _, m := range l.got {
			total[id] += m[id]
		}
	}
	return handled, total
}

func role(t *testing.T, h *watchtree.Handle) string {
	t.Helper()
	st, err := h.Status(context.Background())
	if err != nil || st.Lease == nil {
		t.Fatalf("status: %v, %v", st, err)
	}
	return st.Lease.Role
}

// TestLeaseReleaseHandsOver: two runtimes run one SingleLeader stream. `watchtree lease release`
// on the leader's console makes the leader drain, flush and release; the other runtime takes
// over from the checkpoint and the first stands by. Every event is handled once: the first 20 by
// the first leader, the next 20 by the new one.
func TestLeaseReleaseHandsOver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	defer cancel()
	l := &ledger{got: map[string]map[int64]int{}}
	ha, err := live.rt.Spawn(ctx, l.stream("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ha.Stop(context.Background()) }()
	waitFor(t, "the console's runtime to lead", func() bool { return role(t, ha) == watchtree.RoleLeader })

	b, err := watchtree.New(watchtree.Config{Client: live.client, Database: live.db.Name(), InstanceID: "cli-test-b",
		Lease: watchtree.LeasePolicy{StandbyPoll: 100 * time.Millisecond, Balance: watchtree.BalanceOff}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.Stop(context.Background()); err != nil {
			t.Errorf("stop the second runtime: %v", err)
		}
	}()
	hb, err := b.Spawn(ctx, l.stream("b"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the second runtime to stand by", func() bool { return role(t, hb) == watchtree.RoleStandby })

	for id := int64(1); id <= 20; id++ {
		insert(t, "payments", Order{ID: id})
	}
	waitFor(t, "the leader to handle the first 20", func() bool { n, _ := l.count("a", 1, 20); return n == 20 })

	var reply messages.ControlReply
	cliJSON(t, &reply, "lease", "release", "payments", "--token", testToken)
	if !reply.GetOk() || !strings.HasPrefix(reply.GetDetail(), "lease released (epoch ") {
		t.Fatalf("lease release: %v", &reply)
	}
	waitFor(t, "the second runtime to take over", func() bool { return role(t, hb) == watchtree.RoleLeader })
	if r := role(t, ha); r != watchtree.RoleStandby {
		t.Fatalf("the first runtime is %s after its release, want standby", r)
	}
	// The console shows the standby at once; the holder it names is the one it last saw (none
	// right after its own release, the new leader once its standby polls found it).
	var snap messages.SnapshotReply
	cliJSON(t, &snap, "streams", "--filter", "payments")
	if rows := snap.GetStreams(); len(rows) != 1 || rows[0].GetRole() != "standby" ||
		(rows[0].GetLeaseOwner() != "" && rows[0].GetLeaseOwner() != "cli-test-b") {
		t.Fatalf("the console shows %v, want payments standby, not held by itself", rows)
	}

	for id := int64(21); id <= 40; id++ {
		insert(t, "payments", Order{ID: id})
	}
	waitFor(t, "the new leader to handle the next 20", func() bool { n, _ := l.count("b", 21, 40); return n == 20 })
	_, total := l.count("a", 1, 40)
	for id, n := range total {
		if n != 1 {
			t.Errorf("event %d handled %d times, want once", id, n)
		}
	}
	if n, _ := l.count("a", 21, 40); n != 0 {
		t.Errorf("the released instance handled %d events after its release", n)
	}
	if n, _ := l.count("b", 1, 20); n != 0 {
		t.Errorf("the new leader handled %d events the first had settled (it did not start from the checkpoint)", n)
	}
}
