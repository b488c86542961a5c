package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree/store"
)

// result is what verify found in the database, order by order.
type result struct {
	written     int64 // orders in <db>.orders
	paid        int64 // orders with a payment
	doubled     int64 // orders with more than one payment
	deadLetters int64 // orders with a dead letter and no payment
	poisonDL    int64 // of which poison orders
	lost        int64 // orders with neither
	absorbed    int64 // redeliveries absorbed, summed over the payments
	// firstCharge is the first payment written after the SIGKILL by another pod than the
	// killed one (zero when none).
	firstCharge time.Time
	// lastSettled is the last settlement of the run: the latest payment (but the replay's) or
	// dead letter, by the pods' clocks.
	lastSettled time.Time
}

// verify compares the payments and the dead letters against the orders, one by one.
func (d *demo) verify(ctx context.Context, replayed int64) (result, error) {
	var res result
	var err error
	if res.written, err = d.db.Collection("orders").CountDocuments(ctx, bson.D{}); err != nil {
		return res, fmt.Errorf("verify: %w", err)
	}
	cur, err := d.db.Collection("payments").Aggregate(ctx, mongo.Pipeline{
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$order"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}},
			{Key: "redeliveries", Value: bson.D{{Key: "$sum", Value: "$redeliveries"}}}}}},
	})
	if err != nil {
		return res, fmt.Errorf("verify: %w", err)
	}
	var groups []struct {
		ID           int64 `bson:"_id"`
		N            int64 `bson:"n"`
		Redeliveries int64 `bson:"redeliveries"`
	}
	if err := cur.All(ctx, &groups); err != nil {
		return res, fmt.Errorf("verify: %w", err)
	}
	done := make(map[int64]bool, res.written)
	for _, g := range groups {
		done[g.ID] = true
		res.paid++
		res.absorbed += g.Redeliveries
		if g.N > 1 {
			res.doubled++
		}
	}
	dls, err := d.dls.ListDeadLetters(ctx, store.Scope{Stream: ordersStream}, 0)
	if err != nil {
		return res, fmt.Errorf("verify: %w", err)
	}
	for _, dl := range dls {
		if dl.CreatedAt.After(res.lastSettled) {
			res.lastSettled = dl.CreatedAt
		}
		id, ok := bson.Raw(dl.DocumentKey).Lookup("_id").AsInt64OK()
		if !ok || done[id] {
			continue
		}
		done[id] = true
		res.deadLetters++
		if d.cfg.poisonEvery > 0 && id%int64(d.cfg.poisonEvery) == 0 {
			res.poisonDL++
		}
	}
	for i := int64(1); i <= res.written; i++ {
		if !done[i] {
			res.lost++
		}
	}
	var last Payment
	err = d.db.Collection("payments").FindOne(ctx, bson.D{{Key: "order", Value: bson.D{{Key: "$ne", Value: replayed}}}},
		options.FindOne().SetSort(bson.D{{Key: "at", Value: -1}})).Decode(&last)
	if err != nil && err != mongo.ErrNoDocuments {
		return res, fmt.Errorf("verify: %w", err)
	}
	if last.At.After(res.lastSettled) {
		res.lastSettled = last.At
	}
	d.mu.Lock()
	killedAt, killed := d.killedAt, d.killedPod
	d.mu.Unlock()
	if !killedAt.IsZero() {
		var first Payment
		err := d.db.Collection("payments").FindOne(ctx, bson.D{{Key: "pod", Value: bson.D{{Key: "$ne", Value: killed}}},
			{Key: "at", Value: bson.D{{Key: "$gt", Value: killedAt}}}, {Key: "order", Value: bson.D{{Key: "$ne", Value: replayed}}}},
			options.FindOne().SetSort(bson.D{{Key: "at", Value: 1}})).Decode(&first)
		if err == nil {
			res.firstCharge = first.At
		} else if err != mongo.ErrNoDocuments {
			return res, fmt.Errorf("verify: %w", err)
		}
	}
	return res, nil
}

// printSummary prints the table; every figure comes from this run: the database (orders,
// payments, dead letters), the pods' Observer events, or the demo's own clock.
func (d *demo) printSummary(res result, replayed int64, caches []report, start time.Time, loadTook time.Duration) {
	settleTook := res.lastSettled.Sub(start)
	d.mu.Lock()
	restarts, backoffs, retries, dlEvents := d.restarts, d.backoffs, d.retries, d.deadLetters
	killedAt, killed, takeover, takeoverPos, cu := d.killedAt, d.killedPod, d.takeover, d.takeoverPos, d.catchUp
	pods := append([]*podProc(nil), d.pods...)
	d.mu.Unlock()
	var declined, failed, invalidations int64
	for _, p := range pods {
		c := p.latestCounts()
		declined += c.Declined
		failed += c.Failed
		invalidations += c.Invalidations
	}

	d.printf("\nsummary (counted in the database after the run, order by order, unless said otherwise)\n")
	tw := tabwriter.NewWriter(d.out, 0, 0, 2, ' ', 0)
	row := func(name string, v any, note string, args ...any) {
		fmt.Fprintf(tw, "  %s\t%v\t%s\n", name, v, fmt.Sprintf(note, args...))
	}
	row("written", res.written, "orders inserted by the load generator (%.0f/s over %v)",
		float64(res.written)/loadTook.Seconds(), loadTook.Round(time.Millisecond))
	row("handled", res.paid+res.deadLetters, "= charged %d + dead letters %d: orders settled", res.paid, res.deadLetters)
	replayNote := ""
	if replayed > 0 {
		replayNote = fmt.Sprintf(", order %d by the dead-letter replay", replayed)
	}
	row("  charged", res.paid, "orders with a payment in payments%s", replayNote)
	row("  dead letters", res.deadLetters, "orders left in the dead letters (%d poison), after %d declined attempts each; %d were dead-lettered, %d replayed",
		res.poisonDL, chargeAttempts, res.deadLetters+min(replayed, 1), min(replayed, 1))
	row("lost", res.lost, "= written - handled: orders with neither a payment nor a dead letter (must be 0)")
	row("charged twice", res.doubled, "orders with more than one payment (must be 0)")
	row("duplicates absorbed", res.absorbed, "redeliveries (after the cursor restart and the failover) whose payment existed: the event ID is the payment's key")
	row("retries", retries, "handler attempts retried (RetryScheduled events): %d before each of the %d dead-letter writes "+
		"(a redelivered dead letter is written again) + %d others (failed payment writes: %d)",
		chargeAttempts-1, dlEvents, retries-(chargeAttempts-1)*dlEvents, failed)
	row("restarts", restarts, "supervisor restarts of orders after the cursor kill (Restarted events), after %d backoff(s)", backoffs)
	if !killedAt.IsZero() && takeover.Pod != "" {
		lease := fmt.Sprintf("lease acquired after %v (it expires TTL %v after its last renewal)",
			takeover.At.Sub(killedAt).Round(10*time.Millisecond), d.cfg.leaseTTL)
		if res.firstCharge.IsZero() {
			row("failover", "-", "no order came after the SIGKILL of %s to time it; %s resumed from the %s, %s", killed, takeover.Pod, takeoverPos, lease)
		} else {
			row("failover", res.firstCharge.Sub(killedAt).Round(10*time.Millisecond), "SIGKILL of %s to the first charge by %s, resumed from the %s; %s",
				killed, takeover.Pod, takeoverPos, lease)
		}
	}
	during := ""
	if !killedAt.IsZero() && killedAt.Before(res.lastSettled) {
		during = ", failover included"
	}
	row("throughput", fmt.Sprintf("%.0f/s", float64(res.written)/settleTook.Seconds()),
		"orders handled per second from the first write to the last settlement (%v%s; at most the load's pace)",
		settleTook.Round(10*time.Millisecond), during)
	if cu.orders > 0 {
		row("catch-up", fmt.Sprintf("%.0f/s", float64(cu.orders)/cu.took.Seconds()),
			"orders handled per second by the new leader working off the %d orders written during the failover (%d in %v)",
			cu.backlog, cu.orders, cu.took.Round(10*time.Millisecond))
	}
	var cacheNotes []string
	for _, c := range caches {
		cacheNotes = append(cacheNotes, fmt.Sprintf("%s %d cached, %d stale", c.Pod, c.Cached, c.Stale))
	}
	row("product changes", d.productWrites.Load(), "each pod's products stream evicted its cached prices (%d evictions in all); after catching up: %s",
		invalidations, strings.Join(cacheNotes, "; "))
	_ = tw.Flush()
}
