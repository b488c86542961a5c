package integration_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
)

// TestRetryThenSuccessAndSkip: a handler that fails twice then succeeds is called with Attempt
// 1, 2, 3 and settles without a dead letter (two RetryScheduled reported); a handler returning
// Skip settles the event on purpose (Skipped reported, no dead letter, no retry); the checkpoint
// passes both.
func TestRetryThenSuccessAndSkip(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	var mu sync.Mutex
	attempts := map[int64][]int{}
	h := r.spawn(t, watchtree.Stream[Order]{Name: "retry", Collection: "orders",
		Retry:      watchtree.RetryPolicy{MaxAttempts: 5, InitialDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond},
		Checkpoint: watchtree.CheckpointPolicy{SaveEvery: 1},
		OnInsert: func(_ context.Context, ev *watchtree.Event[Order]) error {
			mu.Lock()
			attempts[ev.FullDocument.ID] = append(attempts[ev.FullDocument.ID], ev.Attempt())
			mu.Unlock()
			switch {
			case ev.FullDocument.ID == 1 && ev.Attempt() < 3:
				return errors.New("flaky downstream")
			case ev.FullDocument.ID == 2:
				return watchtree.Skip("not for us")
			}
			return nil
		}})
	r.waitRunning(t, h)
	e.insertOrders("orders", 1, 3)
	waitFor(t, "order 3 handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(attempts[3]) == 1 && len(attempts[1]) == 3
	})
	mu.Lock()
	if a := attempts[1]; len(a) != 3 || a[0] != 1 || a[1] != 2 || a[2] != 3 {
		t.Errorf("order 1 attempts %v, want [1 2 3]", a)
	}
	if a := attempts[2]; len(a) != 1 {
		t.Errorf("order 2 (skipped) called %d times, want once", len(a))
	}
	mu.Unlock()
	waitFor(t, "the checkpoint to pass every event", func() bool {
		cp, ok := e.checkpoint("retry")
		return ok && checkpointPastAll(e, tokenData(cp.Token))
	})
	retries := r.obs.find(ofType[observe.RetryScheduled])
	if len(retries) != 2 {
		t.Errorf("%d RetryScheduled, want 2: %v", len(retries), retries)
	}
	for i, ev := range retries {
		rs := ev.(observe.RetryScheduled)
		if rs.Attempt != i+1 || rs.Err == nil || !strings.Contains(rs.Err.Error(), "flaky downstream") || rs.EventID == "" {
			t.Errorf("retry %d: %+v", i, rs)
		}
	}
	sk := r.obs.wait(t, "Skipped", ofType[observe.Skipped]).(observe.Skipped)
	if sk.Reason != observe.SkipByHandler || sk.Detail != "not for us" || sk.EventID == "" {
		t.Errorf("Skipped %+v, want the handler's reason %q", sk, "not for us")
	}
	if dls := r.deadLetters(t, "retry"); len(dls) != 0 {
		t.Errorf("dead letters %+v, want none", dls)
	}
	if n := len(r.obs.find(ofType[observe.DeadLettered])); n != 0 {
		t.Errorf("%d DeadLettered reported, want none", n)
	}
}

// TestDatabaseWideStream: a stream over the whole database (its stores live in the same
// database) sees the events of every collection, and none of watchtree's own writes (checkpoints,
// dead letters), which would otherwise feed back into it forever.
func TestDatabaseWideStream(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	var mu sync.Mutex
	var seen []string // namespace of each event
	h := r.spawn(t, watchtree.Stream[Order]{Name: "dbwide", Database: e.dbName, Retry: quickRetry,
		Checkpoint: watchtree.CheckpointPolicy{SaveEvery: 1, SaveInterval: 20 * time.Millisecond},
		OnChange: func(_ context.Context, ev *watchtree.Event[Order]) error {
			mu.Lock()
			seen = append(seen, ev.Namespace().Coll)
			mu.Unlock()
			if ev.FullDocument != nil && ev.FullDocument.Poison {
				return watchtree.Permanent(errors.New("poison")) // a dead-letter write, in this database
			}
			return nil
		}})
	r.waitRunning(t, h)
	e.insertOrders("orders", 1, 5)
	e.insertOrders("invoices", 1, 5)
	e.must(func(ctx context.Context) error {
		_, err := e.db.Collection("orders").InsertOne(ctx, Order{ID: 6, Poison: true})
		return err
	})
	waitFor(t, "11 events", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= 11
	})
	r.obs.wait(t, "DeadLettered", ofType[observe.DeadLettered])
	// The checkpoint and dead-letter writes that follow must not come back as events: once the
	// checkpoint passed every event of the database, the stream has seen exactly the 11.
	waitFor(t, "the checkpoint to pass every user event", func() bool {
		cp, ok := e.checkpoint("dbwide")
		return ok && checkpointPastAll(e, tokenData(cp.Token))
	})
	mu.Lock()
	defer mu.Unlock()
	counts := map[string]int{}
	for _, c := range seen {
		counts[c]++
	}
	if counts["orders"] != 6 || counts["invoices"] != 5 || len(counts) != 2 {
		t.Errorf("events by collection %v, want orders 6 and invoices 5 only", counts)
	}
}
