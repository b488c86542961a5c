package integration_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/store"
)

// quickRetry makes retries fast: 2 attempts, 1ms apart.
var quickRetry = watchtree.RetryPolicy{MaxAttempts: 2, InitialDelay: time.Millisecond, MaxDelay: time.Millisecond}

// TestPoisonEventsDeadLettered: a handler that panics on some orders. Each poison order is
// retried, then dead-lettered with the panic's stack; every other order is handled, the
// checkpoint moves past all of them, and a dead letter can be listed and replayed.
func TestPoisonEventsDeadLettered(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	poison := map[int64]bool{5: true, 17: true, 23: true}
	var healed atomic.Bool
	var mu sync.Mutex
	attempts := map[int64]int{}
	got := newHandled()
	h := r.spawn(t, watchtree.Stream[Order]{Name: "poison", Collection: "orders", Lanes: 2, Retry: quickRetry,
		Checkpoint: watchtree.CheckpointPolicy{SaveEvery: 5, SaveInterval: 50 * time.Millisecond},
		OnInsert: func(_ context.Context, ev *watchtree.Event[Order]) error {
			id := ev.FullDocument.ID
			mu.Lock()
			attempts[id]++
			mu.Unlock()
			if ev.FullDocument.Poison && !healed.Load() {
				panic(fmt.Sprintf("poison order %d", id))
			}
			got.record(ev)
			return nil
		}})
	r.waitRunning(t, h)
	for i := int64(1); i <= 30; i++ {
		e.must(func(ctx context.Context) error {
			_, err := e.db.Collection("orders").InsertOne(ctx, Order{ID: i, Poison: poison[i]})
			return err
		})
	}
	waitFor(t, "the 27 good orders handled", func() bool { return got.distinct() == 27 })
	waitFor(t, "3 DeadLettered events", func() bool { return len(r.obs.find(ofType[observe.DeadLettered])) == 3 }, r.obs.dump)

	dls := r.deadLetters(t, "poison")
	if len(dls) != 3 {
		t.Fatalf("%d dead letters, want 3: %+v", len(dls), dls)
	}
	for _, dl := range dls {
		id, _ := bson.Raw(dl.DocumentKey).Lookup("_id").AsInt64OK()
		switch {
		case !poison[id]:
			t.Errorf("dead letter for order %d, which is not poison", id)
		case !strings.Contains(dl.Error, fmt.Sprintf("poison order %d", id)):
			t.Errorf("order %d: dead-letter error %q lacks the panic value", id, dl.Error)
		case !strings.Contains(dl.Stack, "goroutine") || !strings.Contains(dl.Stack, "panic"):
			t.Errorf("order %d: dead letter has no panic stack: %q", id, dl.Stack)
		case dl.Attempts != 2:
			t.Errorf("order %d: %d attempts recorded, want 2", id, dl.Attempts)
		case dl.Stream != "poison" || fmt.Sprint(dl.OperationType) != "insert" || len(dl.Event) == 0 || len(dl.Token) == 0:
			t.Errorf("order %d: incomplete dead letter %+v", id, dl)
		}
		if n := attempts[id]; n != 2 {
			t.Errorf("order %d: handler called %d times, want 2 (Retry.MaxAttempts)", id, n)
		}
	}
	// Dead-lettered events settle: the checkpoint passes every event.
	waitFor(t, "the checkpoint to pass every event", func() bool {
		cp, ok := e.checkpoint("poison")
		return ok && checkpointPastAll(e, tokenData(cp.Token))
	})

	// Replay one dead letter once the handler is fixed.
	healed.Store(true)
	target := dls[0]
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := r.rt.Replay(ctx, "poison", target.ID); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	id, _ := bson.Raw(target.DocumentKey).Lookup("_id").AsInt64OK()
	if !got.docs()[id] {
		t.Errorf("Replay of order %d did not call the handler", id)
	}
	for _, dl := range r.deadLetters(t, "poison") {
		if dl.ID == target.ID { // Runtime.Replay: a successful replay deletes the record
			t.Errorf("replayed dead letter still listed: %+v", dl)
		}
	}
	if err := r.rt.Replay(ctx, "poison", "no-such-id"); err == nil {
		t.Error("Replay of an unknown id succeeded")
	}
}

// TestDeadLetterStoreDown: while the dead-letter collection refuses writes, a poison event stays
// unsettled (its lane waits, the checkpoint stops right before it, failures are reported);
// nothing after it is skipped, and everything proceeds once the store is back.
func TestDeadLetterStoreDown(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	got := newHandled()
	h := r.spawn(t, watchtree.Stream[Order]{Name: "dlqdown", Collection: "orders", Lanes: 1,
		Retry:      watchtree.RetryPolicy{MaxAttempts: 1},
		Checkpoint: watchtree.CheckpointPolicy{SaveEvery: 1, SaveInterval: 20 * time.Millisecond},
		OnInsert: func(_ context.Context, ev *watchtree.Event[Order]) error {
			if ev.FullDocument.Poison {
				return watchtree.Permanent(errors.New("bad order"))
			}
			got.record(ev)
			return nil
		}})
	r.waitRunning(t, h)
	e.failPoint("alwaysOn", bson.D{{Key: "failCommands", Value: bson.A{"insert", "update", "findAndModify"}},
		{Key: "namespace", Value: e.dbName + "._wt_dead_letters"}, {Key: "errorCode", Value: 91},
		{Key: "errorLabels", Value: bson.A{}}, {Key: "appName", Value: r.app}})

	e.insertOrders("orders", 1, 5)
	e.must(func(ctx context.Context) error {
		_, err := e.db.Collection("orders").InsertOne(ctx, Order{ID: 6, Poison: true})
		return err
	})
	e.insertOrders("orders", 7, 15)
	waitOrders(t, got, 5)
	waitFor(t, "two failed dead-letter writes", func() bool {
		return len(r.obs.find(ofType[observe.DeadLetterFailed])) >= 2
	}, r.obs.dump)
	poisonID := r.obs.find(ofType[observe.DeadLetterFailed])[0].(observe.DeadLetterFailed).EventID
	id5 := eventOf(got, 5)
	waitFor(t, "the checkpoint to reach order 5", func() bool {
		cp, ok := e.checkpoint("dlqdown")
		return ok && tokenData(cp.Token) >= id5
	})
	cp, _ := e.checkpoint("dlqdown")
	if d := tokenData(cp.Token); d >= poisonID {
		t.Errorf("checkpoint %s passed the unsettled poison event %s", d, poisonID)
	}
	if n := got.distinct(); n != 5 {
		t.Errorf("%d orders handled while the poison event blocks the only lane, want 5", n)
	}
	if n := len(r.obs.find(ofType[observe.DeadLettered])); n != 0 {
		t.Errorf("%d DeadLettered reported while the store is down", n)
	}

	e.failPointOff()
	waitOrders(t, got, 5)
	waitFor(t, "orders 7..15 handled", func() bool { return got.distinct() == 14 })
	r.obs.wait(t, "DeadLettered", ofType[observe.DeadLettered])
	dls := r.deadLetters(t, "dlqdown")
	if len(dls) != 1 || dls[0].ID != poisonID || !strings.Contains(dls[0].Error, "bad order") {
		t.Errorf("dead letters %+v, want the poison order's with its error", dls)
	}
	waitFor(t, "the checkpoint to pass the poison event", func() bool {
		cp, ok := e.checkpoint("dlqdown")
		return ok && tokenData(cp.Token) > poisonID
	})
}

// eventOf returns the ID of the (first) event delivered for order doc.
func eventOf(h *handled, doc int64) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range h.order {
		if h.docOfEvent[id] == doc {
			return id
		}
	}
	return ""
}

// Wrong is Order with a field of another type, so documents written as Order fail to decode.
type strictOrder struct {
	ID     int64   `bson:"_id"`
	Amount float64 `bson:"amount"`
}

// TestUndecodableDocuments: a document that does not decode into T is dead-lettered at once with
// the decode error (no retries), and the stream goes on.
func TestUndecodableDocuments(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	var calls atomic.Int32
	var seen sync.Map
	h := r.spawn(t, watchtree.Stream[strictOrder]{Name: "decode", Collection: "orders",
		OnInsert: func(_ context.Context, ev *watchtree.Event[strictOrder]) error {
			calls.Add(1)
			seen.Store(ev.FullDocument.ID, true)
			return nil
		}})
	r.waitRunning(t, h)
	e.must(func(ctx context.Context) error {
		c := e.db.Collection("orders")
		if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: int64(1)}, {Key: "amount", Value: 5.0}}); err != nil {
			return err
		}
		if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: int64(2)}, {Key: "amount", Value: "not a number"}}); err != nil {
			return err
		}
		_, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: int64(3)}, {Key: "amount", Value: 7.0}})
		return err
	})
	waitFor(t, "orders 1 and 3 handled", func() bool {
		_, a := seen.Load(int64(1))
		_, b := seen.Load(int64(3))
		return a && b
	})
	dl := r.obs.wait(t, "DeadLettered", ofType[observe.DeadLettered]).(observe.DeadLettered)
	var de *watchtree.DecodeError
	if !errors.As(dl.Err, &de) || de.Field != "fullDocument" {
		t.Errorf("DeadLettered.Err = %v, want a *DecodeError of fullDocument", dl.Err)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("handler called %d times, want 2 (never for the undecodable order)", n)
	}
	dls := r.deadLetters(t, "decode")
	if len(dls) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dls))
	}
	if id, _ := bson.Raw(dls[0].DocumentKey).Lookup("_id").AsInt64OK(); id != 2 || !strings.Contains(dls[0].Error, "cannot decode fullDocument") {
		t.Errorf("dead letter for order %d with error %q, want order 2 with the decode error", id, dls[0].Error)
	}
	if dls[0].Attempts != 0 || dl.Attempts != 0 {
		t.Errorf("decode error: the dead letter says %d attempts and DeadLettered %d, want 0 (no handler call)", dls[0].Attempts, dl.Attempts)
	}
}

// TestTwoStreamsDeadLetterTheSameEvents: two streams on one collection fail on the same poison
// orders. Each stream keeps its own dead letter of every one of them (the Observer's 8
// DeadLettered are 8 records), lists only its own, and a replay or delete through one stream
// leaves the other stream's record of the same event alone.
func TestTwoStreamsDeadLetterTheSameEvents(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	poison := map[int64]bool{2: true, 4: true, 6: true, 8: true}
	var billingFixed atomic.Bool
	spec := func(name string, fixed *atomic.Bool) watchtree.Stream[Order] {
		return watchtree.Stream[Order]{Name: name, Collection: "orders",
			OnInsert: func(_ context.Context, ev *watchtree.Event[Order]) error {
				if ev.FullDocument.Poison && (fixed == nil || !fixed.Load()) {
					return watchtree.Permanent(fmt.Errorf("%s refuses order %d", name, ev.FullDocument.ID))
				}
				return nil
			}}
	}
	hs := r.spawn(t, spec("search", nil))
	hb := r.spawn(t, spec("billing", &billingFixed))
	r.waitRunning(t, hs)
	r.waitRunning(t, hb)
	for i := int64(1); i <= 9; i++ {
		e.must(func(ctx context.Context) error {
			_, err := e.db.Collection("orders").InsertOne(ctx, Order{ID: i, Poison: poison[i]})
			return err
		})
	}
	waitFor(t, "8 DeadLettered events", func() bool { return len(r.obs.find(ofType[observe.DeadLettered])) == 8 }, r.obs.dump)
	if n := e.collCount("_wt_dead_letters", nil); n != 8 {
		t.Errorf("_wt_dead_letters holds %d records for 8 DeadLettered events", n)
	}

	byStream := map[string]map[string]watchtree.DeadLetter{}
	for _, stream := range []string{"search", "billing"} {
		byStream[stream] = map[string]watchtree.DeadLetter{}
		for _, dl := range r.deadLetters(t, stream) {
			id, _ := bson.Raw(dl.DocumentKey).Lookup("_id").AsInt64OK()
			if dl.Stream != stream || !poison[id] || !strings.Contains(dl.Error, fmt.Sprintf("%s refuses order %d", stream, id)) {
				t.Errorf("stream %s lists the dead letter of order %d from stream %q with error %q", stream, id, dl.Stream, dl.Error)
			}
			byStream[stream][dl.ID] = dl
		}
		if n := len(byStream[stream]); n != 4 {
			t.Fatalf("stream %s lists %d dead letters, want 4", stream, n)
		}
	}
	for id := range byStream["search"] {
		if _, ok := byStream["billing"][id]; !ok {
			t.Fatalf("event %s dead-lettered by search but not listed for billing", id)
		}
	}

	// Billing is fixed: its replay deletes its record only; search's replay still fails and is
	// counted on search's record only.
	var target string
	for id := range byStream["billing"] {
		target = id
		break
	}
	billingFixed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := r.rt.Replay(ctx, "billing", target); err != nil {
		t.Fatalf("Replay(billing, %s): %v", target, err)
	}
	if err := r.rt.Replay(ctx, "search", target); err == nil || !strings.Contains(err.Error(), "search refuses") {
		t.Fatalf("Replay(search, %s) = %v, want search's handler error", target, err)
	}
	if dls := r.deadLetters(t, "billing"); len(dls) != 3 {
		t.Errorf("billing lists %d dead letters after one successful replay, want 3", len(dls))
	}
	found := false
	for _, dl := range r.deadLetters(t, "search") {
		if dl.ID == target {
			found = true
			if dl.ReplayCount != 1 {
				t.Errorf("search's record of %s: ReplayCount %d, want 1", target, dl.ReplayCount)
			}
		}
	}
	if !found {
		t.Errorf("billing's replay of %s removed search's record of the same event", target)
	}
	if err := r.rt.Replay(ctx, "billing", target); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second Replay(billing, %s) = %v, want store.ErrNotFound", target, err)
	}
	if _, err := r.rt.DeadLetters(ctx, "shipping", 0); !errors.Is(err, watchtree.ErrUnknownStream) {
		t.Errorf("DeadLetters of a stream not on the runtime: %v, want ErrUnknownStream", err)
	}
}
