package integration_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
)

// TestLanesPerKeyOrder: with 8 lanes and random handler delays, each document's events are
// handled in order (every post-image version in sequence) while different documents run in
// parallel; with one lane, handling is strictly sequential.
func TestLanesPerKeyOrder(t *testing.T) {
	const docs, versions = 16, 10
	for _, lanes := range []int{8, 1} {
		t.Run(fmt.Sprintf("lanes=%d", lanes), func(t *testing.T) {
			e := newEnv(t)
			e.createColl("orders", true) // post-images give each update's exact version
			r := e.startRuntime(nil)
			var mu sync.Mutex
			seen := map[int64][]int{}
			var inFlight, maxInFlight atomic.Int32
			h := r.spawn(t, watchtree.Stream[Order]{Name: "lanes", Collection: "orders", Lanes: lanes,
				FullDocument: watchtree.FullDocumentRequired,
				OnChange: func(_ context.Context, ev *watchtree.Event[Order]) error {
					n := inFlight.Add(1)
					defer inFlight.Add(-1)
					for {
						m := maxInFlight.Load()
						if n <= m || maxInFlight.CompareAndSwap(m, n) {
							break
						}
					}
					time.Sleep(time.Duration(rand.IntN(1000)) * time.Microsecond) // the handler's "work"
					mu.Lock()
					seen[ev.FullDocument.ID] = append(seen[ev.FullDocument.ID], ev.FullDocument.V)
					mu.Unlock()
					return nil
				}})
			r.waitRunning(t, h)
			coll := e.db.Collection("orders")
			e.must(func(ctx context.Context) error {
				for d := int64(1); d <= docs; d++ {
					if _, err := coll.InsertOne(ctx, Order{ID: d}); err != nil {
						return err
					}
				}
				for v := 1; v <= versions; v++ { // interleave the documents' updates
					for d := int64(1); d <= docs; d++ {
						if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: d}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: v}}}}); err != nil {
							return err
						}
					}
				}
				return nil
			})
			want := make([]int, versions+1)
			for i := range want {
				want[i] = i
			}
			waitFor(t, "every version of every document handled", func() bool {
				mu.Lock()
				defer mu.Unlock()
				n := 0
				for _, s := range seen {
					n += len(s)
				}
				return n >= docs*(versions+1)
			})
			mu.Lock()
			defer mu.Unlock()
			for d := int64(1); d <= docs; d++ {
				if !slices.Equal(seen[d], want) {
					t.Errorf("document %d handled in order %v, want %v", d, seen[d], want)
				}
			}
			switch m := maxInFlight.Load(); {
			case lanes == 1 && m != 1:
				t.Errorf("one lane ran %d handlers at once, want strictly sequential", m)
			case lanes > 1 && m < 2:
				t.Errorf("%d lanes never ran two handlers at once (max %d)", lanes, m)
			}
		})
	}
}

// TestCheckpointNeverPassesUnsettled: one event is held in its handler while the other lanes
// go on. The checkpoint advances exactly up to the event before it and no further, however
// many later events settle; once released, it passes everything.
func TestCheckpointNeverPassesUnsettled(t *testing.T) {
	const total, held = 40, 5
	e := newEnv(t)
	r := e.startRuntime(nil)
	got, hold := newHandled(), newHoldOrder(t)
	h := r.spawn(t, watchtree.Stream[Order]{Name: "lwm", Collection: "orders", Lanes: 4,
		Checkpoint: watchtree.CheckpointPolicy{SaveEvery: 1, SaveInterval: 20 * time.Millisecond},
		OnInsert:   hold.handler(held, got)})
	r.waitRunning(t, h)
	e.insertOrders("orders", 1, total)
	// The other lanes go on; the lane of the order before the held one may run behind them, so
	// wait for that order itself, not only for a count.
	var id4 string
	waitFor(t, fmt.Sprintf("order %d (before the held one) and the events of the other lanes handled", held-1), func() bool {
		id4 = eventOf(got, held-1)
		return id4 != "" && got.distinct() >= total/3
	})
	waitFor(t, "the checkpoint to reach the event before the held one", func() bool {
		cp, ok := e.checkpoint("lwm")
		return ok && tokenData(cp.Token) >= id4
	})
	// More events settle behind the held one (SaveEvery 1: each settlement is a write trigger,
	// but the low-water mark cannot move). Wait until the dispatcher reports them settled, then
	// check the stored checkpoint and every checkpoint ever written.
	e.insertOrders("orders", total+1, total+10)
	waitFor(t, "the new events settled", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := h.Status(ctx)
		return err == nil && st.Settled >= uint64(got.distinct()) && got.distinct() > total*2/5
	})
	cp, _ := e.checkpoint("lwm")
	if d := tokenData(cp.Token); d != id4 {
		t.Errorf("checkpoint %s while order %d is in flight, want exactly the event before it (%s)", d, held, id4)
	}
	for _, ev := range r.obs.find(ofType[observe.Checkpointed]) {
		if d := tokenData(ev.(observe.Checkpointed).Token); d > id4 {
			t.Errorf("a checkpoint %s passed the held event (last good %s)", d, id4)
		}
	}

	hold.Release()
	waitOrders(t, got, total+10)
	waitFor(t, "the checkpoint to pass every event", func() bool {
		cp, ok := e.checkpoint("lwm")
		return ok && checkpointPastAll(e, tokenData(cp.Token))
	})
}
