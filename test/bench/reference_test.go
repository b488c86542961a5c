package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree"
)

// referenceEvents is the number of events each phase of BenchmarkAgainstReference reads.
const referenceEvents = 50_000

// referenceRounds is the number of rounds of BenchmarkAgainstReference; each round measures the
// reference consumer and watchtree once per scenario, the order alternating from round to round.
const referenceRounds = 5

// referenceBatchSize is the reference consumer's change-stream batchSize (watchtree's too).
const referenceBatchSize = 1024

// processCPU returns the user + system CPU time this process has used so far.
func processCPU(b *testing.B) time.Duration {
	cpu, _ := processUsage(b)
	return cpu
}

// processUsage returns the user + system CPU time this process has used so far and its
// voluntary context switches (a thread that blocked: each hand-over to a goroutine whose
// thread sleeps costs one, which is CPU a profile barely shows).
func processUsage(b *testing.B) (time.Duration, int64) {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Nvcsw
}

// phaseResult is one consumer's measurement of one phase.
type phaseResult struct {
	elapsed time.Duration // first read to last event handled
	cpu     time.Duration // process CPU time over the same span
	server  time.Duration // the mongosim child's CPU time over the same span (catch-up only)
	vcsw    int64         // voluntary context switches of the process over the same span (catch-up only)
	alloc   uint64        // bytes allocated by the process over the same span (catch-up only)
	gcs     uint32        // garbage collections over the same span (catch-up only)
}

// allocated returns the bytes the process has allocated so far and its number of completed
// garbage collections (runtime.MemStats.TotalAlloc, NumGC).
func allocated() (uint64, uint32) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc, m.NumGC
}

func (r phaseResult) rate(n int) float64 { return float64(n) / r.elapsed.Seconds() }

func (r phaseResult) cpuPerEvent(n int) float64 {
	return float64(r.cpu.Microseconds()) / float64(n)
}

func (r phaseResult) switchesPerKEvent(n int) float64 {
	return float64(r.vcsw) * 1000 / float64(n)
}

func (r phaseResult) serverCPUPerEvent(n int) float64 {
	return float64(r.server.Microseconds()) / float64(n)
}

// referenceConsumer is the best short consumer a user can write by hand on the unchanged
// driver: a reader goroutine that reads batches of referenceBatchSize and hands each whole batch
// to a decode goroutine, which unmarshals only fullDocument into T and keeps the resume token. It
// writes no checkpoint. It handles exactly n events, then closes the change stream.
func referenceConsumer(b *testing.B, c *mongo.Collection, opts *options.ChangeStreamOptionsBuilder, n int, started chan<- struct{}) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs, err := c.Watch(ctx, mongo.Pipeline{}, opts.SetBatchSize(referenceBatchSize).SetMaxAwaitTime(time.Second))
	if err != nil {
		b.Fatalf("reference: watch: %v", err)
	}
	defer func() { _ = cs.Close(context.Background()) }()
	if started != nil {
		close(started)
	}
	batches := make(chan []bson.Raw, 4)
	readErr := make(chan error, 1)
	go func() { // the reader: owned by this function, ended by cancel or by n events
		defer close(batches)
		var batch []bson.Raw
		for read := 0; read < n; {
			if !cs.Next(ctx) {
				readErr <- fmt.Errorf("after %d events: %v", read, cs.Err())
				return
			}
			batch = append(batch, cs.Current) // the driver does not reuse a batch's memory
			read++
			if cs.RemainingBatchLength() == 0 || read == n {
				select {
				case batches <- batch:
				case <-ctx.Done():
					return
				}
				batch = nil
			}
		}
	}()
	var sink e2eSink
	var token bson.RawValue
	handled := 0
	for batch := range batches {
		for _, ev := range batch {
			var o order
			if err := ev.Lookup("fullDocument").Unmarshal(&o); err != nil {
				b.Fatalf("reference: decode: %v", err)
			}
			sink.handle(&o)
			token = ev.Lookup("_id")
			handled++
		}
	}
	select {
	case err := <-readErr:
		b.Fatalf("reference: %v", err)
	default:
	}
	if handled != n || token.Type != bson.TypeEmbeddedDocument {
		b.Fatalf("reference: handled %d of %d events, last token %v", handled, n, token)
	}
}

// watchtreeConsumer runs a watchtree stream named name on collection coll with the default
// policies (one lane, checkpoints in mongostore on the same server) from start until its OnInsert
// handler has seen n events; the stream is then stopped gracefully, outside the measured span
// (stop is returned).
func watchtreeConsumer(b *testing.B, rt *watchtree.Runtime, name, coll string, start watchtree.StartPosition, n int) (spawned func(), wait func(), stop func()) {
	b.Helper()
	var sink e2eSink
	cd := newCountdown(n)
	var h *watchtree.Handle
	spawned = func() {
		var err error
		h, err = rt.Spawn(context.Background(), watchtree.Stream[order]{
			Name:          name,
			Collection:    coll,
			StartPosition: start,
			OnInsert: func(_ context.Context, ev *watchtree.Event[order]) error {
				sink.handle(ev.FullDocument)
				cd.tick()
				return nil
			},
		})
		if err != nil {
			b.Fatalf("spawn %s: %v", name, err)
		}
	}
	return spawned, func() { cd.wait(b, name) }, func() { stopHandle(b, h) }
}

// catchUpReference reads a backlog of n orders, written before it starts, from a point before
// them.
func catchUpReference(b *testing.B, cl *mongo.Client, server *mongosimChild, name string, n int) phaseResult {
	c, at := prepare(b, cl, name, n)
	defer drop(b, c)
	server.settle(b)
	a0, g0 := allocated()
	cpu0, sw0 := processUsage(b)
	srv0, t0 := server.cpu(), time.Now()
	referenceConsumer(b, c, options.ChangeStream().SetStartAtOperationTime(&bson.Timestamp{T: uint32(at.Unix())}), n, nil)
	cpu1, sw1 := processUsage(b)
	r := phaseResult{elapsed: time.Since(t0), cpu: cpu1 - cpu0, server: server.cpu() - srv0, vcsw: sw1 - sw0}
	a1, g1 := allocated()
	r.alloc, r.gcs = a1-a0, g1-g0
	return r
}

// catchUpWatchtree reads the same backlog with a watchtree stream started At the same point.
func catchUpWatchtree(b *testing.B, rt *watchtree.Runtime, cl *mongo.Client, server *mongosimChild, name string, n int) phaseResult {
	c, at := prepare(b, cl, name, n)
	defer drop(b, c)
	spawn, wait, stop := watchtreeConsumer(b, rt, name, name, watchtree.At(at), n)
	server.settle(b)
	a0, g0 := allocated()
	cpu0, sw0 := processUsage(b)
	srv0, t0 := server.cpu(), time.Now()
	spawn()
	wait()
	cpu1, sw1 := processUsage(b)
	r := phaseResult{elapsed: time.Since(t0), cpu: cpu1 - cpu0, server: server.cpu() - srv0, vcsw: sw1 - sw0}
	a1, g1 := allocated()
	r.alloc, r.gcs = a1-a0, g1-g0
	stop()
	return r
}

// writeLive inserts n orders into c, 1,000 per InsertMany, on a goroutine of its own; the
// returned channel yields the insert error (nil) once all are written.
func writeLive(c *mongo.Collection, n int) <-chan error {
	done := make(chan error, 1)
	go func() {
		const batch = 1000
		docs := make([]any, 0, batch)
		for i := range n {
			docs = append(docs, order{ID: bson.NewObjectID(), I: int64(i), Status: "new", Amount: 12.5})
			if len(docs) == batch || i == n-1 {
				if _, err := c.InsertMany(context.Background(), docs); err != nil {
					done <- err
					return
				}
				docs = docs[:0]
			}
		}
		done <- nil
	}()
	return done
}

// liveReference opens the reference consumer on an empty collection, then times n orders
// written while it runs, from the first insert to the last event handled.
func liveReference(b *testing.B, cl *mongo.Client, name string, n int) phaseResult {
	c := cl.Database(benchDB).Collection(name)
	defer drop(b, c)
	started := make(chan struct{})
	type begun struct {
		t0      time.Time
		cpu0    time.Duration
		written <-chan error
	}
	began := make(chan begun, 1)
	go func() { // the writer starts once the change stream is open
		<-started
		cpu0, t0 := processCPU(b), time.Now()
		began <- begun{t0: t0, cpu0: cpu0, written: writeLive(c, n)}
	}()
	referenceConsumer(b, c, options.ChangeStream(), n, started)
	end, cpuEnd := time.Now(), processCPU(b)
	bg := <-began
	r := phaseResult{elapsed: end.Sub(bg.t0), cpu: cpuEnd - bg.cpu0}
	if err := <-bg.written; err != nil {
		b.Fatalf("live insert: %v", err)
	}
	return r
}

// liveWatchtree spawns a watchtree stream at Latest on an empty collection (Spawn returns once
// the position is fixed), then times n orders written while it runs.
func liveWatchtree(b *testing.B, rt *watchtree.Runtime, cl *mongo.Client, name string, n int) phaseResult {
	c := cl.Database(benchDB).Collection(name)
	defer drop(b, c)
	spawn, wait, stop := watchtreeConsumer(b, rt, name, name, watchtree.Latest, n)
	spawn()
	cpu0, t0 := processCPU(b), time.Now()
	written := writeLive(c, n)
	wait()
	r := phaseResult{elapsed: time.Since(t0), cpu: processCPU(b) - cpu0}
	if err := <-written; err != nil {
		b.Fatalf("live insert: %v", err)
	}
	stop()
	return r
}

// ratioStats returns the median, minimum and maximum of xs.
func ratioStats(xs []float64) (median, lo, hi float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return m, s[0], s[len(s)-1]
}

// BenchmarkAgainstReference compares watchtree with the best hand-written consumer on the
// unchanged driver (referenceConsumer: a reader goroutine with batchSize 1024 and a decode
// goroutine that unmarshals only fullDocument and keeps the resume token, no checkpoints), on a
// mongosim in a child process so that the server's CPU is not counted. Each of referenceRounds
// rounds measures, for both consumers, in an order that alternates from round to round:
//   - catch-up: referenceEvents orders already in the oplog, read from a point before them
//     (watchtree: StartPosition At);
//   - live: referenceEvents orders written while the consumer runs (the writer's CPU is in the
//     process too, alike for both; live throughput is bounded by the writer).
//
// Reported, as the median over the rounds with the range (-min, -max): catch-up throughput
// ratio = watchtree / reference (target ≥ 0.95), CPU-per-event ratio = watchtree / reference
// in catch-up (target ≤ 1.3; CPU is the process's user + system time over the phase / events),
// live throughput ratio, and each side's absolute catch-up figures: events/s, CPU µs per event,
// bytes allocated per event, voluntary context switches per 1,000 events (vcsw/kevent: the
// goroutine hand-overs that put a thread to sleep) and the mongosim child's CPU µs per event
// (server-cpu-µs/event, from /proc; both consumers should cost the server the same). Before each
// catch-up phase both processes collect their garbage (mongosimChild.settle). One op is one
// whole run: run it with -benchtime 1x.
func BenchmarkAgainstReference(b *testing.B) {
	server := startMongosimChild(b)
	cl := connect(b, server.uri, nil)
	waitNextSecond()
	rt := newRuntime(b, cl, nil)
	n := referenceEvents
	var refSrv, wtSrv, refSw, wtSw []float64
	var catchUp, cpu, live, refRate, wtRate, refCPU, wtCPU, refB, wtB []float64
	for i := 0; i < b.N; i++ {
		for r := range referenceRounds {
			name := func(kind string) string { return fmt.Sprintf("%s-%d-%d", kind, i, r) }
			var refC, wtC, refL, wtL phaseResult
			if r%2 == 0 {
				refC = catchUpReference(b, cl, server, name("refc"), n)
				wtC = catchUpWatchtree(b, rt, cl, server, name("wtc"), n)
				refL = liveReference(b, cl, name("refl"), n)
				wtL = liveWatchtree(b, rt, cl, name("wtl"), n)
			} else {
				wtC = catchUpWatchtree(b, rt, cl, server, name("wtc"), n)
				refC = catchUpReference(b, cl, server, name("refc"), n)
				wtL = liveWatchtree(b, rt, cl, name("wtl"), n)
				refL = liveReference(b, cl, name("refl"), n)
			}
			catchUp = append(catchUp, wtC.rate(n)/refC.rate(n))
			cpu = append(cpu, wtC.cpuPerEvent(n)/refC.cpuPerEvent(n))
			live = append(live, wtL.rate(n)/refL.rate(n))
			refRate, wtRate = append(refRate, refC.rate(n)), append(wtRate, wtC.rate(n))
			refCPU, wtCPU = append(refCPU, refC.cpuPerEvent(n)), append(wtCPU, wtC.cpuPerEvent(n))
			refB, wtB = append(refB, float64(refC.alloc)/float64(n)), append(wtB, float64(wtC.alloc)/float64(n))
			refSrv, wtSrv = append(refSrv, refC.serverCPUPerEvent(n)), append(wtSrv, wtC.serverCPUPerEvent(n))
			refSw, wtSw = append(refSw, refC.switchesPerKEvent(n)), append(wtSw, wtC.switchesPerKEvent(n))
			b.Logf("round %d: catch-up ref %.0f wt %.0f events/s, %.2f / %.2f CPU µs/event (server %.2f / %.2f), %.1f / %.1f context switches per 1,000 events, %.0f / %.0f B/event, %d / %d GCs; live ref %.0f wt %.0f events/s",
				r, refC.rate(n), wtC.rate(n), refC.cpuPerEvent(n), wtC.cpuPerEvent(n), refSrv[len(refSrv)-1], wtSrv[len(wtSrv)-1], refSw[len(refSw)-1], wtSw[len(wtSw)-1], refB[len(refB)-1], wtB[len(wtB)-1],
				refC.gcs, wtC.gcs, refL.rate(n), wtL.rate(n))
		}
	}
	report := func(xs []float64, unit string) {
		m, lo, hi := ratioStats(xs)
		b.ReportMetric(m, unit)
		b.ReportMetric(lo, unit+"-min")
		b.ReportMetric(hi, unit+"-max")
	}
	report(catchUp, "catchup-ratio")
	report(cpu, "cpu-ratio")
	report(live, "live-ratio")
	median := func(xs []float64, unit string) {
		m, _, _ := ratioStats(xs)
		b.ReportMetric(m, unit)
	}
	median(refRate, "ref-events/s")
	median(wtRate, "wt-events/s")
	median(refCPU, "ref-cpu-µs/event")
	median(wtCPU, "wt-cpu-µs/event")
	median(refSrv, "ref-server-cpu-µs/event")
	median(wtSrv, "wt-server-cpu-µs/event")
	median(refSw, "ref-vcsw/kevent")
	median(wtSw, "wt-vcsw/kevent")
	median(refB, "ref-B/event")
	median(wtB, "wt-B/event")
}
