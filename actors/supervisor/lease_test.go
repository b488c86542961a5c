package supervisor

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
)

// fakeLeader stands in for the leader actor: it reports what the supervisor asks of it and
// sends its parent whatever the test tells it to.
type fakeLeader struct {
	pid    chan *actor.PID
	asked  chan proto.Message
	parent *actor.PID
}

// sayCmd makes the fake leader send msg to its parent (test-only).
type sayCmd struct{ msg proto.Message }

func (f *fakeLeader) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		f.parent = ctx.Parent()
		f.pid <- ctx.Self()
	case *wire.Campaign:
		f.asked <- m
	case *wire.Resign:
		f.asked <- m
		if ctx.Sender() != nil {
			ctx.Respond(&wire.Resigned{Epoch: 1, Released: true})
		}
		role := messages.LeaseRole_LEASE_ROLE_IDLE // as the leader actor reports its new role
		if m.GetCampaignAgain() {
			role = messages.LeaseRole_LEASE_ROLE_STANDBY
		}
		ctx.Send(f.parent, &messages.LeaseState{Role: role})
	case *wire.Fenced:
		f.asked <- m
	case sayCmd:
		ctx.Send(f.parent, m.msg)
	}
}

func leaderHarness(t *testing.T) (*harness, *actor.PID, chan proto.Message) {
	t.Helper()
	fl := &fakeLeader{pid: make(chan *actor.PID, 1), asked: make(chan proto.Message, 64)}
	h := newHarness(t, func(c *Config) {
		c.Leader = actor.PropsFromProducer(func() actor.Actor { return fl })
		c.ReleaseCooldown = 20 * time.Second
	})
	var pid *actor.PID
	select {
	case pid = <-fl.pid:
	case <-time.After(waitFor):
		t.Fatal("the leader actor was not spawned")
	}
	return h, pid, fl.asked
}

func nextAsked[M proto.Message](t *testing.T, asked chan proto.Message) M {
	t.Helper()
	select {
	case m := <-asked:
		v, ok := m.(M)
		if !ok {
			var zero M
			t.Fatalf("the leader was sent %T, want %T", m, zero)
		}
		return v
	case <-time.After(waitFor):
		var zero M
		t.Fatalf("the leader was not sent %T", zero)
		return zero
	}
}

// leadAndRun takes a fresh leader harness to running: the supervisor campaigns, the lease is
// granted under epoch, the stream actor starts and reports its cursor open.
func leadAndRun(t *testing.T, h *harness, leader *actor.PID, asked chan proto.Message, epoch int64) {
	t.Helper()
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	nextAsked[*wire.Campaign](t, asked)
	h.tell(leader, sayCmd{&wire.LeaseGranted{Epoch: epoch, Owner: "me"}})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.started()
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
}

// The SingleLeader states: campaigning → standby → (granted) starting → running → (lost)
// standby with the stream actor stopped → granted again → running; a graceful stop releases
// the lease as its last step.
func TestSingleLeaderLifecycle(t *testing.T) {
	h, leader, asked := leaderHarness(t)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	nextAsked[*wire.Campaign](t, asked)
	// The leader actor's report of its campaign's start (standby, its first acquisition in
	// flight) leaves the stream starting: nobody is known to lead, and Spawn must wait.
	h.tell(leader, sayCmd{&messages.LeaseState{Role: messages.LeaseRole_LEASE_ROLE_STANDBY, Why: "campaigning: spawned"}})
	pollUntil(t, "the campaign's report", func() bool { return h.status().GetLease().GetWhy() == "campaigning: spawned" })
	if st := h.status(); st.GetState() != messages.SupervisorState_SUPERVISOR_STATE_STARTING {
		t.Fatalf("state %v after the campaign's first report, want starting until the store answered", st.GetState())
	}
	h.tell(leader, sayCmd{&messages.LeaseState{Role: messages.LeaseRole_LEASE_ROLE_STANDBY, Holder: "other", Why: "standby: other leads", Answered: true}})
	if tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_STANDBY); tr.Why != "standby: other leads" {
		t.Fatalf("standby why %q", tr.Why)
	}
	h.noStart()

	h.tell(leader, sayCmd{&wire.LeaseGranted{Epoch: 3, Owner: "me"}})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.started()
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)

	h.tell(leader, sayCmd{&wire.LeaseLost{Epoch: 3, Why: "renewal refused"}})
	if tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_STANDBY); tr.Why != "lease lost: renewal refused" {
		t.Fatalf("standby why %q", tr.Why)
	}
	select {
	case <-h.probe.stopping:
	case <-time.After(waitFor):
		t.Fatal("the stream actor was not stopped when the lease was lost")
	}

	h.tell(leader, sayCmd{&wire.LeaseGranted{Epoch: 4, Owner: "me"}})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.started()
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)

	r := h.request(&messages.Stop{Graceful: true, Reason: "test"})
	if r.GetState() != messages.SupervisorState_SUPERVISOR_STATE_STOPPED || !r.GetLastStop().GetReleased() {
		t.Fatalf("graceful stop: %v", r)
	}
	if res := nextAsked[*wire.Resign](t, asked); res.GetCampaignAgain() {
		t.Fatalf("Resign %v: a stop must not campaign again", res)
	}
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STOPPING)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STOPPED)
	// The fake leader reports its idle role after answering the Resign; until that report is
	// in, the supervisor still holds the standby role of the first campaign and would go to
	// standby on the start below.
	pollUntil(t, "the leader's idle report", func() bool {
		return h.status().GetLease().GetRole() == messages.LeaseRole_LEASE_ROLE_IDLE
	})

	// An operator start campaigns again instead of starting the stream actor.
	h.request(&messages.Start{Reason: "again"})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	nextAsked[*wire.Campaign](t, asked)
	h.noStart()
}

// A balance handover is a graceful stop that ends in standby, with Resign{campaign_again}.
func TestSingleLeaderHandOver(t *testing.T) {
	h, leader, asked := leaderHarness(t)
	leadAndRun(t, h, leader, asked, 2)
	h.tell(leader, sayCmd{&wire.HandOver{Epoch: 1, Why: "stale"}}) // another term: ignored
	h.noTransition()
	h.tell(leader, sayCmd{&wire.HandOver{Epoch: 2, Why: "above the fair share"}})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STOPPING)
	if res := nextAsked[*wire.Resign](t, asked); !res.GetCampaignAgain() {
		t.Fatalf("Resign %v, want campaign_again for a handover", res)
	}
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STANDBY)
	if st := h.status(); !st.GetLastStop().GetReleased() {
		t.Fatalf("last stop %v, want the lease released", st.GetLastStop())
	}
}

// A fenced write reported from outside the tree stops the stream at once (standby) and is
// forwarded to the leader actor.
func TestSingleLeaderFencedReport(t *testing.T) {
	h, leader, asked := leaderHarness(t)
	leadAndRun(t, h, leader, asked, 5)
	h.tell(h.pid, &wire.Fenced{Epoch: 5, Why: "dead-letter write refused"})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STANDBY)
	if f := nextAsked[*wire.Fenced](t, asked); f.GetEpoch() != 5 {
		t.Fatalf("Fenced %v, want epoch 5", f)
	}
}

// An operator's ReleaseLease hands the lease over like a balance handover (drain, flush,
// release with campaign_again, standby) and is answered when that ended; sent where this
// instance does not lead, it is answered at once and changes nothing.
func TestSingleLeaderReleaseLease(t *testing.T) {
	h, leader, asked := leaderHarness(t)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	nextAsked[*wire.Campaign](t, asked)
	if st := h.request(&messages.ReleaseLease{Reason: "test"}); st.GetState() != messages.SupervisorState_SUPERVISOR_STATE_STARTING {
		t.Fatalf("ReleaseLease without the lease answered %v, want the status unchanged (starting)", st.GetState())
	}
	h.noTransition()
	h.tell(leader, sayCmd{&wire.LeaseGranted{Epoch: 3, Owner: "me"}})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.started()
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	replied := make(chan *messages.StatusReply, 1)
	go func() { replied <- h.request(&messages.ReleaseLease{Reason: "console: op"}) }()
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STOPPING)
	if res := nextAsked[*wire.Resign](t, asked); !res.GetCampaignAgain() || res.GetCooldownMs() != 20_000 {
		t.Fatalf("Resign %v, want campaign_again with the release cooldown, 20s (a standby takes over first)", res)
	}
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STANDBY)
	st := <-replied
	if st.GetState() != messages.SupervisorState_SUPERVISOR_STATE_STANDBY || !st.GetLastStop().GetReleased() {
		t.Fatalf("ReleaseLease answered %v (last stop %v), want standby with the lease released", st.GetState(), st.GetLastStop())
	}
}

// A lease lost during a graceful stop ends handling at once: the dispatcher, which was
// draining, is restarted (its lanes' context is cancelled, so no handler starts for a lease
// that may be gone), the final checkpoint is not written, and the stop goes on to release the
// lease. Before, the drain ran on and handlers overlapped with the next leader's.
func TestLeaseLostDuringStopHaltsTheDispatcher(t *testing.T) {
	steps := make(chan askedStep, 16)
	fl := &fakeLeader{pid: make(chan *actor.PID, 1), asked: make(chan proto.Message, 64)}
	h := newHarnessH(t, func(h *harness, c *Config) {
		for _, name := range []string{"dispatcher", "checkpointer"} {
			starts, name := h.starts, name
			c.Siblings = append(c.Siblings, Sibling{Name: name, Props: actor.PropsFromProducer(func() actor.Actor {
				return &fakeSibling{starts: starts, name: name, asked: steps}
			})})
		}
		c.Dispatcher, c.Checkpointer = "dispatcher", "checkpointer"
		c.Leader = actor.PropsFromProducer(func() actor.Actor { return fl })
	})
	leader := <-fl.pid
	leadAndRun(t, h, leader, fl.asked, 3)
	dispatcherStarts := func() int {
		v, ok := h.starts.Load("dispatcher")
		if !ok {
			return 0 // its Started has not run yet
		}
		return v.(*startCounter).get()
	}
	pollUntil(t, "the dispatcher started", func() bool { return dispatcherStarts() > 0 })
	before := dispatcherStarts()

	stopped := make(chan *messages.StatusReply, 1)
	go func() { stopped <- h.request(&messages.Stop{Graceful: true, Reason: "deploy"}) }()
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STOPPING)
	nextStep(t, steps, "dispatcher") // the Drain, left unanswered: handlers are still running

	h.tell(leader, sayCmd{&wire.LeaseLost{Epoch: 3, Why: "renewal failed"}})
	pollUntil(t, "the dispatcher restarted on the lease loss", func() bool { return dispatcherStarts() > before })
	h.tell(h.pid, &wire.Drained{Settled: 7, Unsettled: 40, TimedOut: true}) // what the restarted dispatcher answers

	if res := nextAsked[*wire.Resign](t, fl.asked); res.GetCampaignAgain() {
		t.Fatalf("Resign %v: an operator stop does not campaign again", res)
	}
	var r *messages.StatusReply
	select {
	case r = <-stopped:
	case <-time.After(waitFor):
		t.Fatal("the graceful stop did not end")
	}
	ls := r.GetLastStop()
	if r.GetState() != messages.SupervisorState_SUPERVISOR_STATE_STOPPED || !ls.GetLeaseLost() || ls.GetFlushed() || ls.GetDrained() {
		t.Fatalf("stop ended %v with %v, want stopped, lease_lost, neither drained nor flushed", r.GetState(), ls)
	}
	if ls.GetError() != "" || ls.GetHeldUpBy() != "" {
		t.Fatalf("stop report %v: a lease loss is not a drain timeout", ls)
	}
	select {
	case st := <-steps:
		t.Fatalf("%T sent to the %s after the lease was lost, want no final checkpoint", st.msg, st.name)
	default:
	}
}
