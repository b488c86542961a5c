package integration_test

import (
	"context"
	"fmt"
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
	qs := sharedOrders("quiet", "lagquiet", quiet)
	// Its idle tokens are written at once, so that the checkpoint shows where its position is.
	qs.Checkpoint.IdleInterval = 50 * time.Millisecond
	hq := r.spawn(t, qs)
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

	// Its position moves too, and so its checkpoint: the hub probes for a high-water mark of
	// its own every few seconds while its cursor yields none, and the member takes it once the
	// hub has read past it. Without that, the quiet checkpoint would stay at the last
	// high-water mark before the load until the load stops, and age out of the oplog under a
	// load longer than the oplog window.
	mark := status(t, hb).Checkpoint // a busy event's token, written during the load
	if tokenData(mark) == "" {
		t.Fatal("busy: no checkpoint written during the load")
	}
	waitFor(t, "the quiet checkpoint past a busy event's position, with the load going on", func() bool {
		select {
		case err := <-writeErr:
			t.Fatalf("busy writer: %v", err)
		default:
		}
		return tokenData(status(t, hq).Checkpoint) > tokenData(mark)
	}, func() string {
		st := status(t, hq)
		return fmt.Sprintf("quiet checkpoint %s (%s, written %v), busy mark %s", tokenData(st.Checkpoint),
			st.CheckpointSource, st.CheckpointAt.Format(time.TimeOnly), tokenData(mark))
	})
	if d := quiet.distinct(); d != 0 {
		t.Errorf("quiet: %d events handled from a collection nobody wrote", d)
	}
}
