package integration_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/test/mongosim"
)

// envURI selects a real replica set instead of the embedded simulator.
const envURI = "WATCHTREE_MONGODB_URI"

// envLog, when set, sends the runtime's logs (debug level) to the test log.
const envLog = "WATCHTREE_IT_LOG"

// waitLimit bounds every wait of these tests. Nothing sleeps to wait: tests poll with a deadline.
const waitLimit = 30 * time.Second

func TestMain(m *testing.M) {
	if os.Getenv(envWorker) != "" {
		os.Exit(workerMain())
	}
	goleak.VerifyTestMain(m)
}

// Order is the document type of most scenarios.
type Order struct {
	ID     int64   `bson:"_id"`
	Key    string  `bson:"key,omitempty"`
	V      int     `bson:"v"`
	Amount float64 `bson:"amount"`
	Kind   string  `bson:"kind,omitempty"`
	Poison bool    `bson:"poison,omitempty"`
}

// env is one test's deployment: a fresh mongosim server (or the real replica set of envURI), a
// writer client and a database of the test's own.
type env struct {
	t      *testing.T
	srv    *mongosim.Server // nil on a real deployment
	uri    string
	client *mongo.Client // the test's writer client (not the runtime's)
	dbName string
	db     *mongo.Database
}

var appSeq atomic.Int64

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, mongosim.Options{})
}

// testingReal reports whether the tests run against a real deployment (WATCHTREE_MONGODB_URI).
func testingReal() bool { return os.Getenv(envURI) != "" }

// newEnvWith is newEnv with the simulator's options (ignored on a real deployment: a test that
// needs them skips there first).
func newEnvWith(t *testing.T, simOpts mongosim.Options) *env {
	t.Helper()
	e := &env{t: t, uri: os.Getenv(envURI)}
	if e.uri == "" {
		srv, err := mongosim.Start(context.Background(), simOpts)
		if err != nil {
			t.Fatalf("mongosim.Start: %v", err)
		}
		t.Cleanup(func() { _ = srv.Close() })
		e.srv, e.uri = srv, srv.URI()
	}
	e.dbName = dbNameFor(t.Name())
	e.client = e.connect("writer", nil)
	e.db = e.client.Database(e.dbName)
	if e.srv == nil {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			_ = e.db.Drop(ctx)
		})
	}
	return e
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9]+`)

// dbNameFor returns a unique database name for a test: wt_<test>_<6 hex>, under 64 bytes.
func dbNameFor(test string) string {
	n := strings.ToLower(unsafeName.ReplaceAllString(test, "_"))
	if len(n) > 40 {
		n = n[:40]
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return "wt_" + n + "_" + hex.EncodeToString(b[:])
}

// real reports whether the test runs against a real deployment.
func (e *env) real() bool { return e.srv == nil }

// needSim skips the test on a real deployment: hook names the mongosim-only hook it needs.
func (e *env) needSim(hook string) {
	e.t.Helper()
	if e.real() {
		e.t.Skipf("needs mongosim's %s hook, which a real replica set (%s) does not have", hook, envURI)
	}
}

// connect opens a client with a unique appName (fail points are scoped by it) and a 500 ms
// heartbeat (fast failover detection). Cleanup disconnects it.
func (e *env) connect(role string, mon *event.CommandMonitor) *mongo.Client {
	e.t.Helper()
	app := fmt.Sprintf("wt-it-%s-%d", role, appSeq.Add(1))
	o := options.Client().ApplyURI(e.uri).SetAppName(app).SetHeartbeatInterval(500 * time.Millisecond)
	if mon != nil {
		o.SetMonitor(mon)
	}
	cl, err := mongo.Connect(o)
	if err != nil {
		e.t.Fatalf("mongo.Connect: %v", err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := cl.Disconnect(ctx); err != nil {
			e.t.Errorf("Disconnect: %v", err)
		}
	})
	return cl
}

// rtEnv is a started runtime with its own client (so fail points can target it), observer and
// command counters.
type rtEnv struct {
	rt     *watchtree.Runtime
	client *mongo.Client
	app    string
	obs    *recorder
	cmds   *cmdCounter
}

// startRuntime connects a runtime client, creates and starts a runtime on e's database.
// configure may adjust the Config. Cleanup stops it (graceful, bounded).
func (e *env) startRuntime(configure func(*watchtree.Config)) *rtEnv {
	e.t.Helper()
	r := &rtEnv{obs: &recorder{}, cmds: &cmdCounter{}}
	app := fmt.Sprintf("wt-it-runtime-%d", appSeq.Add(1))
	o := options.Client().ApplyURI(e.uri).SetAppName(app).SetHeartbeatInterval(500 * time.Millisecond).
		SetMonitor(r.cmds.monitor())
	cl, err := mongo.Connect(o)
	if err != nil {
		e.t.Fatalf("mongo.Connect: %v", err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		_ = cl.Disconnect(ctx)
	})
	r.client, r.app = cl, app
	cfg := watchtree.Config{Client: cl, Database: e.dbName, Observer: r.obs, ShutdownTimeout: 20 * time.Second}
	if os.Getenv(envLog) != "" {
		cfg.Logger = zaptest.NewLogger(e.t)
	}
	if configure != nil {
		configure(&cfg)
	}
	rt, err := watchtree.New(cfg)
	if err != nil {
		e.t.Fatalf("watchtree.New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := rt.Start(ctx); err != nil {
		e.t.Fatalf("Runtime.Start: %v", err)
	}
	r.rt = rt
	// Registered after the client's Disconnect, so it runs before it.
	e.t.Cleanup(func() { r.stop(e.t) })
	return r
}

// stop stops the runtime gracefully; a second call is a no-op.
func (r *rtEnv) stop(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := r.rt.Stop(ctx); err != nil && !errors.Is(err, watchtree.ErrStopped) && !errors.Is(err, watchtree.ErrNotStarted) {
		t.Errorf("Runtime.Stop: %v", err)
	}
}

// envCursor, set to "dedicated", makes the tests' Collection streams Dedicated (withCursor):
// the existing scenarios then run on dedicated cursors too (make test runs them both ways; by
// default a Collection stream is Shared). "shared" sets Shared. Either applies to the streams
// that leave Cursor at its default only: a test that chooses a cursor keeps it.
const envCursor = "WATCHTREE_TEST_CURSOR"

// sharedCursors reports whether the tests' Collection streams read on shared cursors.
func sharedCursors() bool { return os.Getenv(envCursor) != "dedicated" }

// withCursor returns spec with the Cursor envCursor asks for when spec is a Collection stream
// of a type the tests use and leaves Cursor at its default; any other spec as it is.
func withCursor(spec watchtree.Spec) watchtree.Spec {
	var mode watchtree.CursorMode
	switch os.Getenv(envCursor) {
	case "dedicated":
		mode = watchtree.Dedicated
	case "shared":
		mode = watchtree.Shared
	default:
		return spec
	}
	switch s := spec.(type) {
	case watchtree.Stream[Order]:
		if s.Collection != "" && s.Cursor == watchtree.CursorDefault {
			s.Cursor = mode
		}
		return s
	case watchtree.Stream[bson.Raw]:
		if s.Collection != "" && s.Cursor == watchtree.CursorDefault {
			s.Cursor = mode
		}
		return s
	}
	return spec
}

// spawn spawns spec (with envCursor's Cursor, withCursor) and fails the test on error.
func (r *rtEnv) spawn(t *testing.T, spec watchtree.Spec) *watchtree.Handle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	h, err := r.rt.Spawn(ctx, withCursor(spec))
	if err != nil {
		t.Fatalf("Spawn(%s): %v", spec.StreamName(), err)
	}
	return h
}

// waitState polls the handle's status until its State is want.
func waitState(t *testing.T, h *watchtree.Handle, want watchtree.StreamState) watchtree.StreamStatus {
	t.Helper()
	var last watchtree.StreamStatus
	waitFor(t, "stream "+h.Name()+" in state "+string(want), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := h.Status(ctx)
		if err != nil {
			return false
		}
		last = st
		return st.State == want
	}, func() string { return fmt.Sprintf("last status %+v", last) })
	return last
}

// waitRunning waits until the stream's cursor is open: state running and a Started event seen.
func (r *rtEnv) waitRunning(t *testing.T, h *watchtree.Handle) {
	t.Helper()
	waitState(t, h, watchtree.StateRunning)
	r.obs.wait(t, "Started of "+h.Name(), func(ev observe.Event) bool {
		_, ok := ev.(observe.Started)
		return ok && ev.EventMeta().Stream == h.Name()
	})
}

// waitFor polls cond every millisecond until it holds, or fails the test after waitLimit;
// detail (optional) explains the last observed state.
func waitFor(t testing.TB, what string, cond func() bool, detail ...func() string) {
	t.Helper()
	waitWithin(t, waitLimit, what, cond, detail...)
}

// waitWithin is waitFor with its own bound (the 50,000-document snapshot of make snapshot-50k).
func waitWithin(t testing.TB, limit time.Duration, what string, cond func() bool, detail ...func() string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			msg := ""
			for _, d := range detail {
				msg += "; " + d()
			}
			t.Fatalf("timed out after %v waiting for %s%s", limit, what, msg)
		}
		time.Sleep(time.Millisecond) // a polling tick, not a wait for an outcome
	}
}

// recorder is an Observer that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []observe.Event
}

func (r *recorder) OnEvent(ev observe.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

func (r *recorder) all() []observe.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]observe.Event(nil), r.events...)
}

func (r *recorder) find(match func(observe.Event) bool) []observe.Event {
	var out []observe.Event
	for _, ev := range r.all() {
		if match(ev) {
			out = append(out, ev)
		}
	}
	return out
}

// wait polls until an event matches and returns the first match.
func (r *recorder) wait(t testing.TB, what string, match func(observe.Event) bool) observe.Event {
	t.Helper()
	var got observe.Event
	waitFor(t, "observer event: "+what, func() bool {
		if m := r.find(match); len(m) > 0 {
			got = m[0]
			return true
		}
		return false
	}, r.dump)
	return got
}

func (r *recorder) dump() string {
	var b strings.Builder
	b.WriteString("observer events:")
	for _, ev := range r.all() {
		b.WriteString("\n  ")
		b.WriteString(ev.String())
	}
	return b.String()
}

// ofType matches events of type E (of any stream).
func ofType[E observe.Event](ev observe.Event) bool {
	_, ok := ev.(E)
	return ok
}

// cmdCounter counts the commands a client sends, by name, and the change-stream aggregates by
// comment.
type cmdCounter struct {
	mu       sync.Mutex
	byName   map[string]int
	comments map[string]int // aggregate comment -> count
	// positioned counts, by comment, the aggregates opening a change stream at a position
	// (resumeAfter, startAfter or startAtOperationTime): a cursor resuming from a stream's
	// position, not the capture of the current position (a bare $changeStream, closed at once).
	positioned map[string]int
}

func (c *cmdCounter) monitor() *event.CommandMonitor {
	return &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.byName == nil {
			c.byName, c.comments, c.positioned = map[string]int{}, map[string]int{}, map[string]int{}
		}
		c.byName[e.CommandName]++
		if e.CommandName == "aggregate" {
			if v, err := e.Command.LookupErr("comment"); err == nil {
				if s, ok := v.StringValueOK(); ok {
					c.comments[s]++
					if changeStreamAt(e.Command) {
						c.positioned[s]++
					}
				}
			}
		}
	}}
}

// count returns how many commands named name were sent.
func (c *cmdCounter) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byName[name]
}

// aggregates returns how many aggregates carried comment.
func (c *cmdCounter) aggregates(comment string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.comments[comment]
}

// positionedAggregates returns how many aggregates carrying comment opened a change stream at a
// position (resumeAfter, startAfter, startAtOperationTime).
func (c *cmdCounter) positionedAggregates(comment string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.positioned[comment]
}

// changeStreamAt reports whether the aggregate cmd's first stage is a $changeStream with a start
// position.
func changeStreamAt(cmd bson.Raw) bool {
	stages, ok := cmd.Lookup("pipeline").ArrayOK()
	if !ok {
		return false
	}
	vals, err := stages.Values()
	if err != nil || len(vals) == 0 {
		return false
	}
	stage, ok := vals[0].DocumentOK()
	if !ok {
		return false
	}
	cs, ok := stage.Lookup("$changeStream").DocumentOK()
	if !ok {
		return false
	}
	for _, k := range []string{"resumeAfter", "startAfter", "startAtOperationTime"} {
		if _, err := cs.LookupErr(k); err == nil {
			return true
		}
	}
	return false
}

// handled records what handlers saw: every delivery by event ID, in order.
type handled struct {
	mu         sync.Mutex
	order      []string         // event IDs in delivery order (repeats included)
	byID       map[string]int   // deliveries per event ID
	byDoc      map[int64][]int  // document _id -> versions (Order.V) in delivery order
	ops        map[string]int   // operation type -> deliveries
	docOfEvent map[string]int64 // event ID -> document _id
}

func newHandled() *handled {
	return &handled{byID: map[string]int{}, byDoc: map[int64][]int{}, ops: map[string]int{}, docOfEvent: map[string]int64{}}
}

// record notes one delivery of ev.
func (h *handled) record(ev *watchtree.Event[Order]) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.order = append(h.order, ev.ID())
	h.byID[ev.ID()]++
	h.ops[string(ev.OperationType())]++
	id, _ := ev.DocumentID().AsInt64OK()
	h.docOfEvent[ev.ID()] = id
	v := -1
	if ev.FullDocument != nil {
		v = ev.FullDocument.V
	}
	h.byDoc[id] = append(h.byDoc[id], v)
}

// distinct returns the number of distinct events delivered.
func (h *handled) distinct() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.byID)
}

// deliveries returns the number of deliveries, repeats included.
func (h *handled) deliveries() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.order)
}

// docs returns the set of document ids seen.
func (h *handled) docs() map[int64]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[int64]bool, len(h.byDoc))
	for id := range h.byDoc {
		out[id] = true
	}
	return out
}

// handler returns an OnChange-style handler that records every event.
func (h *handled) handler() watchtree.Handler[Order] {
	return func(_ context.Context, ev *watchtree.Event[Order]) error {
		h.record(ev)
		return nil
	}
}

// insertOrders inserts orders with _id from..to (inclusive), one statement each, version 0. A
// write cut off by a fault the test injected (a killed connection, a cleared pool, a stepdown)
// is retried: the test's writer must get its orders in whatever the fault, and inserting is
// idempotent by _id.
func (e *env) insertOrders(coll string, from, to int64) {
	e.t.Helper()
	c := e.db.Collection(coll)
	for i := from; i <= to; i++ {
		e.must(func(ctx context.Context) error {
			var err error
			for attempt := 0; attempt < 20; attempt++ {
				_, err = c.InsertOne(ctx, Order{ID: i, Amount: float64(i), Key: fmt.Sprintf("k%d", i%7)})
				if err == nil || mongo.IsDuplicateKeyError(err) { // a retried insert that landed the first time
					return nil
				}
				if serverRefused(err) {
					return err // the server refused it: not a fault of the connection
				}
				select {
				case <-ctx.Done():
					return err
				case <-time.After(10 * time.Millisecond): // back off before the next attempt
				}
			}
			return err
		})
	}
}

// must runs op with a bounded context and fails the test on error.
func (e *env) must(op func(ctx context.Context) error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := op(ctx); err != nil {
		e.t.Fatalf("write: %v", err)
	}
}

// createColl creates a collection (with pre- and post-images when images is set).
func (e *env) createColl(name string, images bool) {
	e.t.Helper()
	o := options.CreateCollection()
	if images {
		o.SetChangeStreamPreAndPostImages(bson.D{{Key: "enabled", Value: true}})
	}
	e.must(func(ctx context.Context) error { return e.db.CreateCollection(ctx, name, o) })
}

// failPoint configures the failCommand fail point through the admin command (so it works on a
// real server started with enableTestCommands too), scoped to appName. Cleanup turns it off.
func (e *env) failPoint(mode any, data bson.D) {
	e.t.Helper()
	cmd := bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: mode}, {Key: "data", Value: data}}
	e.must(func(ctx context.Context) error {
		return e.client.Database("admin").RunCommand(ctx, cmd).Err()
	})
	e.t.Cleanup(func() { e.failPointOff() })
}

func (e *env) failPointOff() {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	_ = e.client.Database("admin").RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}}).Err()
}

// checkpointDoc is the stored checkpoint of a stream, read straight from _wt_checkpoints.
type checkpointDoc struct {
	Token  bson.Raw `bson:"token"`
	Source string   `bson:"source"`
}

// defaultInstanceName is the runtime's default Config.InstanceName: the hostname.
func defaultInstanceName() string {
	host, _ := os.Hostname()
	return host
}

// checkpoint returns the stored checkpoint of the stream on this host's default instance name
// (an AllInstances stream keeps one per instance); ok false when there is none.
func (e *env) checkpoint(stream string) (checkpointDoc, bool) {
	e.t.Helper()
	return e.checkpointOf(stream, defaultInstanceName())
}

// checkpointID is the _id of a stored checkpoint: the stream name for the shared one (instance
// ""), {stream, instance} for an instance's own.
func checkpointID(stream, instance string) any {
	if instance == "" {
		return stream
	}
	return bson.D{{Key: "stream", Value: stream}, {Key: "instance", Value: instance}}
}

// checkpointOf returns the stored checkpoint of the stream's instance ("" for the shared one).
func (e *env) checkpointOf(stream, instance string) (checkpointDoc, bool) {
	e.t.Helper()
	var cp checkpointDoc
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	err := e.db.Collection("_wt_checkpoints").FindOne(ctx, bson.D{{Key: "_id", Value: checkpointID(stream, instance)}}).Decode(&cp)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return cp, false
	}
	if err != nil {
		e.t.Fatalf("read checkpoint: %v", err)
	}
	return cp, true
}

// tokenData returns a resume token's _data ("" for none). Tokens of one stream sort by _data.
func tokenData(tok bson.Raw) string {
	if tok == nil {
		return ""
	}
	s, _ := tok.Lookup("_data").StringValueOK()
	return s
}

// gapDoc is a stored gap record, read straight from _wt_gaps.
type gapDoc struct {
	ID        string   `bson:"_id"`
	Stream    string   `bson:"stream"`
	FromToken bson.Raw `bson:"fromToken"`
	ToToken   bson.Raw `bson:"toToken"`
	Policy    string   `bson:"policy"`
	Reason    string   `bson:"reason"`
}

func (e *env) gaps(stream string) []gapDoc {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cur, err := e.db.Collection("_wt_gaps").Find(ctx, bson.D{{Key: "stream", Value: stream}})
	if err != nil {
		e.t.Fatalf("read gaps: %v", err)
	}
	var out []gapDoc
	if err := cur.All(ctx, &out); err != nil {
		e.t.Fatalf("read gaps: %v", err)
	}
	return out
}

// deadLetters lists the stream's dead letters through the runtime API.
func (r *rtEnv) deadLetters(t *testing.T, stream string) []watchtree.DeadLetter {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	dls, err := r.rt.DeadLetters(ctx, stream, 1000)
	if err != nil {
		t.Fatalf("DeadLetters(%s): %v", stream, err)
	}
	return dls
}

// collCount counts the documents of a collection matching filter.
func (e *env) collCount(coll string, filter bson.D) int64 {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if filter == nil {
		filter = bson.D{}
	}
	n, err := e.db.Collection(coll).CountDocuments(ctx, filter)
	if err != nil {
		e.t.Fatalf("count %s: %v", coll, err)
	}
	return n
}

// serverRefused reports whether err is the server's own refusal (a non-zero error code without
// RetryableWriteError), as opposed to a fault of the connection: a network error, or the
// driver's "connection pool was cleared" error that a concurrent operation on a killed
// connection causes (it carries no server code).
func serverRefused(err error) bool {
	var se mongo.ServerError
	if !errors.As(err, &se) || mongo.IsNetworkError(err) || se.HasErrorLabel("RetryableWriteError") {
		return false
	}
	for _, c := range se.ErrorCodes() {
		if c != 0 {
			return true
		}
	}
	return false
}

// holdOrder is a handler that records every event into got, but holds the handler of order id
// until Release (or until its ctx ends): an event kept in flight on purpose. Entered closes when
// that handler is first reached. Release may be called more than once; cleanup releases it.
type holdOrder struct {
	entered, release         chan struct{}
	enteredOnce, releaseOnce sync.Once
}

func newHoldOrder(t *testing.T) *holdOrder {
	h := &holdOrder{entered: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(h.Release)
	return h
}

// Release lets the held handler go on.
func (h *holdOrder) Release() { h.releaseOnce.Do(func() { close(h.release) }) }

// handler returns the handler that holds order id and records into got.
func (h *holdOrder) handler(id int64, got *handled) watchtree.Handler[Order] {
	return func(ctx context.Context, ev *watchtree.Event[Order]) error {
		if ev.FullDocument.ID == id {
			h.enteredOnce.Do(func() { close(h.entered) })
			select {
			case <-h.release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		got.record(ev)
		return nil
	}
}

// waitEntered waits until the held handler is reached.
func (h *holdOrder) waitEntered(t *testing.T, id int64) {
	t.Helper()
	select {
	case <-h.entered:
	case <-time.After(waitLimit):
		t.Fatalf("order %d never reached its handler", id)
	}
}
