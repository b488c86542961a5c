package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/protobuf/proto"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/store/memstore"
)

// waitFor bounds every wait of these tests; nothing sleeps to wait, they block on channels or
// poll with this deadline.
const waitFor = 10 * time.Second

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newTestSystem returns a quiet actor system whose dead-letter throttle goroutine ends quickly
// enough for goleak.
func newTestSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}), actor.WithDeadLetterThrottleInterval(10*time.Millisecond))
}

// --- test events and the fake Router ---------------------------------------------------------

// tev is a test change event: raw BSON with _id {_data}, operationType, documentKey (unless
// keyless), ns, and a field "n" holding the seq.
type tev struct {
	seq     uint64
	key     string // documentKey._id; "" = keyless (drop)
	op      string // default "insert"
	undec   bool   // the fake router fails to decode it
	raw     []byte
	token   []byte
	tokenID string
}

func mkEvent(seq uint64, key string) tev { return tev{seq: seq, key: key, op: "insert"} }

func (e tev) build() tev {
	if e.op == "" {
		e.op = "insert"
	}
	e.tokenID = fmt.Sprintf("T%08d", e.seq)
	tok, _ := bson.Marshal(bson.D{{Key: "_data", Value: e.tokenID}})
	d := bson.D{
		{Key: "_id", Value: bson.Raw(tok)},
		{Key: "operationType", Value: e.op},
		{Key: "n", Value: int64(e.seq)},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "shop"}, {Key: "coll", Value: "orders"}}},
	}
	if e.key != "" {
		d = append(d, bson.E{Key: "documentKey", Value: bson.D{{Key: "_id", Value: e.key}}})
	}
	if e.undec {
		d = append(d, bson.E{Key: "undecodable", Value: true})
	}
	raw, _ := bson.Marshal(d)
	e.raw, e.token = raw, tok
	return e
}

// call is what the fake handler sees.
type call struct {
	seq     uint64
	key     string
	op      string
	attempt int
}

func parseCall(raw bson.Raw, attempt int) call {
	c := call{attempt: attempt}
	c.seq = uint64(raw.Lookup("n").Int64())
	c.op = raw.Lookup("operationType").StringValue()
	if v, err := raw.LookupErr("documentKey", "_id"); err == nil {
		c.key = v.StringValue()
	}
	return c
}

var (
	errSkip      = errors.New("skip: not for us")
	errPermanent = errors.New("permanent: bad order")
	errDecode    = errors.New("decode: field amount: cannot decode string into int")
)

// fakeRouter routes by operation type: "unhandled" → UNHANDLED, "filtered" → FILTERED, an event
// with the undecodable field → errDecode; everything else → handle. Classify: errSkip → Skipped,
// errPermanent → Permanent, else Retryable.
type fakeRouter struct {
	handle func(ctx context.Context, c call) error

	mu       sync.Mutex
	routed   map[uint64]int // seq → invocations returned by Route
	released map[uint64]int // seq → Release calls of its invocations
	calls    map[uint64]int // seq → Call calls
}

// checkReleased fails t unless every invocation the router returned was released exactly once
// (by the time its event settled, which the callers have waited for).
func (r *fakeRouter) checkReleased(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !maps.Equal(r.routed, r.released) {
		t.Errorf("invocations per seq: routed %v, released %v; want each released once", r.routed, r.released)
	}
}

func (r *fakeRouter) Route(raw bson.Raw) (Invocation, messages.Outcome, error) {
	switch raw.Lookup("operationType").StringValue() {
	case "unhandled":
		return nil, messages.Outcome_OUTCOME_UNHANDLED, nil
	case "filtered":
		return nil, messages.Outcome_OUTCOME_FILTERED, nil
	}
	if _, err := raw.LookupErr("undecodable"); err == nil {
		return nil, messages.Outcome_OUTCOME_UNSPECIFIED, errDecode
	}
	r.mu.Lock()
	if r.routed == nil {
		r.routed = map[uint64]int{}
	}
	r.routed[parseCall(raw, 0).seq]++
	r.mu.Unlock()
	return &fakeInv{r: r, raw: raw}, messages.Outcome_OUTCOME_UNSPECIFIED, nil
}

func (r *fakeRouter) Classify(err error) (ErrorClass, string) {
	switch {
	case errors.Is(err, errSkip):
		return Skipped, err.Error()
	case errors.Is(err, errPermanent), errors.Is(err, errDecode):
		return Permanent, ""
	}
	return Retryable, ""
}

type fakeInv struct {
	r        *fakeRouter
	raw      bson.Raw
	released bool
}

// Release implements Releaser: it counts the release of the event's invocation.
func (i *fakeInv) Release() {
	i.released = true
	seq := parseCall(i.raw, 0).seq
	i.r.mu.Lock()
	defer i.r.mu.Unlock()
	if i.r.released == nil {
		i.r.released = map[uint64]int{}
	}
	i.r.released[seq]++
}

func (i *fakeInv) Call(ctx context.Context, attempt int) error {
	c := parseCall(i.raw, attempt)
	i.r.mu.Lock()
	if i.r.calls == nil {
		i.r.calls = map[uint64]int{}
	}
	i.r.calls[c.seq]++
	i.r.mu.Unlock()
	if i.released {
		return fmt.Errorf("seq %d: Call after Release", c.seq)
	}
	if i.r.handle == nil {
		return nil
	}
	return i.r.handle(ctx, parseCall(i.raw, attempt))
}

// --- recorded Observer events ---------------------------------------------------------------

// recEvents records what the dispatcher reports to its Observer, by type.
type recEvents struct {
	mu       sync.Mutex
	retries  []observe.RetryScheduled
	dls      []observe.DeadLettered
	dlFails  []observe.DeadLetterFailed
	skipped  []observe.Skipped
	notified chan struct{}
}

func newRecEvents() *recEvents { return &recEvents{notified: make(chan struct{}, 1024)} }

// OnEvent implements observe.Observer.
func (r *recEvents) OnEvent(ev observe.Event) {
	r.mu.Lock()
	switch e := ev.(type) {
	case observe.RetryScheduled:
		r.retries = append(r.retries, e)
	case observe.DeadLettered:
		r.dls = append(r.dls, e)
	case observe.DeadLetterFailed:
		r.dlFails = append(r.dlFails, e)
	case observe.Skipped:
		r.skipped = append(r.skipped, e)
	}
	r.mu.Unlock()
	select {
	case r.notified <- struct{}{}:
	default:
	}
}

func (r *recEvents) snapshot() recEvents {
	r.mu.Lock()
	defer r.mu.Unlock()
	return recEvents{
		retries: append([]observe.RetryScheduled(nil), r.retries...), dls: append([]observe.DeadLettered(nil), r.dls...),
		dlFails: append([]observe.DeadLetterFailed(nil), r.dlFails...), skipped: append([]observe.Skipped(nil), r.skipped...),
	}
}

// --- probes standing in for the stream actor and the checkpointer ----------------------------

// probe forwards every message it receives (except lifecycle ones) to ch, in order, after
// checking it is a protobuf message.
type probe struct {
	ch      chan any
	nonProt chan string
}

func (p *probe) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case actor.AutoReceiveMessage, actor.SystemMessage:
		return
	default:
		if _, ok := m.(proto.Message); !ok {
			p.nonProt <- fmt.Sprintf("%T", m)
		}
		p.ch <- m
	}
}

// parentActor spawns the dispatcher as its child and records the SettlementCounts it reports.
type parentActor struct {
	props  *actor.Props
	pidCh  chan *actor.PID
	counts chan *messages.SettlementCounts
}

func (p *parentActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		pid, err := ctx.SpawnNamed(p.props, "dispatcher")
		if err != nil {
			panic(err)
		}
		p.pidCh <- pid
	case *messages.SettlementCounts:
		p.counts <- m
	}
}

type harness struct {
	t       *testing.T
	sys     *actor.ActorSystem
	clk     *clock.Fake
	ev      *recEvents
	dlStore *memstore.Store
	logs    *observer.ObservedLogs

	parent, disp   *actor.PID
	stream, cp     *actor.PID
	streamCh, cpCh chan any
	nonProto       chan string
	failures       chan any
	counts         chan *messages.SettlementCounts // what the dispatcher reported to its parent

	inc     uint64
	credit  int
	attach  uint64 // AttachDispatcher.attach of the dispatcher's first attach
	maxProg uint64 // highest Progress.through_seq the checkpointer probe saw
	settled map[uint64]*wire.Settled
	setInc  map[uint64]uint64 // seq → SettledBatch.incarnation
	order   []uint64          // settled seqs in arrival order
}

type hopt func(*Config)

func newHarness(t *testing.T, r Router, opts ...hopt) *harness {
	t.Helper()
	sys := newTestSystem()
	core, logs := observer.New(zap.DebugLevel)
	h := &harness{
		t: t, sys: sys, clk: clock.NewFake(time.Time{}), ev: newRecEvents(), logs: logs,
		streamCh: make(chan any, 1<<16), cpCh: make(chan any, 1<<16), nonProto: make(chan string, 64),
		failures: make(chan any, 16), counts: make(chan *messages.SettlementCounts, 1<<10),
		settled: map[uint64]*wire.Settled{}, setInc: map[uint64]uint64{},
	}
	h.dlStore = memstore.New(memstore.Options{Now: h.clk.Now})
	h.stream = sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &probe{ch: h.streamCh, nonProt: h.nonProto} }))
	h.cp = sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &probe{ch: h.cpCh, nonProt: h.nonProto} }))
	cfg := Config{
		Stream:       "orders",
		Router:       r,
		Checkpointer: h.cp,
		DeadLetters:  h.dlStore,
		Clock:        h.clk,
		Rand:         func() float64 { return 0.5 }, // jitter factor exactly 1
		Logger:       zap.New(core),
		Observer:     h.ev,
		// Every settlement is sent at once, so no flush timer competes with the retry timers
		// the tests wait for on the fake clock (TestSettleBatching covers batching).
		SettleBatch: 1,
	}
	for _, o := range opts {
		o(&cfg)
	}
	props, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	failures := h.failures
	pidCh := make(chan *actor.PID, 1)
	strategy := actor.NewOneForOneStrategy(0, 0, func(reason any) actor.Directive {
		failures <- reason
		return actor.StopDirective
	})
	h.parent = sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &parentActor{props: props, pidCh: pidCh, counts: h.counts}
	}, actor.WithSupervisor(strategy)))
	select {
	case h.disp = <-pidCh:
	case <-time.After(waitFor):
		t.Fatal("dispatcher not spawned")
	}
	// The dispatcher announces itself to the checkpointer first.
	m, ok := h.nextCP().(*wire.AttachDispatcher)
	if !ok || m.Id != h.disp.Id {
		t.Fatalf("first checkpointer message = %v, want AttachDispatcher{%s}", m, h.disp.Id)
	}
	h.attach = m.Attach
	t.Cleanup(func() {
		for _, p := range []*actor.PID{h.parent, h.stream, h.cp} {
			if err := sys.Root.StopFuture(p).Wait(); err != nil {
				t.Errorf("stop %v: %v", p, err)
			}
		}
		sys.Shutdown()
		select {
		case name := <-h.nonProto:
			t.Errorf("a probe received the non-protobuf message %s", name)
		default:
		}
		goleak.VerifyNone(t)
	})
	return h
}

func (h *harness) nextCP() any {
	h.t.Helper()
	select {
	case m := <-h.cpCh:
		return m
	case <-time.After(waitFor):
		h.t.Fatal("checkpointer probe received nothing")
	}
	return nil
}

// subscribe sends Subscribe{inc} from the stream probe and returns the Demand's credit.
func (h *harness) subscribe(inc uint64) int {
	h.t.Helper()
	h.inc = inc
	h.sys.Root.RequestWithCustomSender(h.disp, &wire.Subscribe{Incarnation: inc}, h.stream)
	d := h.demand()
	for d.Incarnation < inc { // a Demand of the previous incarnation still queued
		d = h.demand()
	}
	if d.Incarnation != inc {
		h.t.Fatalf("Demand incarnation %d, want %d", d.Incarnation, inc)
	}
	h.credit = int(d.Credit)
	return h.credit
}

// demand waits for the next Demand to the stream probe.
func (h *harness) demand() *wire.Demand {
	h.t.Helper()
	select {
	case m := <-h.streamCh:
		d, ok := m.(*wire.Demand)
		if !ok {
			h.t.Fatalf("stream probe got %T, want *Demand", m)
		}
		return d
	case <-time.After(waitFor):
		h.t.Fatal("no Demand")
	}
	return nil
}

// noDemand asserts that no Demand is pending after a round trip through the dispatcher.
func (h *harness) noDemand() {
	h.t.Helper()
	h.stats()
	select {
	case m := <-h.streamCh:
		h.t.Fatalf("unexpected message to the stream: %v", m)
	default:
	}
}

// send sends one EventBatch of the current incarnation (without checking the credit).
func (h *harness) send(evs ...tev) {
	h.sendInc(h.inc, evs...)
}

func (h *harness) sendInc(inc uint64, evs ...tev) {
	b := &wire.EventBatch{Incarnation: inc, PostBatchResumeToken: []byte("pbrt")}
	for i, e := range evs {
		e = e.build()
		if i > 0 && e.seq != b.ThroughSeq+1 {
			h.t.Fatalf("harness: seqs of one EventBatch must be consecutive: %d after %d", e.seq, b.ThroughSeq)
		}
		b.Raw = append(b.Raw, e.raw)
		b.ThroughSeq = e.seq
	}
	h.credit -= len(evs)
	h.sys.Root.Send(h.disp, b)
}

// waitSettled consumes checkpointer messages until every seq in seqs has settled, checking
// that each Settled follows a Progress covering it. It returns the outcomes by seq.
func (h *harness) waitSettled(seqs ...uint64) map[uint64]messages.Outcome {
	h.t.Helper()
	deadline := time.After(waitFor)
	for {
		missing := 0
		for _, s := range seqs {
			if h.settled[s] == nil {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		select {
		case m := <-h.cpCh:
			h.record(m)
		case <-deadline:
			h.t.Fatalf("seqs %v: %d not settled within %v (settled so far: %v)", seqs, missing, waitFor, h.order)
		}
	}
	out := map[uint64]messages.Outcome{}
	for _, s := range seqs {
		out[s] = h.settled[s].Outcome
	}
	return out
}

func (h *harness) record(m any) {
	h.t.Helper()
	switch m := m.(type) {
	case *wire.Progress:
		h.maxProg = max(h.maxProg, m.ThroughSeq)
	case *wire.SettledBatch:
		for _, s := range expandRuns(h.t, m.Runs) {
			if s.Seq > h.maxProg {
				h.t.Fatalf("Settled seq %d before a Progress covering it (max through_seq %d)", s.Seq, h.maxProg)
			}
			if h.settled[s.Seq] != nil {
				h.t.Fatalf("seq %d settled twice", s.Seq)
			}
			h.settled[s.Seq] = s
			h.setInc[s.Seq] = m.Incarnation
			h.order = append(h.order, s.Seq)
		}
	}
}

// drainCP records whatever the checkpointer probe received so far (after a round trip).
func (h *harness) drainCP() {
	h.stats()
	for {
		select {
		case m := <-h.cpCh:
			h.record(m)
		default:
			return
		}
	}
}

func (h *harness) stats() *wire.DispatcherStats {
	h.t.Helper()
	res, err := h.sys.Root.RequestFuture(h.disp, &wire.DispatcherStatsRequest{}, waitFor).Result()
	if err != nil {
		h.t.Fatalf("stats: %v", err)
	}
	return res.(*wire.DispatcherStats)
}

// armed waits until n timers are pending on the fake clock and returns the earliest's delay.
func (h *harness) armed(n int) time.Duration {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := h.clk.BlockUntil(ctx, n); err != nil {
		h.t.Fatalf("%d timers not armed: %v", n, err)
	}
	d, _ := h.clk.NextDeadline()
	return d
}

// eventually polls cond until it holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", waitFor, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// expandRuns turns SettledRuns back into one Settled per seq (the run's token and invalidate
// flag on its last seq only), checking that runs are in order and do not overlap.
func expandRuns(t *testing.T, runs []*wire.SettledRun) []*wire.Settled {
	t.Helper()
	var out []*wire.Settled
	var next uint64
	for _, r := range runs {
		if r.Count == 0 || r.FirstSeq < next {
			t.Fatalf("SettledRun %v: empty, or not after the previous run (next seq %d)", r, next)
		}
		for i := range uint64(r.Count) {
			s := &wire.Settled{Seq: r.FirstSeq + i, Outcome: r.Outcome}
			if i == uint64(r.Count)-1 {
				s.ResumeToken, s.Invalidate = r.LastToken, r.Invalidate
			}
			out = append(out, s)
		}
		next = r.FirstSeq + uint64(r.Count)
	}
	return out
}
