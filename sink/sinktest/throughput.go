package sinktest

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree"
)

// The throughput comparison's shape: 8 concurrent publishers, as 8 lanes would be, of 250
// events each per run, published in benchTurns turns of 50 per publisher that alternate
// between the three (see Run).
const (
	benchPublishers   = 8
	benchPerPublisher = 250
	benchTurns        = 5
)

// publishFunc publishes one event and returns once the broker acknowledged it.
type publishFunc = func(*watchtree.Event[bson.Raw]) error

// Throughput is a sink's benchmark row: events/s into the broker through the sink's handler
// against two hand-written publish loops on the same broker, in the same run.
type Throughput struct {
	// Namespace is the events' (an insert of an order document each, with a new _id per event:
	// a repeated ID would be a duplicate, cheaper to acknowledge). Required.
	Namespace watchtree.Namespace
	// Sink is the handler sink.Handler made for the sink's Publisher. Required.
	Sink watchtree.Handler[bson.Raw]
	// Loop is the least a correct hand-written publisher does (the raw BSON event as payload,
	// the event ID as the dedup key, the broker's ack awaited).
	Loop func(ev *watchtree.Event[bson.Raw]) error
	// LoopJSON is Loop with the sink's payload, the event as canonical Extended JSON.
	LoopJSON func(ev *watchtree.Event[bson.Raw]) error
	// Publish, when set, is the hand-written publish of an event with a given payload, and
	// Loop and LoopJSON, when nil, are Publish of the raw event and of its canonical Extended
	// JSON (encoded inside the timed loop). A broker whose two loops differ in more than the
	// payload (Kafka's record key) sets Loop and LoopJSON instead.
	Publish func(ev *watchtree.Event[bson.Raw], payload []byte) error
	// AfterRun, when set, runs with the timer stopped after each turn of each of the three
	// (RabbitMQ purges its queue there).
	AfterRun func(b *testing.B)
}

// Run runs the three, each with 8 concurrent publishers of 250 new events per round. A round
// is 5 turns of 50 events per publisher for each of the three in alternation (the order rotates
// from turn to turn): a load spike on a shared host or a broker's pause (a disk sync, a GC)
// then falls on all three alike instead of on the one whose single turn it met, which made the
// ratio of one round swing by ±30% on a busy host. It reports sink-events/s, loop-events/s and
// loopjson-events/s, ratio (sink / loop) and ratio-same-payload (sink / loopjson).
func (th Throughput) Run(b *testing.B) {
	b.Helper()
	if th.Publish != nil {
		if th.Loop == nil {
			th.Loop = func(ev *watchtree.Event[bson.Raw]) error { return th.Publish(ev, ev.Raw()) }
		}
		if th.LoopJSON == nil {
			th.LoopJSON = func(ev *watchtree.Event[bson.Raw]) error {
				payload, err := bson.MarshalExtJSON(ev.Raw(), true, false)
				if err != nil {
					return err
				}
				return th.Publish(ev, payload)
			}
		}
	}
	if th.Namespace.DB == "" || th.Sink == nil || th.Loop == nil || th.LoopJSON == nil {
		b.Fatal("sinktest.Throughput: Namespace, Sink, and Publish or both Loop and LoopJSON are required")
	}
	ctx := context.Background()
	viaSink := func(ev *watchtree.Event[bson.Raw]) error { return th.Sink(ctx, ev) }
	kinds := []publishFunc{viaSink, th.Loop, th.LoopJSON}
	took := make([]time.Duration, len(kinds))
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		evs := make([][][]*watchtree.Event[bson.Raw], len(kinds))
		for k := range kinds {
			evs[k] = benchEvents(b, th.Namespace)
		}
		b.StartTimer()
		const per = benchPerPublisher / benchTurns
		for turn := range benchTurns {
			for j := range kinds {
				k := (i*benchTurns + turn + j) % len(kinds) // rotate which goes first
				part := make([][]*watchtree.Event[bson.Raw], len(evs[k]))
				for w, mine := range evs[k] {
					part[w] = mine[turn*per : (turn+1)*per]
				}
				took[k] += benchRun(b, part, kinds[k])
				if th.AfterRun != nil {
					b.StopTimer()
					th.AfterRun(b)
					b.StartTimer()
				}
			}
		}
	}
	n := float64(b.N * benchPublishers * benchPerPublisher)
	sinkRate, loopRate, jsonRate := n/took[0].Seconds(), n/took[1].Seconds(), n/took[2].Seconds()
	b.ReportMetric(sinkRate, "sink-events/s")
	b.ReportMetric(loopRate, "loop-events/s")
	b.ReportMetric(jsonRate, "loopjson-events/s")
	b.ReportMetric(sinkRate/loopRate, "ratio")
	b.ReportMetric(sinkRate/jsonRate, "ratio-same-payload")
}

// benchEvents builds each publisher's events: inserts of order documents with new _ids.
func benchEvents(b *testing.B, ns watchtree.Namespace) [][]*watchtree.Event[bson.Raw] {
	out := make([][]*watchtree.Event[bson.Raw], benchPublishers)
	for w := range out {
		for i := range benchPerPublisher {
			doc, err := bson.Marshal(bson.D{{Key: "_id", Value: w*benchPerPublisher + i}, {Key: "customer", Value: "c-1842"},
				{Key: "amount", Value: 129.5}, {Key: "status", Value: "new"}, {Key: "items", Value: bson.A{"sku-1", "sku-2", "sku-3"}}})
			if err != nil {
				b.Fatal(err)
			}
			raw := bson.Raw(doc)
			ev, err := watchtree.TestEvent[bson.Raw]{Namespace: ns, FullDocument: &raw}.Build()
			if err != nil {
				b.Fatal(err)
			}
			out[w] = append(out[w], ev)
		}
	}
	return out
}

// benchRun publishes each publisher's events concurrently and returns the time it took.
func benchRun(b *testing.B, evs [][]*watchtree.Event[bson.Raw], publish publishFunc) time.Duration {
	var wg sync.WaitGroup
	errs := make(chan error, len(evs))
	start := time.Now()
	for _, mine := range evs {
		wg.Go(func() {
			for _, ev := range mine {
				if err := publish(ev); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	d := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return d
}
