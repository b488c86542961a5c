package supervisor

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
)

// fakeOnDemand answers OnDemandSnapshot itself (to the original requester) and counts the
// AbandonOnDemand it receives.
type fakeOnDemand struct{ abandons *atomic.Int32 }

func (f *fakeOnDemand) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.OnDemandSnapshot:
		ctx.Respond(&messages.OnDemandSnapshotReply{Running: "accepted " + m.GetSnapshotId()})
	case *wire.AbandonOnDemand:
		f.abandons.Add(1)
	}
}

func (h *harness) onDemand(id string) *messages.OnDemandSnapshotReply {
	h.t.Helper()
	res, err := h.sys.Root.RequestFuture(h.pid, &messages.OnDemandSnapshot{SnapshotId: id}, waitFor).Result()
	if err != nil {
		h.t.Fatalf("OnDemandSnapshot: %v", err)
	}
	r, ok := res.(*messages.OnDemandSnapshotReply)
	if !ok {
		h.t.Fatalf("reply to OnDemandSnapshot is %T", res)
	}
	return r
}

// A running stream forwards the request to its on-demand sibling, which answers the requester;
// a restart tells the sibling to abandon its run.
func TestOnDemandForwardedWhileRunning(t *testing.T) {
	var abandons atomic.Int32
	h := newHarnessH(t, func(h *harness, c *Config) {
		c.Siblings = []Sibling{{Name: "ondemand", Props: actor.PropsFromProducer(func() actor.Actor {
			return &fakeOnDemand{abandons: &abandons}
		})}}
	})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.started()
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	if r := h.onDemand("s1"); r.GetCode() != "" || r.GetRunning() != "accepted s1" {
		t.Fatalf("reply %v: want the sibling's acceptance", r)
	}
	before := abandons.Load()
	h.request(&messages.Restart{})
	pollUntil(t, "AbandonOnDemand on restart", func() bool { return abandons.Load() > before })
}

// Without the sibling (a database or cluster stream) the answer is unsupported.
func TestOnDemandUnsupported(t *testing.T) {
	h := newHarness(t, nil)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.started()
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	if r := h.onDemand("s1"); r.GetCode() != "unsupported" {
		t.Fatalf("reply %v: want unsupported", r)
	}
}

// A standby (SingleLeader, another instance leads) refuses, naming its state.
func TestOnDemandRefusedOnStandby(t *testing.T) {
	h, leader, _ := leaderHarness(t)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.tell(leader, sayCmd{&messages.LeaseState{Role: messages.LeaseRole_LEASE_ROLE_STANDBY, Holder: "other", Why: "standby: other leads", Answered: true}})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STANDBY)
	if r := h.onDemand("s1"); r.GetCode() != "not_running" || !strings.Contains(r.GetError(), "standby") {
		t.Fatalf("reply %v: want not_running naming the standby state", r)
	}
}

// A Lazy sibling is spawned by the first request that needs it, once: an idle stream that never
// takes an on-demand snapshot holds no actor for it.
func TestOnDemandLazySiblingSpawnedByFirstRequest(t *testing.T) {
	var spawned, abandons atomic.Int32
	h := newHarnessH(t, func(h *harness, c *Config) {
		c.Siblings = []Sibling{{Name: "ondemand", Lazy: true, Props: actor.PropsFromProducer(func() actor.Actor {
			spawned.Add(1)
			return &fakeOnDemand{abandons: &abandons}
		})}}
	})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.started()
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	if n := spawned.Load(); n != 0 {
		t.Fatalf("lazy sibling spawned %d times before any request", n)
	}
	for _, id := range []string{"s1", "s2"} {
		if r := h.onDemand(id); r.GetCode() != "" || r.GetRunning() != "accepted "+id {
			t.Fatalf("reply %v: want the sibling's acceptance of %s", r, id)
		}
	}
	if n := spawned.Load(); n != 1 {
		t.Fatalf("lazy sibling spawned %d times for two requests, want 1", n)
	}
	before := abandons.Load()
	h.request(&messages.Restart{})
	pollUntil(t, "AbandonOnDemand on restart", func() bool { return abandons.Load() > before })
}

// A Lazy sibling with NewProps gets its props made by its spawn, once: a stream that never
// needs the sibling holds no props for it either.
func TestOnDemandLazySiblingPropsMadeBySpawn(t *testing.T) {
	var made, spawned, abandons atomic.Int32
	h := newHarnessH(t, func(h *harness, c *Config) {
		c.Siblings = []Sibling{{Name: "ondemand", Lazy: true, NewProps: func() (*actor.Props, error) {
			made.Add(1)
			return actor.PropsFromProducer(func() actor.Actor {
				spawned.Add(1)
				return &fakeOnDemand{abandons: &abandons}
			}), nil
		}}}
	})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.started()
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	if n := made.Load(); n != 0 {
		t.Fatalf("lazy sibling's props made %d times before any request", n)
	}
	for _, id := range []string{"s1", "s2"} {
		if r := h.onDemand(id); r.GetCode() != "" || r.GetRunning() != "accepted "+id {
			t.Fatalf("reply %v: want the sibling's acceptance of %s", r, id)
		}
	}
	if m, s := made.Load(), spawned.Load(); m != 1 || s != 1 {
		t.Fatalf("props made %d times, sibling spawned %d times for two requests; want 1 and 1", m, s)
	}
}

// NewProps stands in for Props only for a Lazy sibling, and never next to Props.
func TestSiblingNewPropsValidation(t *testing.T) {
	newProps := func() (*actor.Props, error) { return nil, nil }
	props := actor.PropsFromProducer(func() actor.Actor { return &fakeOnDemand{} })
	for _, tc := range []struct {
		name string
		sib  Sibling
		want string
	}{
		{"eager", Sibling{Name: "x", NewProps: newProps}, "Config.Siblings[0].Props must not be nil"},
		{"both", Sibling{Name: "x", Lazy: true, Props: props, NewProps: newProps}, "Props and NewProps are exclusive"},
		{"lazy", Sibling{Name: "x", Lazy: true, NewProps: newProps}, ""},
	} {
		err := Config{Stream: "s", Child: props, Siblings: []Sibling{tc.sib}}.validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Validate = %v, want %q", tc.name, err, tc.want)
		}
	}
}
