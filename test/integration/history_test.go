package integration_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
)

// loseHistory runs a stream "hl" over orders 1..10, stops the runtime gracefully (the checkpoint
// is event 10), writes orders 11..20 and truncates the oplog so the checkpoint is no longer in
// it. It returns the checkpoint's token data.
func loseHistory(t *testing.T, e *env, got *handled) string {
	t.Helper()
	r1 := e.startRuntime(nil)
	r1.waitRunning(t, r1.spawn(t, watchtree.Stream[Order]{Name: "hl", Collection: "orders",
		Checkpoint: watchtree.CheckpointPolicy{SaveEvery: 1}, OnInsert: got.handler()}))
	e.insertOrders("orders", 1, 10)
	waitOrders(t, got, 10)
	r1.stop(t)
	cp, ok := e.checkpoint("hl")
	if !ok {
		t.Fatal("no checkpoint after a graceful stop")
	}
	e.insertOrders("orders", 11, 20)
	e.srv.TruncateOplog(e.srv.ClusterTime()) // keeps only the newest entry (order 20)
	return tokenData(cp.Token)
}

func historyLostOf(r *rtEnv) []observe.Event {
	return r.obs.find(ofType[observe.HistoryLost])
}

// TestHistoryLostFail: under Fail (the default) a stream whose checkpoint fell out of the oplog
// stops terminally with ErrHistoryLost: Spawn returns that error and frees the name, the loss is
// reported, no gap is written and nothing is handled.
func TestHistoryLostFail(t *testing.T) {
	e := newEnv(t)
	e.needSim("TruncateOplog")
	got := newHandled()
	loseHistory(t, e, got)

	r := e.startRuntime(nil)
	spec := watchtree.Stream[Order]{Name: "hl", Collection: "orders", Restart: fastRestart, OnInsert: got.handler()}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, err := r.rt.Spawn(ctx, withCursor(spec)); !errors.Is(err, watchtree.ErrHistoryLost) {
		t.Fatalf("Spawn: %v, want an error matching ErrHistoryLost", err)
	}
	if _, err := r.rt.Handle("hl"); !errors.Is(err, watchtree.ErrUnknownStream) {
		t.Errorf("after a failed Spawn the name is still taken: %v", err)
	}
	stopped := r.obs.wait(t, "terminal Stopped", func(ev observe.Event) bool {
		s, ok := ev.(observe.Stopped)
		return ok && s.Terminal
	}).(observe.Stopped)
	if stopped.Reason != observe.Crashed || !errors.Is(stopped.Cause, watchtree.ErrHistoryLost) {
		t.Errorf("Stopped{%v, %v}, want crashed with ErrHistoryLost", stopped.Reason, stopped.Cause)
	}
	hl := r.obs.wait(t, "HistoryLost", ofType[observe.HistoryLost]).(observe.HistoryLost)
	if hl.Policy != "Fail" || hl.Err == nil {
		t.Errorf("HistoryLost{%v, %v}, want policy Fail with the server error", hl.Policy, hl.Err)
	}
	if g := e.gaps("hl"); len(g) != 0 {
		t.Errorf("gap records under Fail: %+v", g)
	}
	if n := got.distinct(); n != 10 {
		t.Errorf("%d events handled, want only the 10 before the loss", n)
	}
	if rs := restartsOf(r, "hl"); len(rs) != 0 {
		t.Errorf("a terminal history loss was retried: %v", rs)
	}
}

// TestHistoryLostResumeFromNow: the stream records a gap (from the lost checkpoint to the current
// position), resumes from now and handles what is written next; the lost events are never
// handled, and the gap says so.
func TestHistoryLostResumeFromNow(t *testing.T) {
	e := newEnv(t)
	e.needSim("TruncateOplog")
	got := newHandled()
	lost := loseHistory(t, e, got)

	r := e.startRuntime(nil)
	h := r.spawn(t, watchtree.Stream[Order]{Name: "hl", Collection: "orders", OnHistoryLost: watchtree.ResumeFromNow,
		OnInsert: got.handler()})
	gr := r.obs.wait(t, "GapRecorded", ofType[observe.GapRecorded]).(observe.GapRecorded)
	waitState(t, h, watchtree.StateRunning)
	e.insertOrders("orders", 21, 25)
	waitFor(t, "orders 21..25 handled", func() bool {
		d := got.docs()
		return d[21] && d[22] && d[23] && d[24] && d[25]
	})

	gaps := e.gaps("hl")
	if len(gaps) != 1 {
		t.Fatalf("%d gap records, want 1: %+v", len(gaps), gaps)
	}
	g := gaps[0]
	if g.Policy != "resumeFromNow" || tokenData(g.FromToken) != lost || tokenData(g.ToToken) <= lost || g.Reason == "" {
		t.Errorf("gap %+v: want policy resumeFromNow, from the lost checkpoint %s to a later position, with the reason", g, lost)
	}
	if tokenData(gr.From) != lost || tokenData(gr.To) != tokenData(g.ToToken) {
		t.Errorf("GapRecorded{From %s, To %s} differs from the record", tokenData(gr.From), tokenData(gr.To))
	}
	if hl := historyLostOf(r); len(hl) == 0 {
		t.Error("no HistoryLost event")
	}
	docs := got.docs()
	for i := int64(11); i <= 20; i++ {
		if docs[i] {
			t.Errorf("order %d, written before the position resumed from, was handled", i)
		}
	}
}

// TestHistoryLostRebuild: the stream captures the operation time T, runs the rebuild, records a
// gap and starts at T: what the rebuild itself writes is handled, and so is what comes after.
func TestHistoryLostRebuild(t *testing.T) {
	e := newEnv(t)
	e.needSim("TruncateOplog")
	got := newHandled()
	lost := loseHistory(t, e, got)

	var rebuilds atomic.Int32
	rebuild := func(ctx context.Context) error {
		rebuilds.Add(1)
		_, err := e.db.Collection("orders").InsertOne(ctx, Order{ID: 100}) // written after T
		return err
	}
	r := e.startRuntime(nil)
	h := r.spawn(t, watchtree.Stream[Order]{Name: "hl", Collection: "orders", OnHistoryLost: watchtree.Rebuild(rebuild),
		OnInsert: got.handler()})
	r.obs.wait(t, "GapRecorded", ofType[observe.GapRecorded])
	waitState(t, h, watchtree.StateRunning)
	e.insertOrders("orders", 21, 22)
	waitFor(t, "the order written by the rebuild and orders 21, 22 handled", func() bool {
		d := got.docs()
		return d[100] && d[21] && d[22]
	})
	if n := rebuilds.Load(); n != 1 {
		t.Errorf("rebuild ran %d times, want 1", n)
	}
	gaps := e.gaps("hl")
	if len(gaps) != 1 || gaps[0].Policy != "rebuild" || tokenData(gaps[0].FromToken) != lost || gaps[0].Reason == "" {
		t.Errorf("gaps %+v: want one rebuild gap from the lost checkpoint %s", gaps, lost)
	}
}

// invalidateCase drives an invalidate of orders by drop or rename.
func invalidate(t *testing.T, e *env, how string) {
	t.Helper()
	e.must(func(ctx context.Context) error {
		switch how {
		case "drop":
			return e.db.Collection("orders").Drop(ctx)
		case "rename":
			return e.client.Database("admin").RunCommand(ctx, bson.D{
				{Key: "renameCollection", Value: e.dbName + ".orders"}, {Key: "to", Value: e.dbName + ".orders_old"}}).Err()
		}
		return errors.New("unknown invalidate " + how)
	})
}

// TestInvalidate: dropping or renaming the watched collection invalidates the stream. The
// drop/rename and the invalidate events reach OnChange; InvalidateStop then stops terminally with
// ErrInvalidated, InvalidateRestart follows the re-created collection; both are reported.
func TestInvalidate(t *testing.T) {
	for _, how := range []string{"drop", "rename"} {
		for _, policy := range []watchtree.InvalidatePolicy{watchtree.InvalidateStop, watchtree.InvalidateRestart} {
			t.Run(how+"/"+policy.String(), func(t *testing.T) {
				e := newEnv(t)
				r := e.startRuntime(nil)
				var ins, change calls
				h := r.spawn(t, watchtree.Stream[Order]{Name: "inv", Collection: "orders", OnInvalidate: policy,
					Restart: fastRestart, OnInsert: ins.rec("insert"), OnChange: change.rec("change")})
				r.waitRunning(t, h)
				e.insertOrders("orders", 1, 3)
				ins.waitN(t, 3)
				invalidate(t, e, how)

				list := change.waitN(t, 2)
				if string(list[0].op) != how || list[1].op != watchtree.OpInvalidate {
					t.Errorf("OnChange saw %s, %s; want %s, invalidate", list[0].op, list[1].op, how)
				}
				inv := r.obs.wait(t, "Invalidated", ofType[observe.Invalidated]).(observe.Invalidated)
				if string(inv.Cause) != how || inv.Action != policy.String() {
					t.Errorf("Invalidated{Cause %q, Action %v}, want %q, %v", inv.Cause, inv.Action, how, policy)
				}
				if policy == watchtree.InvalidateStop {
					waitState(t, h, watchtree.StateCrashed)
					s := r.obs.wait(t, "terminal Stopped", func(ev observe.Event) bool {
						s, ok := ev.(observe.Stopped)
						return ok && s.Terminal
					}).(observe.Stopped)
					if !errors.Is(s.Cause, watchtree.ErrInvalidated) {
						t.Errorf("Stopped cause %v, want ErrInvalidated", s.Cause)
					}
					return
				}
				// InvalidateRestart: the stream follows a re-created collection of the same name.
				waitFor(t, "the stream to reopen after the invalidate", func() bool {
					return len(r.obs.find(ofType[observe.Started])) >= 2
				}, r.obs.dump)
				waitState(t, h, watchtree.StateRunning)
				e.insertOrders("orders", 4, 5)
				l := ins.waitN(t, 5)
				if l[3].doc != 4 || l[4].doc != 5 {
					t.Errorf("after the restart: handled %+v, want orders 4 and 5", l[3:])
				}
				// Nothing may fail or loop: no crash was reported.
				for _, ev := range r.obs.find(ofType[observe.Stopped]) {
					t.Errorf("unexpected %v", ev)
				}
				if n := len(change.get()); n != 2 {
					t.Errorf("OnChange saw %d events, want the 2 of the invalidate", n)
				}
			})
		}
	}
}

// TestHistoryLostEphemeralDefault: an Ephemeral stream (the README's cache) left at the default
// OnHistoryLost whose in-memory position fell out of the oplog (stopped, then the oplog rolled
// over) does not crash for good: Start brings it back from the current position, the gap is
// recorded and reported (HistoryLost, GapRecorded), and the writes after it are handled.
func TestHistoryLostEphemeralDefault(t *testing.T) {
	e := newEnv(t)
	e.needSim("TruncateOplog")
	got := newHandled()
	r := e.startRuntime(nil)
	h := r.spawn(t, watchtree.Stream[Order]{Name: "cache", Collection: "orders", Restart: fastRestart,
		Checkpoint: watchtree.CheckpointPolicy{Ephemeral: true}, OnInsert: got.handler()})
	r.waitRunning(t, h)
	e.insertOrders("orders", 1, 5)
	waitOrders(t, got, 5)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := h.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	e.insertOrders("orders", 6, 10)          // missed while stopped
	e.srv.TruncateOplog(e.srv.ClusterTime()) // the in-memory position (order 5) is gone

	if err := h.Start(ctx); err != nil {
		t.Fatalf("Start after lost history: %v (an Ephemeral stream must record the gap and go on)", err)
	}
	hl := r.obs.wait(t, "HistoryLost", ofType[observe.HistoryLost]).(observe.HistoryLost)
	if hl.Policy != "ResumeFromNow" {
		t.Errorf("HistoryLost under policy %v, want ResumeFromNow (the Ephemeral default)", hl.Policy)
	}
	gr := r.obs.wait(t, "GapRecorded", ofType[observe.GapRecorded]).(observe.GapRecorded)
	waitState(t, h, watchtree.StateRunning)
	e.insertOrders("orders", 11, 13)
	waitFor(t, "orders 11..13 handled", func() bool {
		d := got.docs()
		return d[11] && d[12] && d[13]
	})
	gaps := e.gaps("cache")
	if len(gaps) != 1 || gaps[0].Policy != "resumeFromNow" || gaps[0].Reason == "" {
		t.Fatalf("gaps %+v: want one resumeFromNow gap with its reason", gaps)
	}
	if tokenData(gr.To) != tokenData(gaps[0].ToToken) || len(gaps[0].FromToken) == 0 {
		t.Errorf("gap %+v / GapRecorded{To %s}: want the record's end and the lost in-memory position as its start", gaps[0], tokenData(gr.To))
	}
	if s := restartsOf(r, "cache"); len(s) != 0 {
		t.Errorf("the stream was restarted %d times: lost history must not crash it", len(s))
	}
}

// TestHistoryLostEphemeralExplicitFail: Fail set explicitly on an Ephemeral stream is Fail.
func TestHistoryLostEphemeralExplicitFail(t *testing.T) {
	e := newEnv(t)
	e.needSim("TruncateOplog")
	got := newHandled()
	r := e.startRuntime(nil)
	h := r.spawn(t, watchtree.Stream[Order]{Name: "cache", Collection: "orders", Restart: fastRestart,
		Checkpoint: watchtree.CheckpointPolicy{Ephemeral: true}, OnHistoryLost: watchtree.Fail, OnInsert: got.handler()})
	r.waitRunning(t, h)
	e.insertOrders("orders", 1, 2)
	waitOrders(t, got, 2)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := h.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	e.insertOrders("orders", 3, 4)
	e.srv.TruncateOplog(e.srv.ClusterTime())
	if err := h.Start(ctx); !errors.Is(err, watchtree.ErrHistoryLost) {
		t.Fatalf("Start: %v, want ErrHistoryLost under an explicit Fail", err)
	}
	if g := e.gaps("cache"); len(g) != 0 {
		t.Errorf("gap records under Fail: %+v", g)
	}
}
