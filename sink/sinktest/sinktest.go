// Package sinktest is the contract suite every sink's Publisher must pass (package sink says
// what the contract is). A sink's own tests call Run with a Broker that makes fresh
// destinations on a real broker:
//
//	func TestContract(t *testing.T) {
//		sinktest.Run(t, sinktest.Broker{New: newDestination, Down: downPublisher, TooLarge: 2 << 20})
//	}
//
// The suite drives the handler that sink.Handler makes with events built by
// watchtree.TestEvent, the way a stream's lanes would, and reads back what the broker holds.
// Every case bounds its context (20 s), so a broker that hangs fails the case instead of the
// whole test binary. Nothing waits by sleeping: a broker's acknowledgement means the message is
// stored, so it is read back at once.
//
// Beyond the contract, the package holds the tests every sink module runs against its broker
// and a replica set, each given only what differs between brokers: Drill, the SIGKILL drill (its
// workers are the test binary itself, see DrillWorker); Relay, a stream relaying writes to the
// broker, read back by a consumer group; and Throughput, the sink's benchmark row against
// hand-written publish loops. They take the replica set's URI from the caller: the sink modules
// start mongosim, a module of its own that the library does not import.
package sinktest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/sink"
)

// caseTimeout bounds every publish and read a case makes.
const caseTimeout = 20 * time.Second

// Broker is one sink under test.
type Broker struct {
	// New returns a Publisher on a fresh destination of the broker (a stream, queue or topic of
	// this call alone) that takes every subject starting with root+"." and keeps what it
	// takes, and the function that reads back, in the broker's order, every message it holds.
	// New registers its own cleanup (t.Cleanup). Required.
	New func(t *testing.T, root string) (sink.Publisher, func(t *testing.T) []Received)
	// Down returns a Publisher whose broker is unreachable or refuses every message: its
	// Publish must fail with a retryable (not watchtree.Permanent) error. Required.
	Down func(t *testing.T) sink.Publisher
	// TooLarge is a payload size, in bytes, that the destinations New makes refuse as too
	// large. Required (> 0).
	TooLarge int
	// Dedups says that the broker drops a second message with the ID of one it holds (within
	// its deduplication window): the suite then checks that a republished event is stored once.
	Dedups bool
}

// Received is one message as the broker holds it.
type Received struct {
	ID      string // the broker's deduplication key (the event ID)
	Key     string // the message key (the document key)
	Subject string // the subject, topic or routing key
	Payload []byte
	// Partition and Offset are the message's position where the broker keeps one (Kafka: its
	// partition and offset; JetStream: partition 0 and the stream sequence); 0 and 0 where it
	// keeps none (a RabbitMQ queue). Drill checks that a key stays in one partition; Relay,
	// given Relay.Stored, matches what the group received to what the broker stored by it.
	Partition int32
	Offset    int64
}

// where names r's position for a failure message.
func (r Received) where() string {
	if r.Partition == 0 && r.Offset == 0 {
		return r.Subject
	}
	return fmt.Sprintf("%s[%d]@%d", r.Subject, r.Partition, r.Offset)
}

// Run runs the contract's cases as subtests of t; New is called once per subtest.
func Run(t *testing.T, b Broker) {
	if b.New == nil || b.Down == nil || b.TooLarge <= 0 {
		t.Fatal("sinktest.Broker: New, Down and TooLarge (> 0) are required")
	}
	t.Run("AckBeforeSettle", func(t *testing.T) { ackBeforeSettle(t, b) })
	t.Run("DedupID", func(t *testing.T) { dedupID(t, b) })
	t.Run("KeyIsDocumentKey", func(t *testing.T) { keyIsDocumentKey(t, b) })
	t.Run("PerKeyOrderUnderConcurrentPublishes", func(t *testing.T) { perKeyOrder(t, b) })
	t.Run("SubjectTemplate", func(t *testing.T) { subjectTemplate(t, b) })
	t.Run("Encoder", func(t *testing.T) { encoder(t, b) })
	t.Run("TooLargeIsPermanent", func(t *testing.T) { tooLarge(t, b) })
	t.Run("BrokerDownIsRetryable", func(t *testing.T) { brokerDown(t, b) })
}

// PublishOne publishes one insert of {_id: 1} into db.c (subject db.c.insert by the default
// template) through the handler sink.Handler makes over p, with a payload of payload zero bytes
// (0: the default payload, the event as canonical Extended JSON), and returns the handler's
// error. A sink's own failure tests use it: a broker's size limit, a missing destination, a
// broker that went away.
func PublishOne(t testing.TB, ctx context.Context, p sink.Publisher, db string, payload int) error {
	t.Helper()
	o := sink.Options{}
	if payload > 0 {
		o.Encode = func(bson.Raw) ([]byte, error) { return make([]byte, payload), nil }
	}
	h, err := sink.Handler[bson.Raw](p, o)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := watchtree.TestEvent[bson.Raw]{Namespace: watchtree.Namespace{DB: db, Coll: "c"}, DocumentKey: bson.D{{Key: "_id", Value: 1}}}.Build()
	if err != nil {
		t.Fatal(err)
	}
	return h(ctx, ev)
}

// doc is the suite's document: V is its version, counted per key.
type doc struct {
	ID any   `bson:"_id"`
	V  int64 `bson:"v"`
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	t.Cleanup(cancel)
	return ctx
}

// newRoot returns a subject root unique to the call.
func newRoot() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "wtsinktest" + hex.EncodeToString(b[:])
}

func handler(t *testing.T, p sink.Publisher, o sink.Options) watchtree.Handler[doc] {
	t.Helper()
	h, err := sink.Handler[doc](p, o)
	if err != nil {
		t.Fatalf("sink.Handler: %v", err)
	}
	return h
}

// event builds an insert of {_id: id, v: v} in root.coll (the stream named "sinktest").
func event(t *testing.T, root string, id any, v int64) *watchtree.Event[doc] {
	t.Helper()
	ev, err := watchtree.TestEvent[doc]{
		Stream:       "sinktest",
		Namespace:    watchtree.Namespace{DB: root, Coll: "coll"},
		FullDocument: &doc{ID: id, V: v},
	}.Build()
	if err != nil {
		t.Fatalf("TestEvent.Build: %v", err)
	}
	return ev
}

// version reads fullDocument.v from a default (canonical Extended JSON) payload.
func version(t *testing.T, payload []byte) int64 {
	t.Helper()
	var ev bson.Raw
	if err := bson.UnmarshalExtJSON(payload, true, &ev); err != nil {
		t.Fatalf("payload is not canonical Extended JSON: %v: %q", err, payload)
	}
	v, err := ev.LookupErr("fullDocument", "v")
	if err != nil {
		t.Fatalf("payload has no fullDocument.v: %v", err)
	}
	n, ok := v.Int64OK()
	if !ok {
		t.Fatalf("fullDocument.v is %v, not an int64", v)
	}
	return n
}

func keyOf(t *testing.T, ev *watchtree.Event[doc]) string {
	t.Helper()
	k, err := bson.MarshalExtJSON(ev.DocumentKey(), true, false)
	if err != nil {
		t.Fatal(err)
	}
	return string(k)
}

// ackBeforeSettle: once the handler returns nil, the broker holds the message: it is read back
// at once, without waiting.
func ackBeforeSettle(t *testing.T, b Broker) {
	root := newRoot()
	p, read := b.New(t, root)
	h := handler(t, p, sink.Options{})
	ctx := testCtx(t)
	for i := range 5 {
		ev := event(t, root, i, 1)
		id := ev.ID()
		if err := h(ctx, ev); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		got := read(t)
		if len(got) != i+1 || got[i].ID != id {
			t.Fatalf("after the handler returned for event %d the broker holds %d messages (last %v); want %d, the last with ID %s",
				i, len(got), lastID(got), i+1, id)
		}
		if version(t, got[i].Payload) != 1 {
			t.Fatalf("event %d: payload is not the event's", i)
		}
	}
}

func lastID(rs []Received) string {
	if len(rs) == 0 {
		return "none"
	}
	return rs[len(rs)-1].ID
}

// dedupID: every message carries the event ID as its deduplication key; where the broker
// deduplicates, a republished event (a redelivery after a crash before the checkpoint) is
// stored once.
func dedupID(t *testing.T, b Broker) {
	root := newRoot()
	p, read := b.New(t, root)
	h := handler(t, p, sink.Options{})
	ctx := testCtx(t)
	var ids []string
	for i := range 3 {
		ev := event(t, root, i, 1)
		ids = append(ids, ev.ID())
		if err := h(ctx, ev); err != nil {
			t.Fatal(err)
		}
		if b.Dedups { // the same event again, as after a crash before its checkpoint
			if err := h(ctx, ev); err != nil {
				t.Fatalf("republish of event %d: %v", i, err)
			}
		}
	}
	got := read(t)
	if len(got) != 3 {
		t.Fatalf("the broker holds %d messages, want 3", len(got))
	}
	for i, r := range got {
		if r.ID != ids[i] {
			t.Errorf("message %d: dedup ID %q, want the event ID %q", i, r.ID, ids[i])
		}
	}
}

// keyIsDocumentKey: the message key is the document key as canonical Extended JSON, for _ids
// of several BSON types and a compound key.
func keyIsDocumentKey(t *testing.T, b Broker) {
	root := newRoot()
	p, read := b.New(t, root)
	h := handler(t, p, sink.Options{})
	ctx := testCtx(t)
	ids := []any{int32(7), int64(1) << 40, "order-9", bson.NewObjectID(), bson.D{{Key: "a", Value: 1}, {Key: "b", Value: "x"}}}
	var want []string
	for _, id := range ids {
		ev := event(t, root, id, 1)
		want = append(want, keyOf(t, ev))
		if err := h(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	wantEach(t, read(t), "key", func(r Received) string { return r.Key }, want)
}

// perKeyOrder: 8 lanes publish concurrently, each the events of its keys in order (as a
// stream's lanes do); the broker holds every event once, and each key's in order.
func perKeyOrder(t *testing.T, b Broker) {
	const lanes, keys, versions = 8, 40, 25
	root := newRoot()
	p, read := b.New(t, root)
	h := handler(t, p, sink.Options{})
	ctx := testCtx(t)
	// Each lane's events, keys interleaved: version 1 of its keys, then version 2, ...
	perLane := make([][]*watchtree.Event[doc], lanes)
	for v := int64(1); v <= versions; v++ {
		for k := range keys {
			id := fmt.Sprintf("k%02d", k)
			f := fnv.New32a()
			_, _ = f.Write([]byte(id))
			l := f.Sum32() % lanes
			perLane[l] = append(perLane[l], event(t, root, id, v))
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, lanes)
	for l := range lanes {
		wg.Go(func() {
			for _, ev := range perLane[l] {
				if err := h(ctx, ev); err != nil {
					errs <- fmt.Errorf("lane %d: %w", l, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := read(t)
	if len(got) != keys*versions {
		t.Fatalf("the broker holds %d messages, want %d", len(got), keys*versions)
	}
	last := map[string]int64{}
	for i, r := range got {
		v := version(t, r.Payload)
		if v != last[r.Key]+1 {
			t.Fatalf("message %d: key %s version %d after version %d: per-key order broken", i, r.Key, v, last[r.Key])
		}
		last[r.Key] = v
	}
	if len(last) != keys {
		t.Fatalf("%d keys arrived, want %d", len(last), keys)
	}
}

// subjectTemplate: the default template and a custom one, over the namespace, the operation
// and the stream name.
func subjectTemplate(t *testing.T, b Broker) {
	root := newRoot()
	p, read := b.New(t, root)
	ctx := testCtx(t)
	def := handler(t, p, sink.Options{})
	custom := handler(t, p, sink.Options{Subject: "{db}.cdc.{stream}.{coll}.{op}"})
	if err := def(ctx, event(t, root, 1, 1)); err != nil {
		t.Fatal(err)
	}
	upd, err := watchtree.TestEvent[doc]{Stream: "sinktest", OperationType: watchtree.OpDelete,
		Namespace: watchtree.Namespace{DB: root, Coll: "people"}, DocumentKey: bson.D{{Key: "_id", Value: 2}}}.Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := custom(ctx, upd); err != nil {
		t.Fatal(err)
	}
	got := read(t)
	want := []string{root + ".coll.insert", root + ".cdc.sinktest.people.delete"}
	wantEach(t, got, "subject", func(r Received) string { return r.Subject }, want)
}

// wantEach fails t unless got holds len(want) messages whose field (named what) is want's, in
// order; it names each message that differs.
func wantEach(t *testing.T, got []Received, what string, field func(Received) string, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("the broker holds %d messages, want %d", len(got), len(want))
	}
	for i := range want {
		if f := field(got[i]); f != want[i] {
			t.Errorf("message %d: %s %q, want %q", i, what, f, want[i])
		}
	}
}

// encoder: Options.Encode's bytes are the payload; an Encode error is permanent and publishes
// nothing.
func encoder(t *testing.T, b Broker) {
	root := newRoot()
	p, read := b.New(t, root)
	ctx := testCtx(t)
	h := handler(t, p, sink.Options{Encode: func(raw bson.Raw) ([]byte, error) {
		op, _ := raw.Lookup("operationType").StringValueOK()
		v, _ := raw.Lookup("fullDocument", "v").Int64OK()
		if v < 0 {
			return nil, errors.New("negative version")
		}
		return fmt.Appendf(nil, "%s v=%d", op, v), nil
	}})
	if err := h(ctx, event(t, root, 1, 5)); err != nil {
		t.Fatal(err)
	}
	err := h(ctx, event(t, root, 2, -1))
	if err == nil || !watchtree.IsPermanent(err) {
		t.Fatalf("an Encode error gave %v, want a permanent error", err)
	}
	got := read(t)
	if len(got) != 1 || !bytes.Equal(got[0].Payload, []byte("insert v=5")) {
		t.Fatalf("the broker holds %d messages (%q), want one with payload %q", len(got), payloads(got), "insert v=5")
	}
}

func payloads(rs []Received) []string {
	var out []string
	for _, r := range rs {
		out = append(out, string(r.Payload))
	}
	return out
}

// tooLarge: a payload the broker refuses for its size is a permanent error wrapping
// sink.ErrTooLarge with the broker's reason; nothing is stored and the next event publishes.
func tooLarge(t *testing.T, b Broker) {
	root := newRoot()
	p, read := b.New(t, root)
	ctx := testCtx(t)
	h := handler(t, p, sink.Options{Encode: func(raw bson.Raw) ([]byte, error) {
		if v, _ := raw.Lookup("fullDocument", "v").Int64OK(); v == 2 {
			return bytes.Repeat([]byte("x"), b.TooLarge), nil
		}
		return bson.MarshalExtJSON(raw, true, false)
	}})
	err := h(ctx, event(t, root, 1, 2))
	if err == nil || !watchtree.IsPermanent(err) || !errors.Is(err, sink.ErrTooLarge) {
		t.Fatalf("a %d-byte payload gave %v, want a permanent error wrapping sink.ErrTooLarge", b.TooLarge, err)
	}
	t.Logf("too large: %v", err)
	if strings.TrimSpace(strings.TrimPrefix(err.Error(), "permanent:")) == sink.ErrTooLarge.Error() {
		t.Errorf("the error %q does not carry the broker's reason", err)
	}
	if err := h(ctx, event(t, root, 1, 3)); err != nil {
		t.Fatalf("the event after the too-large one: %v", err)
	}
	got := read(t)
	if len(got) != 1 || version(t, got[0].Payload) != 3 {
		t.Fatalf("the broker holds %d messages, want only the event after the too-large one", len(got))
	}
}

// brokerDown: a broker that is down or refuses gives a retryable error, within the case's
// timeout.
func brokerDown(t *testing.T, b Broker) {
	p := b.Down(t)
	h := handler(t, p, sink.Options{})
	ctx := testCtx(t)
	err := h(ctx, event(t, newRoot(), 1, 1))
	if err == nil {
		t.Fatal("publishing to a broker that is down returned nil: the event would settle unpublished")
	}
	t.Logf("broker down: %v", err)
	if watchtree.IsPermanent(err) {
		t.Fatalf("a broker that is down gave a permanent error (%v): it must be retried", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("the publish returned only when the case's %v ran out: %v", caseTimeout, err)
	}
}
