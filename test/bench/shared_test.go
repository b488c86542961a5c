package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
)

// The shared-cursor benchmarks (issue 38, slice 3): many Collection streams on one runtime
// reading one change stream per (client, database, option class). mongosim runs in a child
// process (startMongosimChild), so that the client's heap is measured alone and the server's
// CPU time is read from /proc (mongosimChild.cpu).

const (
	// sharedColls is the number of collections the shared benchmarks' streams watch.
	sharedColls = 100
	// sharedManyStreams is BenchmarkSharedManyStreams' number of streams, as in the issue
	// (WATCHTREE_BENCH_SHARED_STREAMS overrides it).
	sharedManyStreams = 10000
	// sharedSpawnParallel is how many Spawns BenchmarkSharedManyStreams runs at a time, as
	// the integration test TestSharedManyStreamsFewConnections does.
	sharedSpawnParallel = 20
	// sharedEvents is the total write load of one phase of BenchmarkSharedThroughput and
	// BenchmarkSharedStall, spread evenly over the phase's collections
	// (WATCHTREE_BENCH_SHARED_EVENTS overrides it).
	sharedEvents = 50000
	// sharedBatch is the writer's InsertMany size: one collection's write load or a hundred's
	// is the same number of inserts of the same size.
	sharedBatch = 100
	// sharedRounds is the number of alternating rounds whose median ratio is reported.
	sharedRounds = 5
	// sharedStall is how long BenchmarkSharedStall's stalled member's handler blocks.
	sharedStall = time.Second
	// hubCommentPrefix starts the comment of a hub's aggregate (internal/engine/hub.go).
	hubCommentPrefix = "watchtree:hub:"
)

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// poolCounter counts the connections a client's pool holds, from the driver's pool events.
type poolCounter struct{ open, peak atomic.Int64 }

func (c *poolCounter) monitor() *event.PoolMonitor {
	return &event.PoolMonitor{Event: func(ev *event.PoolEvent) {
		switch ev.Type {
		case event.ConnectionCreated:
			n := c.open.Add(1)
			for {
				p := c.peak.Load()
				if n <= p || c.peak.CompareAndSwap(p, n) {
					break
				}
			}
		case event.ConnectionClosed:
			c.open.Add(-1)
		}
	}}
}

// inFlight counts a client's commands under way, and keeps the mix at the most at once (by
// command name, with the comment of an aggregate or getMore): what held the connections.
type inFlight struct {
	mu       sync.Mutex
	cur      map[string]int
	ids      map[int64]string
	n, most  int
	mostMix  string
	extraHub func(*event.CommandStartedEvent)
}

func (f *inFlight) monitor() *event.CommandMonitor {
	f.cur, f.ids = map[string]int{}, map[int64]string{}
	end := func(id int64) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if k, ok := f.ids[id]; ok {
			f.cur[k]--
			f.n--
			delete(f.ids, id)
		}
	}
	return &event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			if f.extraHub != nil {
				f.extraHub(e)
			}
			k := e.CommandName
			if c, ok := e.Command.Lookup("comment").StringValueOK(); ok && strings.HasPrefix(c, hubCommentPrefix) {
				k += " (hub)"
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			f.cur[k]++
			f.ids[e.RequestID] = k
			if f.n++; f.n > f.most {
				f.most = f.n
				var ks []string
				for k, v := range f.cur {
					if v > 0 {
						ks = append(ks, fmt.Sprintf("%s %d", k, v))
					}
				}
				sort.Strings(ks)
				f.mostMix = strings.Join(ks, ", ")
			}
		},
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) { end(e.RequestID) },
		Failed:    func(_ context.Context, e *event.CommandFailedEvent) { end(e.RequestID) },
	}
}

// restart forgets the most at once: the next mix is that of the commands from now on.
func (f *inFlight) restart() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.most, f.mostMix = f.n, ""
}

func (f *inFlight) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprintf("%d commands at once: %s", f.most, f.mostMix)
}

// hubCursors returns the change-stream cursors open on the server whose opening aggregate
// carried a hub's comment (and their $currentOp documents), and all open change-stream cursors ($currentOp with idleCursors:
// a cursor a getMore is waiting on is an active op with a cursor document, an idle one an
// idleCursor).
func hubCursors(admin *mongo.Client) (hub, all int, ops []string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cur, err := admin.Database("admin").Aggregate(ctx, mongo.Pipeline{
		{{Key: "$currentOp", Value: bson.D{{Key: "allUsers", Value: true}, {Key: "idleCursors", Value: true}}}}})
	if err != nil {
		return 0, 0, nil, fmt.Errorf("$currentOp: %w", err)
	}
	defer cur.Close(ctx)
	seen := map[int64]bool{} // a cursor whose getMore awaits may be listed as an op and as idle
	for cur.Next(ctx) {
		c, ok := cur.Current.Lookup("cursor").DocumentOK()
		if !ok {
			continue
		}
		if tailable, _ := c.Lookup("tailable").BooleanOK(); !tailable {
			continue
		}
		if id, _ := c.Lookup("cursorId").AsInt64OK(); seen[id] {
			continue
		} else {
			seen[id] = true
		}
		all++
		if cm, ok := c.Lookup("originatingCommand", "comment").StringValueOK(); ok && strings.HasPrefix(cm, hubCommentPrefix) {
			hub++
			ops = append(ops, cur.Current.String())
		}
	}
	return hub, all, ops, cur.Err()
}

// engineHeap returns the live heap (as of the last GC) whose allocation stack passes through
// the shared-cursor code of internal/engine (sharedWatcher, member, hub, hubSet), from the
// runtime's sampled heap profile, each sample scaled as pprof scales it.
func engineHeap() int64 {
	var recs []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, false)
	for {
		recs = make([]runtime.MemProfileRecord, n+64)
		var ok bool
		if n, ok = runtime.MemProfile(recs, false); ok {
			recs = recs[:n]
			break
		}
	}
	rate := float64(runtime.MemProfileRate)
	var total float64
	for _, r := range recs {
		if r.InUseBytes() <= 0 || !sharedStack(r.Stack()) {
			continue
		}
		size := float64(r.InUseBytes())
		if count := float64(r.InUseObjects()); rate > 1 && count > 0 {
			size /= 1 - math.Exp(-size/count/rate)
		}
		total += size
	}
	return int64(total)
}

func sharedStack(pcs []uintptr) bool {
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		if i := strings.Index(f.Function, "internal/engine."); i >= 0 {
			fn := f.Function[i+len("internal/engine."):]
			for _, p := range []string{"sharedWatcher.", "(*member).", "(*hub).", "(*hubSet).", "newHub"} {
				if strings.HasPrefix(fn, p) {
					return true
				}
			}
		}
		if !more {
			return false
		}
	}
}

// BenchmarkSharedManyStreams spawns sharedManyStreams Collection streams (the default cursor,
// Shared) over sharedColls collections on one runtime whose client has the driver's default
// pool (maxPoolSize 100), sharedSpawnParallel Spawns at a time, with mongosim in a child
// process. Run it alone with
//
//	cd test && go test -run '^$' -bench BenchmarkSharedManyStreams -benchtime 1x ./bench/
//
// Reported:
//   - running-s: from the first Spawn until every stream is running (target ≤ 60 s);
//   - hub-cursors: the most hub cursors open on the server at once (target ≤ 1: one option
//     class, one database), sampled every 250 ms with $currentOp from another client, and
//     hub-opens, the hub's aggregates (each reopen for new members is one);
//   - peak-conns: the most connections the runtime's client held while the streams spawned,
//     idled and handled the inserts, from its pool events (target ≤ 20); spawn-peak-conns: the
//     same until the inserts (Spawns and idling only); stop-peak-conns: the
//     same, Runtime.Stop included (every stream writes its final checkpoint then, at once);
//   - heap-KB/stream, stack-KB/stream, goroutines/stream: the live heap (after GC), goroutine
//     stacks and goroutines of the idle streams, per stream (a stream's whole cost: its actor
//     tree, checkpointer, lanes, reader goroutine and its hub member);
//   - member-heap-KB: the part of the heap allocated by the shared-cursor code (sharedWatcher,
//     member, hub), per stream: the hub side of a member (target ≤ 4 KB), from the sampled
//     heap profile (MemProfileRate 4 KB during the benchmark);
//   - delivered-s and delivered-fraction: one insert per collection, from the first insert until
//     every stream has its collection's event, and the fraction of streams that got exactly
//     one (target 1).
func BenchmarkSharedManyStreams(b *testing.B) {
	streams := envInt("WATCHTREE_BENCH_SHARED_STREAMS", sharedManyStreams)
	prevRate := runtime.MemProfileRate
	runtime.MemProfileRate = 4096
	defer func() { runtime.MemProfileRate = prevRate }()
	server := startMongosimChild(b)
	conns := &poolCounter{}
	var hubOpens atomic.Int64
	countOpens := func(e *event.CommandStartedEvent) {
		if e.CommandName == "aggregate" {
			if cm, ok := e.Command.Lookup("comment").StringValueOK(); ok && strings.HasPrefix(cm, hubCommentPrefix) {
				hubOpens.Add(1)
			}
		}
	}
	admin := connect(b, server.uri, nil)
	for i := 0; i < b.N; i++ {
		conns.peak.Store(conns.open.Load())
		hubOpens.Store(0)
		cmds := &inFlight{extraHub: countOpens}
		cl := connect(b, server.uri, func(o *options.ClientOptions) { o.SetPoolMonitor(conns.monitor()).SetMonitor(cmds.monitor()) })
		rt, stop := startRuntime(b, cl, nil)
		got := make([]atomic.Int32, streams)
		colls := make([]string, sharedColls)
		for c := range colls {
			colls[c] = fmt.Sprintf("many-%d-%03d", i, c)
		}
		before := settledMem()
		engine0 := engineHeap()

		var hubMax, allMax atomic.Int64
		var twoHubs atomic.Value // the first sample with more than one hub cursor
		sampleDone := make(chan struct{})
		sampling := make(chan struct{})
		go func() { // the hub-cursor sampler; ends when sampling closes
			defer close(sampleDone)
			for {
				if h, a, ops, err := hubCursors(admin); err == nil { // a failed sample is only a sample less
					if h > 1 && twoHubs.Load() == nil {
						twoHubs.Store(strings.Join(ops, "\n"))
					}
					hubMax.Store(max(hubMax.Load(), int64(h)))
					allMax.Store(max(allMax.Load(), int64(a)))
				}
				select {
				case <-sampling:
					return
				case <-time.After(250 * time.Millisecond):
				}
			}
		}()

		start := time.Now()
		var wg sync.WaitGroup
		sem := make(chan struct{}, sharedSpawnParallel)
		errs := make(chan error, streams)
		for s := range streams {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				ctx, cancel := context.WithTimeout(context.Background(), stallAfter)
				defer cancel()
				name := fmt.Sprintf("many-%d-%05d", i, s)
				if _, err := rt.Spawn(ctx, watchtree.Stream[order]{Name: name, Collection: colls[s%sharedColls],
					OnInsert: func(context.Context, *watchtree.Event[order]) error { got[s].Add(1); return nil }}); err != nil {
					errs <- fmt.Errorf("spawn %s: %w", name, err)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		for deadline := time.Now().Add(stallAfter); ; {
			sts, err := rt.Streams(context.Background())
			if err != nil {
				b.Fatalf("Streams: %v", err)
			}
			running := 0
			for _, st := range sts {
				if st.State == watchtree.StateRunning {
					running++
				}
			}
			if running == streams {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d streams running after %v", running, streams, stallAfter)
			}
			time.Sleep(250 * time.Millisecond)
		}
		runningS := time.Since(start).Seconds()
		// Wait for every member to attach (the hub reads every collection, no catch-up cursor
		// left), then let them idle.
		for deadline := time.Now().Add(stallAfter); ; {
			sts, _ := rt.Streams(context.Background())
			attached := 0
			for _, st := range sts {
				if st.Cursor == "shared (attached)" {
					attached++
				}
			}
			if attached == streams {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d streams attached after %v", attached, streams, stallAfter)
			}
			time.Sleep(250 * time.Millisecond)
		}
		attachedS := time.Since(start).Seconds()
		close(sampling)
		<-sampleDone
		time.Sleep(idleSettle) // a steady state to measure, not a wait for a condition
		after := readMem()
		engine1 := engineHeap()
		spawnPeak := conns.peak.Load()
		b.Logf("%d streams spawned and idle: at most %d connections, %v", streams, spawnPeak, cmds)
		cmds.restart()

		t0 := time.Now()
		for _, c := range colls {
			if _, err := admin.Database(benchDB).Collection(c).InsertOne(context.Background(),
				order{ID: bson.NewObjectID(), Status: "new", Amount: 1}); err != nil {
				b.Fatalf("insert: %v", err)
			}
		}
		exact := 0
		for deadline := time.Now().Add(stallAfter); ; {
			n := 0
			for s := range got {
				if got[s].Load() >= 1 {
					n++
				}
			}
			if n == streams {
				break
			}
			if time.Now().After(deadline) {
				b.Errorf("%d of %d streams got their collection's insert after %v", n, streams, stallAfter)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		deliveredS := time.Since(t0).Seconds()
		time.Sleep(500 * time.Millisecond) // a duplicate would arrive within this
		for s := range got {
			if got[s].Load() == 1 {
				exact++
			}
		}
		h, a, _, err := hubCursors(admin)
		if err != nil {
			b.Fatal(err)
		}
		if ops, ok := twoHubs.Load().(string); ok {
			b.Logf("more than one hub cursor at once:\n%s", ops)
		}
		hubMax.Store(max(hubMax.Load(), int64(h)))
		allMax.Store(max(allMax.Load(), int64(a)))
		peak := conns.peak.Load()
		b.Logf("one insert per collection delivered: at most %d connections in all, %v", peak, cmds)
		stop()
		b.Logf("with Runtime.Stop: at most %d connections, %v", conns.peak.Load(), cmds)

		d := float64(streams)
		b.ReportMetric(runningS, "running-s")
		b.ReportMetric(attachedS, "attached-s")
		b.ReportMetric(float64(hubMax.Load()), "hub-cursors")
		b.ReportMetric(float64(allMax.Load()), "change-stream-cursors")
		b.ReportMetric(float64(hubOpens.Load()), "hub-opens")
		b.ReportMetric(float64(peak), "peak-conns")
		b.ReportMetric(float64(spawnPeak), "spawn-peak-conns")
		b.ReportMetric(float64(conns.peak.Load()), "stop-peak-conns")
		b.ReportMetric((float64(after.heap)-float64(before.heap))/d/1024, "heap-KB/stream")
		b.ReportMetric((float64(after.stack)-float64(before.stack))/d/1024, "stack-KB/stream")
		b.ReportMetric(float64(after.goroutines-before.goroutines)/d, "goroutines/stream")
		b.ReportMetric(float64(engine1-engine0)/d/1024, "member-heap-KB")
		b.ReportMetric(deliveredS, "delivered-s")
		b.ReportMetric(float64(exact)/d, "delivered-fraction")
	}
}

// fleetPhase counts one phase's events: each stream expects per events; others counts the
// events of every stream but the one excluded (the stalled one), all every stream's.
type fleetPhase struct {
	others, all *countdown
	exclude     int // the stream not in others (-1: none)
}

// fleet is a set of streams, one per collection, whose handlers count into the current phase.
type fleet struct {
	colls   []string
	handles []*watchtree.Handle
	phase   atomic.Pointer[fleetPhase]
	stall   atomic.Bool // stream 0's next event blocks its handler for sharedStall
	stalled atomic.Int64
}

// spawnFleet spawns one stream per collection of colls at Latest with the cursor mode, and
// waits until every one is running (and, Shared, attached to its hub).
func spawnFleet(b *testing.B, rt *watchtree.Runtime, prefix string, colls []string, mode watchtree.CursorMode) *fleet {
	b.Helper()
	f := &fleet{colls: colls, handles: make([]*watchtree.Handle, len(colls))}
	var wg sync.WaitGroup
	sem := make(chan struct{}, sharedSpawnParallel)
	for s, c := range colls {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			h, err := rt.Spawn(context.Background(), watchtree.Stream[order]{Name: prefix + c, Collection: c, Cursor: mode,
				StartPosition: watchtree.Latest,
				OnInsert: func(ctx context.Context, _ *watchtree.Event[order]) error {
					if s == 0 && f.stall.CompareAndSwap(true, false) {
						t := time.Now()
						select {
						case <-time.After(sharedStall):
						case <-ctx.Done():
						}
						f.stalled.Add(int64(time.Since(t)))
					}
					if p := f.phase.Load(); p != nil {
						if s != p.exclude {
							p.others.tick()
						}
						p.all.tick()
					}
					return nil
				}})
			if err != nil {
				b.Errorf("spawn %s: %v", prefix+c, err)
			}
			f.handles[s] = h
		}()
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	want := "dedicated"
	if mode != watchtree.Dedicated {
		want = "shared (attached)"
	}
	for deadline := time.Now().Add(stallAfter); ; {
		ready := 0
		for _, h := range f.handles {
			if st, err := h.Status(context.Background()); err == nil && st.State == watchtree.StateRunning && st.Cursor == want {
				ready++
			}
		}
		if ready == len(colls) {
			return f
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: %d of %d streams running on a %q cursor after %v", prefix, ready, len(colls), want, stallAfter)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop stops every stream of f gracefully, at once.
func (f *fleet) stop(b *testing.B) {
	b.Helper()
	var wg sync.WaitGroup
	for _, h := range f.handles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stopHandle(b, h)
		}()
	}
	wg.Wait()
}

// writeSpread inserts per orders into each of colls, sharedBatch per InsertMany, the
// collections in turn, on a goroutine of its own; the channel yields the error (nil) at the end.
func writeSpread(cl *mongo.Client, colls []string, per int) <-chan error {
	done := make(chan error, 1)
	go func() {
		for off := 0; off < per; off += sharedBatch {
			n := min(sharedBatch, per-off)
			for _, c := range colls {
				docs := make([]any, n)
				for k := range docs {
					docs[k] = order{ID: bson.NewObjectID(), I: int64(off + k), Status: "new", Amount: 12.5}
				}
				if _, err := cl.Database(benchDB).Collection(c).InsertMany(context.Background(), docs); err != nil {
					done <- err
					return
				}
			}
		}
		done <- nil
	}()
	return done
}

// sharedPhase is one measured phase: the time from the first insert until every event of the
// streams counted (all, or the others) was handled, and the server's CPU time over it.
type sharedPhase struct {
	elapsed, others time.Duration
	server, client  time.Duration // the mongosim child's CPU time, this process's (the writer's too)
	events          int
}

// runPhase writes events orders spread over f's collections (none: only written, nothing
// watching, when f is nil and colls is given) and times them to the last handled.
func runPhase(b *testing.B, server *mongosimChild, writer *mongo.Client, f *fleet, colls []string, events, exclude int) sharedPhase {
	b.Helper()
	per := events / len(colls)
	total := per * len(colls)
	p := &fleetPhase{all: newCountdown(total), others: newCountdown(total), exclude: exclude}
	if exclude >= 0 {
		p.others = newCountdown(total - per)
	}
	if f != nil {
		f.phase.Store(p)
	}
	server.settle(b)
	srv0, cpu0, t0 := server.cpu(), processCPU(b), time.Now()
	written := writeSpread(writer, colls, per)
	r := sharedPhase{events: total}
	if f == nil {
		if err := <-written; err != nil {
			b.Fatalf("insert: %v", err)
		}
		r.elapsed, r.others = time.Since(t0), time.Since(t0)
		r.server, r.client = server.cpu()-srv0, processCPU(b)-cpu0
		return r
	}
	p.others.wait(b, "the other streams")
	r.others = time.Since(t0)
	p.all.wait(b, "every stream")
	r.elapsed = time.Since(t0)
	r.server, r.client = server.cpu()-srv0, processCPU(b)-cpu0
	if err := <-written; err != nil {
		b.Fatalf("insert: %v", err)
	}
	f.phase.Store(nil)
	return r
}

func (r sharedPhase) rate() float64 { return float64(r.events) / r.elapsed.Seconds() }
func (r sharedPhase) clientCPUPerEvent() float64 {
	return float64(r.client.Nanoseconds()) / 1000 / float64(r.events)
}
func (r sharedPhase) serverCPUPerEvent() float64 {
	return float64(r.server.Nanoseconds()) / 1000 / float64(r.events)
}

func collNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

// BenchmarkSharedThroughput: the same total write load (sharedEvents orders, sharedBatch per
// InsertMany, from one writer client) read by one Dedicated stream on one collection, by
// sharedColls Shared members on sharedColls collections, and by sharedColls Dedicated streams
// on them, in an order that alternates from round to round (sharedRounds), mongosim in a child
// process. Each phase spawns its streams at Latest (and waits until they run, attached when
// Shared), then times the writes to the last event handled, and stops them. A writes-only phase
// (no stream) gives the server's cost of the inserts themselves. Reported, medians over the
// rounds:
//   - shared-events/s against dedicated1-events/s, throughput-ratio (target ≥ 0.9), and
//     dedicated100-events/s;
//   - the mongosim child's CPU µs per event (/proc/<pid>/task/*/schedstat over the phase, the
//     inserts included): shared-, dedicated1-, dedicated100- and writes-server-cpu-µs/event;
//     server-cpu-ratio = shared / dedicated1 (target ≤ 1.2) and dedicated100-server-cpu-ratio =
//     dedicated100 / dedicated1.
func BenchmarkSharedThroughput(b *testing.B) {
	events := envInt("WATCHTREE_BENCH_SHARED_EVENTS", sharedEvents)
	server := startMongosimChild(b)
	writer := connect(b, server.uri, nil)
	// A pool for sharedColls dedicated cursors and the checkpoints beside them; the commands
	// the runtime sends, counted by name, say where the server's CPU goes.
	var sent sync.Map // command name -> *atomic.Int64
	count := func(name string) int64 {
		if v, ok := sent.Load(name); ok {
			return v.(*atomic.Int64).Load()
		}
		return 0
	}
	cl := connect(b, server.uri, func(o *options.ClientOptions) {
		o.SetMaxPoolSize(3 * sharedColls).SetMonitor(&event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
			v, _ := sent.LoadOrStore(e.CommandName, new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
		}})
	})
	rt := newRuntime(b, cl, nil)
	for i := 0; i < b.N; i++ {
		var tput, cpu, cpu100 []float64
		var shared, ded1, ded100, writes []sharedPhase
		cmds := map[string][2]int64{} // phase -> updates, getMores, over every round
		measure := func(phase string, run func() sharedPhase) sharedPhase {
			u0, g0 := count("update"), count("getMore")
			r := run()
			c := cmds[phase]
			cmds[phase] = [2]int64{c[0] + count("update") - u0, c[1] + count("getMore") - g0}
			return r
		}
		for round := range sharedRounds {
			phases := []func(){
				func() {
					colls := []string{fmt.Sprintf("tp1-%d-%d", i, round)}
					f := spawnFleet(b, rt, "d1-", colls, watchtree.Dedicated)
					ded1 = append(ded1, measure("ded1", func() sharedPhase { return runPhase(b, server, writer, f, colls, events, -1) }))
					f.stop(b)
				},
				func() {
					colls := collNames(fmt.Sprintf("tps-%d-%d", i, round), sharedColls)
					f := spawnFleet(b, rt, "s-", colls, watchtree.Shared)
					shared = append(shared, measure("shared", func() sharedPhase { return runPhase(b, server, writer, f, colls, events, -1) }))
					f.stop(b)
				},
				func() {
					colls := collNames(fmt.Sprintf("tpd-%d-%d", i, round), sharedColls)
					f := spawnFleet(b, rt, "d100-", colls, watchtree.Dedicated)
					ded100 = append(ded100, measure("ded100", func() sharedPhase { return runPhase(b, server, writer, f, colls, events, -1) }))
					f.stop(b)
				},
				func() {
					colls := collNames(fmt.Sprintf("tpw-%d-%d", i, round), sharedColls)
					writes = append(writes, runPhase(b, server, writer, nil, colls, events, -1))
				},
			}
			for k := range phases {
				if round%2 == 0 {
					phases[k]()
				} else {
					phases[len(phases)-1-k]()
				}
			}
			tput = append(tput, shared[round].rate()/ded1[round].rate())
			cpu = append(cpu, shared[round].serverCPUPerEvent()/ded1[round].serverCPUPerEvent())
			cpu100 = append(cpu100, ded100[round].serverCPUPerEvent()/ded1[round].serverCPUPerEvent())
		}
		med := func(rs []sharedPhase, f func(sharedPhase) float64) float64 {
			xs := make([]float64, len(rs))
			for k, r := range rs {
				xs[k] = f(r)
			}
			m, _, _ := ratioStats(xs)
			return m
		}
		rate := func(r sharedPhase) float64 { return r.rate() }
		scpu := func(r sharedPhase) float64 { return r.serverCPUPerEvent() }
		b.ReportMetric(med(shared, rate), "shared-events/s")
		b.ReportMetric(med(ded1, rate), "dedicated1-events/s")
		b.ReportMetric(med(ded100, rate), "dedicated100-events/s")
		b.ReportMetric(med(writes, rate), "writes-only-events/s")
		ccpu := func(r sharedPhase) float64 { return r.clientCPUPerEvent() }
		b.ReportMetric(med(shared, ccpu), "shared-client-cpu-µs/event")
		b.ReportMetric(med(ded1, ccpu), "dedicated1-client-cpu-µs/event")
		b.ReportMetric(med(ded100, ccpu), "dedicated100-client-cpu-µs/event")
		b.ReportMetric(med(writes, ccpu), "writes-client-cpu-µs/event")
		m, lo, hi := ratioStats(tput)
		b.ReportMetric(m, "throughput-ratio")
		b.ReportMetric(lo, "throughput-ratio-min")
		b.ReportMetric(hi, "throughput-ratio-max")
		b.ReportMetric(med(shared, scpu), "shared-server-cpu-µs/event")
		b.ReportMetric(med(ded1, scpu), "dedicated1-server-cpu-µs/event")
		b.ReportMetric(med(ded100, scpu), "dedicated100-server-cpu-µs/event")
		b.ReportMetric(med(writes, scpu), "writes-only-server-cpu-µs/event")
		m, lo, hi = ratioStats(cpu)
		b.ReportMetric(m, "server-cpu-ratio")
		b.ReportMetric(lo, "server-cpu-ratio-min")
		b.ReportMetric(hi, "server-cpu-ratio-max")
		m, _, _ = ratioStats(cpu100)
		b.ReportMetric(m, "dedicated100-server-cpu-ratio")
		for _, phase := range []string{"ded1", "shared", "ded100"} {
			b.Logf("%s: %d checkpoint writes (update) and %d getMores per %d events", phase,
				cmds[phase][0]/sharedRounds, cmds[phase][1]/sharedRounds, events)
		}
	}
}

// BenchmarkSharedStall: sharedColls Shared members on sharedColls collections, one runtime;
// rounds (sharedRounds) of an undisturbed phase and a phase in which member 0's handler blocks
// for sharedStall at its first event, in an order that alternates, each phase sharedEvents
// orders spread over the collections (mongosim in a child process). The others' throughput is
// their events over the time from the first insert until each of them had all of its own.
// Reported: undisturbed-events/s and stalled-others-events/s (the 99 others, medians),
// stall-ratio = stalled / undisturbed (median, target ≥ 0.9), stalled-member-ms, how long
// the stalled member took to handle all of its events (median), and detaches, the members moved
// off the hub's cursor during the phases (observe.CursorChanged).
// detaching is set while BenchmarkSharedStall's phases run: its Observer counts the detaches.
var detaching atomic.Bool

func BenchmarkSharedStall(b *testing.B) {
	events := envInt("WATCHTREE_BENCH_SHARED_EVENTS", sharedEvents)
	server := startMongosimChild(b)
	writer := connect(b, server.uri, nil)
	cl := connect(b, server.uri, nil)
	var detaches atomic.Int64 // members moved off the hub's cursor (CursorChanged, not attached)
	rt := newRuntime(b, cl, observe.Func(func(ev observe.Event) {
		if c, ok := ev.(observe.CursorChanged); ok && !c.Attached && c.Why != "" && detaching.Load() {
			detaches.Add(1)
		}
	}))
	for i := 0; i < b.N; i++ {
		colls := collNames(fmt.Sprintf("stall-%d", i), sharedColls)
		f := spawnFleet(b, rt, "st-", colls, watchtree.Shared)
		var ratios, calm, stalled, member []float64
		detaching.Store(true)
		for round := range sharedRounds {
			var u, s sharedPhase
			undisturbed := func() { u = runPhase(b, server, writer, f, colls, events, 0) }
			stall := func() {
				f.stalled.Store(0)
				f.stall.Store(true)
				s = runPhase(b, server, writer, f, colls, events, 0)
				if f.stall.Load() || f.stalled.Load() < int64(sharedStall*9/10) {
					b.Fatalf("round %d: the member did not stall (%v)", round, time.Duration(f.stalled.Load()))
				}
			}
			if round%2 == 0 {
				undisturbed()
				stall()
			} else {
				stall()
				undisturbed()
			}
			others := float64(u.events - u.events/len(colls))
			ur, sr := others/u.others.Seconds(), others/s.others.Seconds()
			calm, stalled = append(calm, ur), append(stalled, sr)
			ratios = append(ratios, sr/ur)
			member = append(member, float64(s.elapsed.Milliseconds()))
		}
		detaching.Store(false)
		f.stop(b)
		b.ReportMetric(float64(detaches.Load()), "detaches")
		m, _, _ := ratioStats(calm)
		b.ReportMetric(m, "undisturbed-events/s")
		m, _, _ = ratioStats(stalled)
		b.ReportMetric(m, "stalled-others-events/s")
		m, lo, hi := ratioStats(ratios)
		b.ReportMetric(m, "stall-ratio")
		b.ReportMetric(lo, "stall-ratio-min")
		b.ReportMetric(hi, "stall-ratio-max")
		m, _, _ = ratioStats(member)
		b.ReportMetric(m, "stalled-member-ms")
	}
}
