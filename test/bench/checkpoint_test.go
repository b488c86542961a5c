package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/store/mongostore"
	"github.com/watchtree/watchtree/test/mongosim"
)

// checkpointEvents is the number of events per op of BenchmarkCheckpointWrites, as in the issue.
const checkpointEvents = 100_000

// checkpointCounter is an Observer counting the Checkpointed events of one stream.
type checkpointCounter struct {
	stream  string
	writes  atomic.Int64
	settled atomic.Int64
}

func (c *checkpointCounter) OnEvent(ev observe.Event) {
	if cp, ok := ev.(observe.Checkpointed); ok && cp.Stream == c.stream {
		c.writes.Add(1)
		c.settled.Add(int64(cp.Settled))
	}
}

// checkpointUpdates counts the update commands on the checkpoint collection of benchDB that
// mongosim recorded since start. ok is false when its command log (a ring) may have dropped
// some of them.
func checkpointUpdates(srv *mongosim.Server, since time.Time) (n int, ok bool) {
	recs := srv.Commands()
	ok = len(recs) > 0 && !recs[0].Time.After(since)
	for _, r := range recs {
		if r.Name != "update" || r.DB != benchDB || r.Time.Before(since) || r.Err != nil || len(r.Body) == 0 {
			continue
		}
		if coll, _ := r.Body[0].Value.(string); coll == mongostore.DefaultCheckpointCollection {
			n++
		}
	}
	return n, ok
}

// BenchmarkCheckpointWrites counts the checkpoint writes of a stream with the default
// CheckpointPolicy (SaveEvery 1,000, SaveInterval 1s) and a no-op handler, over 100,000 events
// already in a mongosim oplog (one op is 100,000 events, from Spawn to a graceful Stop with
// its final checkpoint). Writes are counted twice: on the wire, as update commands on the
// checkpoint collection in mongosim's command log (writes/100k-events, the figure), and by the
// Observer's Checkpointed events (observer-writes/100k-events; a cross-check, 0 when the
// runtime drops observer events). The requirement: far below one write per event.
func BenchmarkCheckpointWrites(b *testing.B) {
	srv, cl := startMongosim(b)
	var wire, observed, events int
	var elapsed time.Duration
	b.StopTimer()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("ckpt-%d", i)
		counter := &checkpointCounter{stream: name}
		rt, stopRuntime := startRuntime(b, cl, counter)
		b.Cleanup(stopRuntime)
		c := cl.Database(benchDB).Collection(name)
		at := startPoint()
		insertOrders(b, c, checkpointEvents)
		cd := newCountdown(checkpointEvents)
		since := time.Now()
		b.StartTimer()
		h, err := rt.Spawn(context.Background(), watchtree.Stream[order]{
			Name:          name,
			Collection:    name,
			StartPosition: watchtree.At(at),
			OnInsert: func(context.Context, *watchtree.Event[order]) error {
				cd.tick()
				return nil
			},
		})
		if err != nil {
			b.Fatalf("spawn: %v", err)
		}
		cd.wait(b, "checkpoint writes")
		stopHandle(b, h)
		b.StopTimer()
		elapsed += time.Since(since)
		stopRuntime() // the Observer has seen every event once the runtime has stopped
		n, ok := checkpointUpdates(srv, since)
		if !ok {
			b.Fatalf("mongosim's command log wrapped during the run; count with the Observer only")
		}
		wire += n
		observed += int(counter.writes.Load())
		events += checkpointEvents
	}
	per100k := func(n int) float64 { return float64(n) / float64(events) * 100_000 }
	b.ReportMetric(per100k(wire), "writes/100k-events")
	b.ReportMetric(per100k(observed), "observer-writes/100k-events")
	b.ReportMetric(float64(events)/elapsed.Seconds(), "events/s")
}
