package integration_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/watchtree/watchtree"
)

// TestSharedQuietMemberLagBesideABusyOne: a member whose collection is quiet shares its hub with
// a collection written more often than MaxAwaitTime. Then every batch of the hub's cursor ends
// with the busy collection's event, whose token is no position for the quiet member (a
// collection stream cannot resume from another collection's event), and no empty getMore gives
// it a high-water mark. Its lag must still be true: the hub has read every event of its
// collection up to the busy one's, so Status.ReadThrough keeps within MaxAwaitTime or so of
// now, not at the last high-water mark before the load began.
func TestSharedQuietMemberLagBesideABusyOne(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	busy, quiet := newHandled(), newHandled()
	hb := r.spawn(t, sharedOrders("busy", "lagbusy", busy))
	hq := r.spawn(t, sharedOrders("quiet", "lagquiet", quiet))
	r.waitRunning(t, hb)
	r.waitRunning(t, hq)
	for _, h := range []*watchtree.Handle{hb, hq} {
		waitFor(t, h.Name()+" attached", func() bool { return status(t, h).Cursor == "shared (attached)" })
	}

	// The busy collection gets an insert every 20ms until the test ends.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	writeErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		c := e.db.Collection("lagbusy")
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for id := int64(1); ; id++ {
			if _, err := c.InsertOne(ctx, Order{ID: id, Amount: 1, Key: "k"}); err != nil {
				if ctx.Err() == nil {
					writeErr <- err
				}
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	defer func() {
		cancel()
		wg.Wait()
	}()

	// 3.5 s of load at least (175 inserts at 20ms apiece): a quiet member that followed
	// high-water marks only would read 3.5 s or more of lag by then.
	waitFor(t, "175 busy orders handled", func() bool {
		select {
		case err := <-writeErr:
			t.Fatalf("busy writer: %v", err)
		default:
		}
		return busy.distinct() >= 175
	})
	st := status(t, hq)
	if st.ReadThrough.IsZero() {
		t.Fatalf("quiet: Status.ReadThrough is zero (lag unknown) after %d busy events", busy.distinct())
	}
	if lag := time.Since(st.ReadThrough); lag >= 2*time.Second {
		t.Fatalf("quiet: lag %v beside a busy collection (ReadThrough %v), want < 2s: the hub read through it",
			lag.Round(time.Millisecond), st.ReadThrough)
	}
	if st.Cursor != "shared (attached)" {
		t.Fatalf("quiet: Cursor %q, want shared (attached): the check is about a member the hub feeds", st.Cursor)
	}
	if d := quiet.distinct(); d != 0 {
		t.Errorf("quiet: %d events handled from a collection nobody wrote", d)
	}
}
