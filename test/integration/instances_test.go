package integration_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/test/mongosim"
)

// named configures a runtime with a stable instance name.
func named(name string) func(*watchtree.Config) {
	return func(c *watchtree.Config) { c.InstanceName = name }
}

// seenDocs records the document _ids one instance's handler saw, and the event IDs in order.
type seenDocs struct {
	mu   sync.Mutex
	docs map[int64]int // _id -> deliveries
	last string        // the highest event ID delivered (IDs of one stream sort in stream order)
}

func newSeenDocs() *seenDocs { return &seenDocs{docs: map[int64]int{}} }

func (s *seenDocs) handler() watchtree.Handler[Order] {
	return func(_ context.Context, ev *watchtree.Event[Order]) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.docs[ev.FullDocument.ID]++
		s.last = max(s.last, ev.ID())
		return nil
	}
}

func (s *seenDocs) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.docs)
}

func (s *seenDocs) lastID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// ids returns the sorted document _ids seen.
func (s *seenDocs) ids() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int64, 0, len(s.docs))
	for id := range s.docs {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// wantRange fails unless exactly the documents from..to were seen.
func (s *seenDocs) wantRange(t *testing.T, who string, from, to int64) {
	t.Helper()
	ids := s.ids()
	if int64(len(ids)) != to-from+1 || ids[0] != from || ids[len(ids)-1] != to {
		lo, hi := int64(-1), int64(-1)
		if len(ids) > 0 {
			lo, hi = ids[0], ids[len(ids)-1]
		}
		t.Fatalf("%s handled %d documents (%d..%d), want exactly %d..%d", who, len(ids), lo, hi, from, to)
	}
}

// cacheStream is the AllInstances stream of these scenarios: every instance keeps its own view.
func cacheStream(s *seenDocs, edit func(*watchtree.Stream[Order])) watchtree.Stream[Order] {
	spec := watchtree.Stream[Order]{Name: "cache", Collection: "orders", Lanes: 4,
		Checkpoint: watchtree.CheckpointPolicy{SaveInterval: 20 * time.Millisecond},
		OnInsert:   s.handler()}
	if edit != nil {
		edit(&spec)
	}
	return spec
}

func (r *rtEnv) checkpoints(t *testing.T, stream string) []watchtree.CheckpointInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cps, err := r.rt.Checkpoints(ctx, stream)
	if err != nil {
		t.Fatalf("Checkpoints(%s): %v", stream, err)
	}
	return cps
}

func instancesOf(cps []watchtree.CheckpointInfo) string {
	var out []string
	for _, cp := range cps {
		out = append(out, cp.Instance)
	}
	return strings.Join(out, ",")
}

// TestAllInstancesEachResumesFromItsOwnPosition is the scenario of two instances of one
// AllInstances stream: B handles 0–99 and stops; A goes on through 599; B comes back and
// handles the 500 events written while it was down. A's progress never moves B's position.
func TestAllInstancesEachResumesFromItsOwnPosition(t *testing.T) {
	e := newEnv(t)
	seenA, seenB := newSeenDocs(), newSeenDocs()
	a := e.startRuntime(named("pod-a"))
	b := e.startRuntime(named("pod-b"))
	a.waitRunning(t, a.spawn(t, cacheStream(seenA, nil)))
	b.waitRunning(t, b.spawn(t, cacheStream(seenB, nil)))

	e.insertMany("orders", 0, 99)
	waitFor(t, "B handled 0-99", func() bool { return seenB.count() == 100 })
	b.stop(t) // graceful: B's checkpoint is right after its last event
	seenB.wantRange(t, "B before its stop", 0, 99)
	cpB, ok := e.checkpointOf("cache", "pod-b")
	if !ok || tokenData(cpB.Token) < seenB.lastID() {
		t.Fatalf("B's checkpoint %q (ok %v) after a graceful stop, want at or after its last event %q", tokenData(cpB.Token), ok, seenB.lastID())
	}

	e.insertMany("orders", 100, 599)
	waitFor(t, "A handled 0-599", func() bool { return seenA.count() == 600 })
	waitFor(t, "A's checkpoint at its newest event", func() bool {
		cp, ok := e.checkpointOf("cache", "pod-a")
		return ok && tokenData(cp.Token) >= seenA.lastID()
	})
	if cp, _ := e.checkpointOf("cache", "pod-b"); tokenData(cp.Token) != tokenData(cpB.Token) {
		t.Fatalf("A's progress moved B's checkpoint from %q to %q", tokenData(cpB.Token), tokenData(cp.Token))
	}
	if cp, ok := e.checkpointOf("cache", ""); ok {
		t.Fatalf("an AllInstances stream wrote a shared checkpoint: %+v", cp)
	}
	listed := a.checkpoints(t, "cache")
	if got := instancesOf(listed); got != "pod-a,pod-b" {
		t.Fatalf("Checkpoints(cache) lists instances %q, want pod-a,pod-b", got)
	}
	for _, cp := range listed {
		if cp.Stream != "cache" || len(cp.Token) == 0 || cp.UpdatedAt.IsZero() || cp.Age < 0 ||
			!cp.ExpiresAt.Equal(cp.UpdatedAt.Add(defaultRetention)) {
			t.Errorf("listed checkpoint %+v", cp)
		}
	}

	seenB2 := newSeenDocs()
	b2 := e.startRuntime(named("pod-b"))
	b2.waitRunning(t, b2.spawn(t, cacheStream(seenB2, nil)))
	waitFor(t, "B handled the 500 events written while it was down", func() bool { return seenB2.count() >= 500 },
		func() string { return fmt.Sprintf("B saw %d", seenB2.count()) })
	e.insertMany("orders", 600, 600) // a marker: once B has it, nothing more is on its way
	waitFor(t, "B handled the marker", func() bool { return seenB2.count() == 501 })
	seenB2.wantRange(t, "B after its restart", 100, 600)
	if st := b2.obs.find(ofType[observe.Started]); len(st) == 0 || st[0].(observe.Started).Position != "checkpoint" {
		t.Fatalf("B's restart started from %v, want its checkpoint", st)
	}
}

// TestAllInstancesDeadLettersAreTheirOwn: two instances with different handlers dead-letter
// their own failures; each lists, replays and deletes only its own.
func TestAllInstancesDeadLettersAreTheirOwn(t *testing.T) {
	e := newEnv(t)
	var fixedA atomic.Bool
	fails := func(name string, fixed *atomic.Bool, refuse func(int64) bool) watchtree.Stream[Order] {
		return watchtree.Stream[Order]{Name: "push", Collection: "orders",
			OnInsert: func(_ context.Context, ev *watchtree.Event[Order]) error {
				if id := ev.FullDocument.ID; refuse(id) && (fixed == nil || !fixed.Load()) {
					return watchtree.Permanent(fmt.Errorf("%s refuses order %d", name, id))
				}
				return nil
			}}
	}
	even := func(id int64) bool { return id%2 == 0 }
	third := func(id int64) bool { return id%3 == 0 }
	a := e.startRuntime(named("pod-a"))
	b := e.startRuntime(named("pod-b"))
	a.waitRunning(t, a.spawn(t, fails("pod-a", &fixedA, even)))
	b.waitRunning(t, b.spawn(t, fails("pod-b", nil, third)))
	e.insertOrders("orders", 1, 12)
	waitFor(t, "A's 6 dead letters", func() bool { return len(a.obs.find(ofType[observe.DeadLettered])) == 6 }, a.obs.dump)
	waitFor(t, "B's 4 dead letters", func() bool { return len(b.obs.find(ofType[observe.DeadLettered])) == 4 }, b.obs.dump)
	if n := e.collCount("_wt_dead_letters", nil); n != 10 {
		t.Fatalf("_wt_dead_letters holds %d records, want 10 (6 of pod-a, 4 of pod-b)", n)
	}

	docsOf := func(r *rtEnv, instance string) map[int64]watchtree.DeadLetter {
		t.Helper()
		out := map[int64]watchtree.DeadLetter{}
		for _, dl := range r.deadLetters(t, "push") {
			id, _ := bson.Raw(dl.DocumentKey).Lookup("_id").AsInt64OK()
			if dl.Instance != instance || !strings.Contains(dl.Error, fmt.Sprintf("%s refuses order %d", instance, id)) {
				t.Errorf("%s lists the dead letter of order %d of instance %q: %q", instance, id, dl.Instance, dl.Error)
			}
			out[id] = dl
		}
		return out
	}
	ofA, ofB := docsOf(a, "pod-a"), docsOf(b, "pod-b")
	if got := fmt.Sprint(keysOf(ofA)); got != "[2 4 6 8 10 12]" {
		t.Fatalf("pod-a lists dead letters of orders %s", got)
	}
	if got := fmt.Sprint(keysOf(ofB)); got != "[3 6 9 12]" {
		t.Fatalf("pod-b lists dead letters of orders %s", got)
	}

	// A is fixed and replays its own: each replay deletes A's record only, also of the events
	// B dead-lettered too (orders 6 and 12).
	fixedA.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for id, dl := range ofA {
		if err := a.rt.Replay(ctx, "push", dl.ID); err != nil {
			t.Fatalf("pod-a replays order %d: %v", id, err)
		}
	}
	if err := a.rt.Replay(ctx, "push", ofB[3].ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("pod-a replays pod-b's dead letter of order 3: %v, want store.ErrNotFound", err)
	}
	if left := docsOf(a, "pod-a"); len(left) != 0 {
		t.Fatalf("pod-a still lists %v after replaying them", keysOf(left))
	}
	// B's records are untouched; B's replay fails (still broken) and is counted on its own.
	if err := b.rt.Replay(ctx, "push", ofB[6].ID); err == nil || !strings.Contains(err.Error(), "pod-b refuses order 6") {
		t.Fatalf("pod-b replays order 6: %v, want its handler's error", err)
	}
	after := docsOf(b, "pod-b")
	if got := fmt.Sprint(keysOf(after)); got != "[3 6 9 12]" {
		t.Fatalf("pod-b lists %s after pod-a's replays, want [3 6 9 12]", got)
	}
	for id, dl := range after {
		want := 0
		if id == 6 {
			want = 1
		}
		if dl.ReplayCount != want {
			t.Errorf("pod-b's dead letter of order %d: ReplayCount %d, want %d", id, dl.ReplayCount, want)
		}
	}
	if n := e.collCount("_wt_dead_letters", nil); n != 4 {
		t.Fatalf("_wt_dead_letters holds %d records after pod-a's replays, want pod-b's 4", n)
	}
}

func keysOf(m map[int64]watchtree.DeadLetter) []int64 {
	out := make([]int64, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// TestEphemeralStreamWritesNoCheckpoint: an Ephemeral stream on 3 instances writes no
// checkpoint over 10,000 events, and starts at the current position after a restart.
func TestEphemeralStreamWritesNoCheckpoint(t *testing.T) {
	e := newEnv(t)
	ephemeral := func(s *watchtree.Stream[Order]) {
		s.Name, s.Checkpoint = "ws", watchtree.CheckpointPolicy{Ephemeral: true}
	}
	const n = 10_000
	runtimes := make([]*rtEnv, 3)
	seen := make([]*seenDocs, 3)
	for i := range runtimes {
		runtimes[i], seen[i] = e.startRuntime(named(fmt.Sprintf("pod-%d", i+1))), newSeenDocs()
		runtimes[i].waitRunning(t, runtimes[i].spawn(t, cacheStream(seen[i], ephemeral)))
	}
	e.insertMany("orders", 1, n)
	for i := range seen {
		waitFor(t, fmt.Sprintf("pod-%d handled %d events", i+1, n), func() bool { return seen[i].count() == n },
			func() string { return fmt.Sprintf("handled %d", seen[i].count()) })
	}
	// A graceful stop flushes, and still writes nothing.
	runtimes[0].stop(t)
	for i, r := range runtimes {
		if got := len(r.obs.find(ofType[observe.Checkpointed])); got != 0 {
			t.Errorf("pod-%d reported %d Checkpointed events, want 0", i+1, got)
		}
		if got := r.cmds.count("update"); got != 0 {
			t.Errorf("pod-%d sent %d update commands (checkpoint saves), want 0", i+1, got)
		}
		if got := r.cmds.count("findAndModify"); got != 0 {
			t.Errorf("pod-%d sent %d findAndModify commands, want 0", i+1, got)
		}
	}
	if got := e.collCount("_wt_checkpoints", nil); got != 0 {
		t.Fatalf("_wt_checkpoints holds %d documents, want 0", got)
	}

	// pod-1 comes back: it starts at the current position, not at the start of the 10,000.
	again := newSeenDocs()
	r := e.startRuntime(named("pod-1"))
	r.waitRunning(t, r.spawn(t, cacheStream(again, ephemeral)))
	if st := r.obs.find(ofType[observe.Started]); len(st) != 1 || st[0].(observe.Started).Position != "latest" {
		t.Fatalf("the restarted ephemeral stream started from %v, want latest", st)
	}
	e.insertMany("orders", n+1, n+5)
	waitFor(t, "the restarted pod-1 handled the 5 new events", func() bool { return again.count() == 5 })
	for i := range seen[1:] {
		waitFor(t, "the others handled them too", func() bool { return seen[i+1].count() == n+5 })
	}
	again.wantRange(t, "pod-1 after its restart", n+1, n+5)
	if got := e.collCount("_wt_checkpoints", nil); got != 0 {
		t.Fatalf("_wt_checkpoints holds %d documents after the restart, want 0", got)
	}
}

// defaultRetention is CheckpointPolicy.Retention's documented default (30 days): a per-instance
// checkpoint expires that long after its latest write.
const defaultRetention = 30 * 24 * time.Hour

// movedClock is the server's wall clock for a test that moves it on: the real time plus what
// Advance added. Safe for concurrent use.
type movedClock struct{ ahead atomic.Int64 }

func (c *movedClock) Now() time.Time          { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *movedClock) Advance(d time.Duration) { c.ahead.Add(int64(d)) }

// TestPerInstanceCheckpointExpires: an instance's checkpoint not written for its retention
// (30 days) is removed by the server's TTL monitor, and Checkpoints no longer lists it; the
// shared checkpoint never expires. The server's clock is mongosim's, moved 31 days on.
func TestPerInstanceCheckpointExpires(t *testing.T) {
	if testingReal() {
		t.Skipf("needs mongosim's settable clock (Options.Now) to move the TTL monitor 31 days on, which a real replica set (%s) does not have", envURI)
	}
	clk := &movedClock{}
	e := newEnvWith(t, mongosim.Options{Now: clk.Now, TTLMonitorInterval: 10 * time.Millisecond})
	seen := newSeenDocs()
	gone := e.startRuntime(named("pod-gone"))
	gone.waitRunning(t, gone.spawn(t, cacheStream(seen, nil)))
	e.insertMany("orders", 1, 10)
	waitFor(t, "pod-gone handled 10", func() bool { return seen.count() == 10 })
	gone.stop(t)
	cp, ok := e.checkpointOf("cache", "pod-gone")
	if !ok {
		t.Fatal("pod-gone wrote no checkpoint")
	}
	// The stream's shared position (as SingleLeader keeps it) has no expiry.
	e.must(func(ctx context.Context) error {
		_, err := e.db.Collection("_wt_checkpoints").InsertOne(ctx, bson.D{{Key: "_id", Value: "cache"},
			{Key: "token", Value: cp.Token}, {Key: "source", Value: "event"}, {Key: "epoch", Value: int64(3)},
			{Key: "owner", Value: "leader-1"}, {Key: "settled", Value: int64(10)}, {Key: "updatedAt", Value: clk.Now()}})
		return err
	})

	// An operator's runtime lists them (its own stream is Ephemeral: it writes none).
	ops := e.startRuntime(named("pod-ops"))
	ops.waitRunning(t, ops.spawn(t, cacheStream(newSeenDocs(), func(s *watchtree.Stream[Order]) {
		s.Checkpoint = watchtree.CheckpointPolicy{Ephemeral: true}
	})))
	if got := instancesOf(ops.checkpoints(t, "cache")); got != ",pod-gone" {
		t.Fatalf("Checkpoints(cache) lists instances %q, want the shared one and pod-gone", got)
	}

	clk.Advance(31 * 24 * time.Hour)
	waitFor(t, "the TTL monitor removed pod-gone's checkpoint", func() bool {
		_, ok := e.checkpointOf("cache", "pod-gone")
		return !ok
	})
	if _, ok := e.checkpointOf("cache", ""); !ok {
		t.Fatal("the shared checkpoint expired")
	}
	if got := instancesOf(ops.checkpoints(t, "cache")); got != "" {
		t.Fatalf("Checkpoints(cache) lists instances %q after the expiry, want only the shared one", got)
	}
	if _, err := ops.rt.Checkpoints(context.Background(), "nope"); !errors.Is(err, watchtree.ErrUnknownStream) {
		t.Fatalf("Checkpoints of an unknown stream: %v, want ErrUnknownStream", err)
	}
}

// TestSharedCheckpointOfEarlierVersionIsEachInstancesStart: the one checkpoint per stream of an
// earlier version (_id = stream name) is the starting point of every instance without one of
// its own, and is left as it was.
func TestSharedCheckpointOfEarlierVersionIsEachInstancesStart(t *testing.T) {
	e := newEnv(t)
	e.createColl("orders", false)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	// The position an earlier version wrote: right after order 4.
	cs, err := e.db.Collection("orders").Watch(ctx, []bson.D{}, options.ChangeStream())
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	e.insertOrders("orders", 0, 9)
	var after4 bson.Raw
	for after4 == nil && cs.Next(ctx) {
		var ev struct {
			Doc Order `bson:"fullDocument"`
		}
		if err := cs.Decode(&ev); err != nil {
			t.Fatal(err)
		}
		if ev.Doc.ID == 4 {
			after4 = append(bson.Raw(nil), cs.ResumeToken()...)
		}
	}
	if after4 == nil {
		t.Fatalf("no event of order 4: %v", cs.Err())
	}
	legacy := bson.D{{Key: "_id", Value: "cache"}, {Key: "token", Value: after4}, {Key: "source", Value: "event"},
		{Key: "epoch", Value: int64(0)}, {Key: "owner", Value: "old-host-1-abcdef"}, {Key: "settled", Value: int64(5)},
		{Key: "updatedAt", Value: time.Now().UTC().Truncate(time.Millisecond)}}
	e.must(func(ctx context.Context) error {
		_, err := e.db.Collection("_wt_checkpoints").InsertOne(ctx, legacy)
		return err
	})
	before, err := e.db.Collection("_wt_checkpoints").FindOne(ctx, bson.D{{Key: "_id", Value: "cache"}}).Raw()
	if err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{"pod-a", "pod-b"} {
		seen := newSeenDocs()
		r := e.startRuntime(named(name))
		r.waitRunning(t, r.spawn(t, cacheStream(seen, nil)))
		waitFor(t, name+" handled orders 5-9", func() bool { return seen.count() == 5 })
		seen.wantRange(t, name, 5, 9)
		if st := r.obs.find(ofType[observe.Started]); len(st) != 1 || st[0].(observe.Started).Position != "migrated" {
			t.Fatalf("%s started from %v, want migrated", name, st)
		}
		if cp, ok := e.checkpointOf("cache", name); !ok || len(cp.Token) == 0 {
			t.Fatalf("%s has no checkpoint of its own after its start", name)
		}
	}
	e.insertOrders("orders", 10, 10)
	after, err := e.db.Collection("_wt_checkpoints").FindOne(ctx, bson.D{{Key: "_id", Value: "cache"}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if !bytesEqual(before, after) {
		t.Fatalf("the shared checkpoint changed:\n before %v\n after  %v", before, after)
	}
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }
