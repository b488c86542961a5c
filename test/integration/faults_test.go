package integration_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
)

// fastRestart restarts a crashed stream after 10ms, 20ms, ... so fault tests stay short.
var fastRestart = watchtree.RestartPolicy{InitialDelay: 10 * time.Millisecond, MaxDelay: 100 * time.Millisecond}

// faultStream spawns a one-lane stream on orders recording into got, and waits until it runs.
func faultStream(t *testing.T, r *rtEnv, name string, got *handled, restart watchtree.RestartPolicy) *watchtree.Handle {
	t.Helper()
	h := r.spawn(t, watchtree.Stream[Order]{Name: name, Collection: "orders", Restart: restart,
		Checkpoint: watchtree.CheckpointPolicy{SaveEvery: 10, SaveInterval: 50 * time.Millisecond},
		OnInsert:   got.handler()})
	r.waitRunning(t, h)
	return h
}

// waitOrders waits until every order 1..n was handled at least once.
func waitOrders(t *testing.T, got *handled, n int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("orders 1..%d handled", n), func() bool {
		docs := got.docs()
		for i := int64(1); i <= n; i++ {
			if !docs[i] {
				return false
			}
		}
		return true
	}, func() string { return fmt.Sprintf("%d distinct events handled", got.distinct()) })
}

func restartsOf(r *rtEnv, stream string) []observe.Event {
	return r.obs.find(func(ev observe.Event) bool {
		_, ok := ev.(observe.Restarted)
		return ok && ev.EventMeta().Stream == stream
	})
}

// TestCursorDeathGetMoreNotResumable: a getMore fails with HostUnreachable (6) without the
// ResumableChangeStreamError label. The driver does not resume, the cursor dies, the stream
// actor fails and the supervisor restarts it under the RestartPolicy; no event is lost.
func TestCursorDeathGetMoreNotResumable(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	got := newHandled()
	h := faultStream(t, r, "gm-nolabel", got, fastRestart)
	e.insertOrders("orders", 1, 20)
	waitOrders(t, got, 20)

	hubOpens := r.cmds.aggregates(hubComment(e.dbName))
	e.failPoint(bson.D{{Key: "times", Value: 1}}, bson.D{{Key: "failCommands", Value: bson.A{"getMore"}},
		{Key: "errorCode", Value: 6}, {Key: "errorLabels", Value: bson.A{}}, {Key: "appName", Value: r.app}})
	if sharedCursors() {
		// The getMore that fails is the hub's (it resets: the member catches up on a cursor of
		// its own, and the stream does not restart) or the member's catch-up cursor's (the
		// stream restarts, as a dedicated one does). Either way nothing is lost.
		waitFor(t, "the hub to reopen or the stream to restart", func() bool {
			return r.cmds.aggregates(hubComment(e.dbName)) > hubOpens || len(restartsOf(r, "gm-nolabel")) > 0
		})
		e.insertOrders("orders", 21, 40)
		waitOrders(t, got, 40)
		waitState(t, h, watchtree.StateRunning)
		return
	}
	ev := r.obs.wait(t, "Restarted", func(ev observe.Event) bool {
		_, ok := ev.(observe.Restarted)
		return ok && ev.EventMeta().Stream == "gm-nolabel"
	}).(observe.Restarted)
	if ev.Attempt != 1 || ev.Cause == nil {
		t.Errorf("Restarted{Attempt %d, Cause %v}, want attempt 1 with the cursor error", ev.Attempt, ev.Cause)
	}
	e.insertOrders("orders", 21, 40)
	waitOrders(t, got, 40)
	st := waitState(t, h, watchtree.StateRunning)
	if st.Attempt != 0 {
		t.Errorf("Attempt %d after a successful resubscription, want the counter reset to 0", st.Attempt)
	}
	if st.Restarts < 1 || st.Deaths < 1 {
		t.Errorf("status counts %d deaths, %d restarts; want at least 1 each", st.Deaths, st.Restarts)
	}
	t.Logf("replays after the restart: %d", got.deliveries()-got.distinct())
}

// TestCursorDeathGetMoreResumable: the same failure with the ResumableChangeStreamError label is
// resumed by the driver itself: one more aggregate, no stream restart, no event lost.
func TestCursorDeathGetMoreResumable(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	got := newHandled()
	faultStream(t, r, "gm-label", got, fastRestart)
	e.insertOrders("orders", 1, 20)
	waitOrders(t, got, 20)
	// With shared cursors the getMore is the hub's, whose resume has the hub's comment.
	opens := func() int { return r.cmds.aggregates("watchtree:gm-label") + r.cmds.aggregates(hubComment(e.dbName)) }
	before := opens()

	e.failPoint(bson.D{{Key: "times", Value: 1}}, bson.D{{Key: "failCommands", Value: bson.A{"getMore"}},
		{Key: "errorCode", Value: 6}, {Key: "errorLabels", Value: bson.A{"ResumableChangeStreamError"}},
		{Key: "appName", Value: r.app}})
	waitFor(t, "the driver to resume the change stream (one more aggregate)", func() bool { return opens() > before })
	e.insertOrders("orders", 21, 40)
	waitOrders(t, got, 40)
	if rs := restartsOf(r, "gm-label"); len(rs) != 0 {
		t.Errorf("stream restarted %d times (%v); the driver's own resume must absorb a resumable error", len(rs), rs[0])
	}
	if n := opens() - before; n != 1 {
		t.Errorf("%d aggregates after the fault, want exactly 1 (the driver's resume)", n)
	}
}

// TestCursorDeathConnectionClosed: the server closes the connection of a getMore (fail point
// closeConnection, which real servers support too). A network error is resumable: the driver
// resumes, the stream does not restart, nothing is lost.
func TestCursorDeathConnectionClosed(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	got := newHandled()
	faultStream(t, r, "gm-close", got, fastRestart)
	e.insertOrders("orders", 1, 20)
	waitOrders(t, got, 20)
	// With shared cursors the getMore is the hub's, whose resume has the hub's comment.
	opens := func() int { return r.cmds.aggregates("watchtree:gm-close") + r.cmds.aggregates(hubComment(e.dbName)) }
	before := opens()

	e.failPoint(bson.D{{Key: "times", Value: 1}}, bson.D{{Key: "failCommands", Value: bson.A{"getMore"}},
		{Key: "closeConnection", Value: true}, {Key: "appName", Value: r.app}})
	waitFor(t, "the driver to resume after the closed connection", func() bool { return opens() > before })
	e.insertOrders("orders", 21, 40)
	waitOrders(t, got, 40)
	if rs := restartsOf(r, "gm-close"); len(rs) != 0 {
		t.Errorf("stream restarted after a closed connection: %v", rs)
	}
}

// TestKillAllConnections: every client connection is cut (mongosim hook) while events flow;
// the stream comes back by the driver's resume or a supervisor restart, and no event is lost.
func TestKillAllConnections(t *testing.T) {
	e := newEnv(t)
	e.needSim("KillAllConnections")
	r := e.startRuntime(nil)
	got := newHandled()
	h := faultStream(t, r, "killconn", got, fastRestart)
	e.insertOrders("orders", 1, 50)
	waitFor(t, "some orders handled", func() bool { return got.distinct() >= 10 })
	e.srv.KillAllConnections()
	e.insertOrders("orders", 51, 100)
	e.srv.KillAllConnections()
	e.insertOrders("orders", 101, 150)
	waitOrders(t, got, 150)
	waitState(t, h, watchtree.StateRunning)
	t.Logf("restarts %d, replays %d", len(restartsOf(r, "killconn")), got.deliveries()-got.distinct())
}

// TestStepDown: the primary steps down (mongosim hook) while events flow and is re-elected; the
// stream resumes on the new primary and no event is lost.
func TestStepDown(t *testing.T) {
	e := newEnv(t)
	e.needSim("StepDown")
	r := e.startRuntime(nil)
	got := newHandled()
	h := faultStream(t, r, "stepdown", got, fastRestart)
	e.insertOrders("orders", 1, 30)
	waitFor(t, "some orders handled", func() bool { return got.distinct() >= 10 })
	if err := e.srv.StepDown(300 * time.Millisecond); err != nil {
		t.Fatalf("StepDown: %v", err)
	}
	e.insertOrders("orders", 31, 60) // retried by the driver once a primary is back
	waitOrders(t, got, 60)
	waitState(t, h, watchtree.StateRunning)
	t.Logf("restarts %d, replays %d", len(restartsOf(r, "stepdown")), got.deliveries()-got.distinct())
}

// TestRestartPolicyGiveUpAndOperatorStart: while every change-stream command of the runtime's
// client fails (not resumable), each restart dies too; after MaxAttempts the supervisor gives up
// at once, terminally (crashed, ErrGaveUp). Once the fault is gone an operator Start resumes from
// the checkpoint and the events written meanwhile are handled.
func TestRestartPolicyGiveUpAndOperatorStart(t *testing.T) {
	e := newEnv(t)
	// Each failing open retries until ConnectTimeout: short, so that three of them fit well
	// within the test's wait.
	r := e.startRuntime(func(c *watchtree.Config) { c.ConnectTimeout = 2 * time.Second })
	got := newHandled()
	h := faultStream(t, r, "giveup", got, watchtree.RestartPolicy{MaxAttempts: 2, InitialDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond})
	e.insertOrders("orders", 1, 10)
	waitOrders(t, got, 10)

	e.failPoint("alwaysOn", bson.D{{Key: "failCommands", Value: bson.A{"getMore", "aggregate"}},
		{Key: "errorCode", Value: 6}, {Key: "errorLabels", Value: bson.A{}}, {Key: "appName", Value: r.app}})
	st := waitState(t, h, watchtree.StateCrashed)
	stopped := r.obs.wait(t, "terminal Stopped", func(ev observe.Event) bool {
		s, ok := ev.(observe.Stopped)
		return ok && ev.EventMeta().Stream == "giveup" && s.Terminal
	}).(observe.Stopped)
	if stopped.Reason != observe.Crashed || !errors.Is(stopped.Cause, watchtree.ErrGaveUp) {
		t.Errorf("Stopped{%v, cause %v}, want crashed with ErrGaveUp", stopped.Reason, stopped.Cause)
	}
	if n := len(restartsOf(r, "giveup")); n > 2 {
		t.Errorf("%d restarts reported, want at most MaxAttempts 2", n)
	}
	t.Logf("gave up: %+v", st)

	e.insertOrders("orders", 11, 20) // written while the stream is down
	e.failPointOff()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := h.Start(ctx); err != nil {
		t.Fatalf("operator Start: %v", err)
	}
	waitOrders(t, got, 20)
	waitState(t, h, watchtree.StateRunning)
}
