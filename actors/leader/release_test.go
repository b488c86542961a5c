package leader

import (
	"testing"
	"time"

	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/store"
)

// releaseAgain makes the harness's leader lead (epoch 1), then release the lease as an
// operator's ReleaseLease does (campaign_again with a cooldown), and returns when the release
// is written and the actor waits out its window (one timer pending: the deferred attempt).
func releaseAgain(h *harness, cooldown time.Duration) {
	h.t.Helper()
	h.sys.Root.Send(h.leader, &wire.Campaign{Reason: "test"})
	if g := next[*wire.LeaseGranted](h); g.GetEpoch() != 1 {
		h.t.Fatalf("LeaseGranted %v, want epoch 1", g)
	}
	res, err := h.sys.Root.RequestFuture(h.leader, &wire.Resign{Reason: "lease release", CampaignAgain: true,
		CooldownMs: cooldown.Milliseconds()}, waitLimit).Result()
	if err != nil || !res.(*wire.Resigned).GetReleased() {
		h.t.Fatalf("Resign: %v, %v", res, err)
	}
	if l := h.get(); l.Owner != "" {
		h.t.Fatalf("lease after the release: %+v, want free", l)
	}
}

// waitHolder returns the first LeaseState that names holder as the lease's holder.
func waitHolder(h *harness, holder string) *messages.LeaseState {
	h.t.Helper()
	for {
		st := next[*messages.LeaseState](h)
		if st.GetHolder() == holder {
			return st
		}
	}
}

// noGrant fails if the leader actor has sent a LeaseGranted by now (without waiting).
func noGrant(h *harness, when string) {
	h.t.Helper()
	for {
		select {
		case m := <-h.got:
			if g, ok := m.(*wire.LeaseGranted); ok {
				h.t.Fatalf("LeaseGranted %v %s", g, when)
			}
		default:
			return
		}
	}
}

// takeOver writes the lease as another instance's acquisition of epoch 2 (with the store's
// change notice).
func takeOver(h *harness, ttl time.Duration) {
	now := h.st.now()
	h.st.set(store.Lease{Name: "billing", Owner: "other", Epoch: 2, AcquiredAt: now, ExpiresAt: now.Add(ttl)})
}

// Issue 42 item 4: an operator released the lease, another instance took it over and left at
// once (its runtime stopped: it released the lease). The releasing instance, a standby since,
// leads again at once, on the store's notice. Before, it waited out the whole cooldown
// (StandbyPoll, 20 s) after its release, and the stream had no leader meanwhile.
func TestReleaseTakenOverThenLeftLeadsAtOnce(t *testing.T) {
	h := newHarness(t, nil)
	releaseAgain(h, 20*time.Second)
	releasedAt := h.clk.Now()
	takeOver(h, testPolicy.TTL)
	// The releasing instance sees the new leader: its window ends, it is a plain standby.
	if st := waitHolder(h, "other"); st.GetRole() != messages.LeaseRole_LEASE_ROLE_STANDBY || st.GetEpoch() != 2 {
		t.Fatalf("LeaseState %v, want standby behind other's epoch 2", st)
	}
	// The new leader goes away right after: it releases the lease.
	h.st.set(store.Lease{Name: "billing", Epoch: 2, ExpiresAt: h.st.now()})
	leftAt := h.clk.Now()
	g := next[*wire.LeaseGranted](h)
	if g.GetEpoch() != 3 {
		t.Fatalf("LeaseGranted epoch %d, want 3", g.GetEpoch())
	}
	if gap := h.clk.Now().Sub(leftAt); gap != 0 {
		t.Fatalf("led again %v after the new leader left, want at once", gap)
	}
	t.Logf("leaderless gap after the new leader left: %v (released at %v)", h.clk.Now().Sub(leftAt), releasedAt.Format(time.TimeOnly))
}

// The new leader crashes right after it took over (no release): the releasing instance, a
// standby since it saw the new leader, takes the lease when it expires, within the TTL of the
// new leader's latest acquisition or renewal; before, it waited out the cooldown (20 s) however
// short the TTL.
func TestReleaseTakenOverThenCrashedLeadsAtExpiry(t *testing.T) {
	h := newHarness(t, nil)
	releaseAgain(h, 20*time.Second)
	takeOver(h, testPolicy.TTL)
	crashedAt := h.clk.Now() // the new leader never renews
	waitHolder(h, "other")
	for {
		noGrant(h, "while the new leader's lease held")
		d, ok := h.clk.NextDeadline()
		if !ok {
			t.Fatal("no timer pending: the standby would never try again")
		}
		if h.clk.Now().Add(d).After(crashedAt.Add(testPolicy.TTL)) {
			break
		}
		h.clk.Advance(d)
	}
	h.clk.Advance(testPolicy.TTL + time.Millisecond - h.clk.Now().Sub(crashedAt))
	g := next[*wire.LeaseGranted](h)
	if g.GetEpoch() != 3 {
		t.Fatalf("LeaseGranted epoch %d, want 3", g.GetEpoch())
	}
	if gap := h.clk.Now().Sub(crashedAt); gap > testPolicy.TTL+time.Millisecond {
		t.Fatalf("leaderless for %v after the new leader crashed, want at most the TTL %v (+1ms)", gap, testPolicy.TTL)
	}
}

// Nobody takes the released lease: the releasing instance competes again at the end of its
// release window (the cooldown it was given: the runtime gives min(RenewEvery, StandbyPoll)),
// not before; its own release's change notice does not end the window.
func TestReleaseNobodyTakesItLeadsAgainAfterTheWindow(t *testing.T) {
	h := newHarness(t, nil)
	window := testPolicy.RenewEvery
	releaseAgain(h, window)
	releasedAt := h.clk.Now()
	h.advance(1, window-time.Millisecond)
	noGrant(h, "before the release window ended")
	if l := h.get(); l.Owner != "" {
		t.Fatalf("lease %+v taken within the release window", l)
	}
	h.clk.Advance(time.Millisecond)
	g := next[*wire.LeaseGranted](h)
	if g.GetEpoch() != 2 {
		t.Fatalf("LeaseGranted epoch %d, want 2", g.GetEpoch())
	}
	if gap := h.clk.Now().Sub(releasedAt); gap != window {
		t.Fatalf("led again %v after the release, want the window %v", gap, window)
	}
}
