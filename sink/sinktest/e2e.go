package sinktest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/sink"
)

// The relay test's shape: 10 writers insert 40 documents and update each 9 times (v 1..10 per
// document, concurrently across documents); a stream of 4 lanes relays them; a group of 3
// consumers reads them back.
const (
	relayDocs      = 40
	relayVersions  = 10
	relayWriters   = 10
	relayConsumers = 3
	relayLanes     = 4
)

// relayTimeout bounds the whole test; relayJoin bounds the wait for Relay.Joined and relayDrain
// the wait for the group to receive every event.
const (
	relayTimeout = 2 * time.Minute
	relayJoin    = 30 * time.Second
	relayDrain   = time.Minute
)

// Relay is the end-to-end test of a sink: a watchtree stream on a replica set publishes every
// change of a collection through the sink while writers change it, and a group of consumers,
// the broker's way of scaling out, reads the broker side.
type Relay struct {
	// Start starts the replica set the stream and the writers use, stopped when the test ends
	// (mongosim.Start in the sink modules' tests). Required.
	Start func(ctx context.Context) (ReplicaSet, error)
	// Root names the database of the runtime and of the collection docs that is written. Required.
	Root string
	// Publisher and Options make the stream's handler (sink.Handler). Publisher is required.
	Publisher sink.Publisher
	Options   sink.Options
	// Consume runs consumer c (0, 1 or 2) of the group until ctx ends, calling deliver for every
	// message it receives, before acknowledging it to the broker; it returns nil once ctx ended.
	// An error it returns before then fails the test. Each runs in a goroutine of its own, all
	// started before the first write. Required.
	Consume func(ctx context.Context, c int, deliver func(Received)) error
	// Joined, when set, says the group is ready to receive (a Kafka group's partitions are
	// assigned); it is polled for up to 30 s before the runtime starts.
	Joined func() bool
	// Stored, when set, returns every message the broker stores, each partition's in the
	// broker's order, with the positions Consume delivered them with (Received.Partition and
	// Offset): each stored message must have reached the group once, and each key's versions
	// must be stored in order, in one partition.
	Stored func(t *testing.T) []Received
}

// delivery is one message as consumer c of the group received it.
type delivery struct {
	consumer int
	Received
	v int64
}

// Run runs the relay and checks, on the consumers' side: every insert and update arrives
// exactly once (as many messages as writes, each with an event ID and a key, no ID twice, every
// (document, version) pair); each consumer sees each key's versions in increasing order; every
// consumer of the group received a share. With Stored, on the broker side: every stored message
// was delivered once, and each key's versions 1..10 are stored in order in one partition.
func (r Relay) Run(t *testing.T) {
	t.Helper()
	if r.Root == "" || r.Publisher == nil || r.Consume == nil {
		t.Fatal("sinktest.Relay: Root, Publisher and Consume are required")
	}
	_, client := startReplicaSet(t, "Relay", r.Start)
	const total = relayDocs * relayVersions
	ctx, cancel := context.WithTimeout(context.Background(), relayTimeout)
	defer cancel()

	// The group.
	var mu sync.Mutex
	var seen []delivery
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }
	cctx, stopConsumers := context.WithCancel(ctx)
	var group sync.WaitGroup
	defer func() { stopConsumers(); group.Wait() }() // on every way out
	errs := make(chan error, relayConsumers)
	for c := range relayConsumers {
		group.Add(1)
		go func() {
			defer group.Done()
			err := r.Consume(cctx, c, func(m Received) {
				mu.Lock()
				seen = append(seen, delivery{consumer: c, Received: m})
				mu.Unlock()
			})
			if err != nil && cctx.Err() == nil {
				errs <- fmt.Errorf("consumer %d: %w", c, err)
			}
		}()
	}
	pollUntil := func(what string, limit time.Duration, cond func() bool) bool {
		t.Helper()
		deadline := time.Now().Add(limit)
		for !cond() {
			if time.Now().After(deadline) {
				return false
			}
			select {
			case err := <-errs:
				t.Fatal(err)
			case <-time.After(20 * time.Millisecond): // a poll interval, bounded by the deadline
			}
		}
		return true
	}
	if r.Joined != nil && !pollUntil("the group to join", relayJoin, r.Joined) {
		t.Fatalf("the consumer group was not ready within %v", relayJoin)
	}

	// The stream. With no checkpoint, its position is captured before Spawn returns.
	rt, err := watchtree.New(watchtree.Config{Client: client, Database: r.Root, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(context.Background())
	h, err := sink.Handler[bson.Raw](r.Publisher, r.Options)
	if err != nil {
		t.Fatal(err)
	}
	hd, err := rt.Spawn(ctx, watchtree.Stream[bson.Raw]{Name: "relay", Collection: "docs", Lanes: relayLanes, OnChange: h})
	if err != nil {
		t.Fatal(err)
	}

	// The writers: writer w owns the documents w, w+10, ...; each is inserted with v 1, then
	// set to v 2..10.
	coll := client.Database(r.Root).Collection("docs")
	var wg sync.WaitGroup
	werr := make(chan error, relayWriters)
	start := time.Now()
	for w := range relayWriters {
		wg.Go(func() {
			for v := int64(1); v <= relayVersions; v++ {
				for doc := w; doc < relayDocs; doc += relayWriters {
					if err := writeVersion(ctx, coll, doc, v); err != nil {
						werr <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(werr)
	for err := range werr {
		t.Fatal(err)
	}

	pollUntil("the group to receive every event", relayDrain, func() bool { return count() >= total })
	elapsed := time.Since(start)
	stopConsumers()
	group.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st, err := hd.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stream: handled %d, dead-lettered %d; the group received %d of %d in %v", st.Handled, st.DeadLettered, len(seen), total, elapsed)
	if len(seen) != total {
		t.Fatalf("the consumer group received %d messages, want %d (every insert and update once)", len(seen), total)
	}
	checkDelivered(t, seen)
	if r.Stored != nil {
		checkStored(t, seen, r.Stored(t))
	}
}

// checkDelivered checks the group's view (see Relay.Run).
func checkDelivered(t *testing.T, seen []delivery) {
	t.Helper()
	ids := map[string]bool{}
	have := map[string]map[int64]bool{}     // key → versions received
	perConsumer := map[string]int64{}       // consumer/key → last v
	perCount := make([]int, relayConsumers) // messages per consumer
	for i := range seen {
		g := &seen[i]
		v, err := payloadVersion(g.Payload)
		if err != nil {
			t.Fatalf("consumer %d: %s: %v", g.consumer, g.where(), err)
		}
		g.v = v
		if g.ID == "" || g.Key == "" {
			t.Fatalf("consumer %d: %s: a message without its event ID (%q) or key (%q)", g.consumer, g.where(), g.ID, g.Key)
		}
		if ids[g.ID] {
			t.Fatalf("consumer %d: %s: event %s received twice", g.consumer, g.where(), g.ID)
		}
		ids[g.ID] = true
		if have[g.Key] == nil {
			have[g.Key] = map[int64]bool{}
		}
		have[g.Key][v] = true
		ck := fmt.Sprintf("%d/%s", g.consumer, g.Key)
		if v <= perConsumer[ck] {
			t.Errorf("consumer %d saw key %s v %d after v %d: per-key order broken on the consumer side", g.consumer, g.Key, v, perConsumer[ck])
		}
		perConsumer[ck] = v
		perCount[g.consumer]++
	}
	t.Logf("per consumer: %v", perCount)
	pairs := 0
	for _, vs := range have {
		pairs += len(vs)
	}
	if len(have) != relayDocs || pairs != relayDocs*relayVersions {
		t.Fatalf("%d keys and %d distinct (key, version) pairs arrived, want %d and %d", len(have), pairs, relayDocs, relayDocs*relayVersions)
	}
	for c, n := range perCount {
		if n == 0 {
			t.Errorf("consumer %d received nothing: the group did not share the work", c)
		}
	}
}

// checkStored checks the broker's stored order against what the group received (see
// Relay.Run). seen's versions are set by checkDelivered.
func checkStored(t *testing.T, seen []delivery, stored []Received) {
	t.Helper()
	byPos := map[[2]int64]delivery{}
	for _, g := range seen {
		pos := [2]int64{int64(g.Partition), g.Offset}
		if _, dup := byPos[pos]; dup {
			t.Fatalf("%s received twice", g.where())
		}
		byPos[pos] = g
	}
	last := map[string]int64{}
	keyPart := map[string]int32{}
	for _, r := range stored {
		g, ok := byPos[[2]int64{int64(r.Partition), r.Offset}]
		if !ok {
			t.Fatalf("%s was never delivered to the group", r.where())
		}
		if p, ok := keyPart[g.Key]; ok && p != r.Partition {
			t.Fatalf("key %s in partitions %d and %d: the message key does not pin the partition", g.Key, p, r.Partition)
		}
		keyPart[g.Key] = r.Partition
		if g.v != last[g.Key]+1 {
			t.Fatalf("%s: key %s v %d after v %d: the broker does not hold the key's events in order", r.where(), g.Key, g.v, last[g.Key])
		}
		last[g.Key] = g.v
	}
	if len(last) != relayDocs || len(stored) != relayDocs*relayVersions {
		t.Fatalf("%d keys and %d messages stored, want %d and %d", len(last), len(stored), relayDocs, relayDocs*relayVersions)
	}
	for k, v := range last {
		if v != relayVersions {
			t.Errorf("key %s ends at v %d, want %d", k, v, relayVersions)
		}
	}
}
