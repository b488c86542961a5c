package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/actors/stream"
)

// closedWithin reports whether ch is closed within d.
func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestCursorBound: each arm is a wait with a deadline of its own; a wait that ran out is
// followed by one that has not; the parent's end ends the armed wait and every later one; a
// deadline of the parent earlier than the wait's is the wait's.
func TestCursorBound(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := newCursorBound(parent)
	defer b.release()

	before := time.Now()
	b.arm(20 * time.Millisecond)
	if dl, ok := b.Deadline(); !ok || dl.Before(before.Add(20*time.Millisecond)) || dl.After(time.Now().Add(20*time.Millisecond)) {
		t.Fatalf("Deadline = %v, %v: want 20ms from the arm", dl, ok)
	}
	if !closedWithin(b.Done(), 5*time.Second) {
		t.Fatal("the armed wait did not run out")
	}
	if err := b.Err(); err != context.DeadlineExceeded {
		t.Fatalf("Err = %v, want context.DeadlineExceeded", err)
	}
	b.disarm()

	b.arm(time.Hour) // re-armed after running out: a wait not ended yet
	if isClosed(b.Done()) || b.Err() != nil {
		t.Fatalf("re-armed wait: Done closed %v, Err %v; want a wait under way", isClosed(b.Done()), b.Err())
	}
	if dl, _ := b.Deadline(); time.Until(dl) < 59*time.Minute {
		t.Fatalf("re-armed Deadline %v: want an hour from now", dl)
	}
	b.expire() // a timer callback of an earlier wait, late: the later deadline stands
	if isClosed(b.Done()) || b.Err() != nil {
		t.Fatal("an earlier wait's timer ended the re-armed one")
	}

	cancel()
	if !closedWithin(b.Done(), 5*time.Second) {
		t.Fatal("the parent's end did not end the armed wait")
	}
	if err := b.Err(); err != context.Canceled {
		t.Fatalf("Err = %v after the parent's cancel, want context.Canceled", err)
	}
	b.disarm()
	b.arm(time.Hour)
	if !isClosed(b.Done()) || b.Err() != context.Canceled {
		t.Fatalf("armed after the parent's end: Done closed %v, Err %v; want ended, context.Canceled", isClosed(b.Done()), b.Err())
	}

	dlParent, cancelParent := context.WithTimeout(context.Background(), time.Minute)
	defer cancelParent()
	b2 := newCursorBound(dlParent)
	defer b2.release()
	b2.arm(time.Hour)
	want, _ := dlParent.Deadline()
	if dl, _ := b2.Deadline(); !dl.Equal(want) {
		t.Fatalf("Deadline %v with a parent ending at %v: want the parent's", dl, want)
	}

	b3 := newCursorBound(context.WithValue(context.Background(), valueKey{}, "v"))
	defer b3.release()
	if got := b3.Value(valueKey{}); got != "v" {
		t.Fatalf("Value = %v, want the parent's", got)
	}
}

type valueKey struct{}

// TestBoundedWatcherGetMoreBound: the cursor's getMores share one bound, re-armed for each (a
// run of idle getMores longer than the bound all succeed, each with the server-side wait
// MaxAwaitTime); a frozen server fails the getMore within MaxAwaitTime + ConnectTimeout, with
// the error naming the bound; a cancelled reader ends a getMore at once.
func TestBoundedWatcherGetMoreBound(t *testing.T) {
	e := newEnv(t)
	e.needSim(t)
	cs := &Spec{Name: "bounded", Collection: "orders"}
	closeSoon := func(c stream.Cursor) {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			_ = c.Close(ctx)
		})
	}

	t.Run("re-armed", func(t *testing.T) {
		w := newDriverWatcher(cs, e.client, e.db).bounded(150 * time.Millisecond)
		ctx := testCtx(t)
		c, err := w.Open(ctx, stream.Position{MaxAwaitTime: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		closeSoon(c)
		e.srv.ResetCommands()
		start := time.Now()
		for time.Since(start) < 500*time.Millisecond { // more than twice the bound of 200ms
			if c.TryNext(ctx) {
				t.Fatal("event on an idle collection")
			}
			if err := c.Err(); err != nil {
				t.Fatalf("idle getMore %v after the first failed: %v", time.Since(start), err)
			}
		}
		gms := e.srv.CommandsNamed("getMore")
		if len(gms) < 3 {
			t.Fatalf("%d getMores in 500ms with MaxAwaitTime 50ms", len(gms))
		}
		for i, gm := range gms {
			gb, _ := bson.Marshal(gm.Body)
			if ms := bson.Raw(gb).Lookup("maxTimeMS").AsInt64(); ms != 50 {
				t.Fatalf("getMore %d: maxTimeMS %d, want 50 (the bound's deadline is re-armed)", i, ms)
			}
		}
	})

	t.Run("frozen server", func(t *testing.T) {
		w := newDriverWatcher(cs, e.client, e.db).bounded(150 * time.Millisecond)
		ctx := testCtx(t)
		c, err := w.Open(ctx, stream.Position{MaxAwaitTime: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		closeSoon(c)
		for range 2 { // the first TryNext may only look at the aggregate's empty first batch
			if c.TryNext(ctx) || c.Err() != nil {
				t.Fatalf("idle getMore: %v", c.Err())
			}
		}
		e.srv.Pause()
		t.Cleanup(e.srv.Resume)
		start := time.Now()
		for c.Err() == nil && time.Since(start) < 5*time.Second {
			if c.TryNext(ctx) {
				t.Fatal("event from a frozen server")
			}
		}
		took := time.Since(start)
		err = c.Err()
		if err == nil || took > 3*time.Second {
			t.Fatalf("TryNext on a frozen server: error %v after %v, want the bound's within 200ms (+ slack)", err, took)
		}
		if !strings.Contains(err.Error(), "cannot reach MongoDB within 200ms (MaxAwaitTime 50ms + ConnectTimeout 150ms)") {
			t.Fatalf("error %q: want the bound named", err)
		}
		if took < 150*time.Millisecond {
			t.Fatalf("the getMore failed after %v, before its bound of 200ms", took)
		}
	})

	t.Run("cancelled reader", func(t *testing.T) {
		w := newDriverWatcher(cs, e.client, e.db).bounded(10 * time.Second)
		ctx, cancel := context.WithCancel(testCtx(t))
		defer cancel()
		c, err := w.Open(ctx, stream.Position{MaxAwaitTime: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		closeSoon(c)
		for range 2 {
			if c.TryNext(ctx) || c.Err() != nil {
				t.Fatalf("idle getMore: %v", c.Err())
			}
		}
		e.srv.Pause() // the next getMore waits for the bound, 10s
		t.Cleanup(e.srv.Resume)
		// The cancel comes while the getMore is (most likely) in flight; before it, the bound's
		// arm finds the parent ended and the getMore fails at once too.
		timer := time.AfterFunc(100*time.Millisecond, cancel)
		defer timer.Stop()
		start := time.Now()
		for ctx.Err() == nil && c.Err() == nil && time.Since(start) < 15*time.Second {
			c.TryNext(ctx)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Fatalf("the getMore ended %v after the start, the cancel at 100ms: want at once, not at the 10s bound", took)
		}
		if err := c.Err(); err != nil && (strings.Contains(err.Error(), "cannot reach") || !errors.Is(err, context.Canceled)) {
			t.Fatalf("error %q after a cancel: want the cancel, not the bound", err)
		}
	})
}

// TestBoundedWatcherKeepsMaxAwaitTime: the bound of a getMore (MaxAwaitTime + ConnectTimeout)
// does not shorten the server-side wait the driver derives from the context's deadline.
func TestBoundedWatcherKeepsMaxAwaitTime(t *testing.T) {
	e := newEnv(t)
	e.needSim(t)
	cs := &Spec{Name: "bounded", Collection: "orders"}
	w := newDriverWatcher(cs, e.client, e.db).bounded(300 * time.Millisecond)
	ctx := testCtx(t)
	e.srv.ResetCommands()
	c, err := w.Open(ctx, stream.Position{MaxAwaitTime: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for range 2 { // the first TryNext may only look at the aggregate's empty first batch
		if c.TryNext(ctx) {
			t.Fatal("event on an idle collection")
		}
		if err := c.Err(); err != nil {
			t.Fatalf("idle getMore failed: %v", err)
		}
	}
	gms := e.srv.CommandsNamed("getMore")
	if len(gms) == 0 {
		t.Fatal("no getMore")
	}
	gb, _ := bson.Marshal(gms[0].Body)
	if ms := bson.Raw(gb).Lookup("maxTimeMS").AsInt64(); ms != 50 {
		t.Fatalf("getMore maxTimeMS %d, want 50", ms)
	}
}
