package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/store/mongostore"
)

const (
	// idleStreams is the number of streams of BenchmarkIdleStreamMemory, as in the issue.
	idleStreams = 1000
	// idleSettle is how long the streams idle before the heap is read: three MaxAwaitTime
	// periods (1s), so every cursor has completed empty getMores and sits in its next one.
	idleSettle = 3 * time.Second
)

// memReading is the process's memory after two forced collections.
type memReading struct {
	heap, stack uint64 // live heap (HeapAlloc right after GC), goroutine stacks (StackInuse)
	goroutines  int
}

func readMem() memReading {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memReading{heap: ms.HeapAlloc, stack: ms.StackInuse, goroutines: runtime.NumGoroutine()}
}

// perStream returns (after - before) / idleStreams in KiB, for heap and stack, and the
// goroutines per stream.
// settledMem is readMem once the heap has stopped shrinking: what an earlier benchmark left
// (a server closed, connections and goroutines still ending) would otherwise be freed during
// the measured phase and shrink its delta (a raw baseline of 1.5 KB per stream instead of 9.2
// after BenchmarkLeaderBalance30 read watchtree's own heap as 22 KB instead of 14). It polls
// every 100 ms, for at most 10 s, until two readings differ by less than 1% of the heap and
// show the same number of goroutines.
func settledMem() memReading {
	prev := readMem()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond) // the polling period
		cur := readMem()
		diff := int64(cur.heap) - int64(prev.heap)
		if cur.goroutines == prev.goroutines && max(diff, -diff) < int64(prev.heap/100) {
			return cur
		}
		prev = cur
	}
	return prev
}

func perStream(before, after memReading) (heapKB, stackKB, goroutines float64) {
	d := func(a, b uint64) float64 { return (float64(a) - float64(b)) / idleStreams / 1024 }
	return d(after.heap, before.heap), d(after.stack, before.stack),
		float64(after.goroutines-before.goroutines) / idleStreams
}

// rawIdleStreams opens idleStreams raw driver change streams (one per collection, each read by
// its own goroutine in ChangeStream.Next, MaxAwaitTime 1s), lets them idle, reads the memory,
// and closes them: the cost of the cursors themselves, without watchtree.
func rawIdleStreams(b *testing.B, cl *mongo.Client) (before, after memReading) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	before = settledMem()
	var wg sync.WaitGroup
	css := make([]*mongo.ChangeStream, 0, idleStreams)
	for i := range idleStreams {
		cs, err := cl.Database(benchDB).Collection(fmt.Sprintf("raw-idle-%04d", i)).Watch(ctx, mongo.Pipeline{},
			options.ChangeStream().SetMaxAwaitTime(time.Second))
		if err != nil {
			b.Fatalf("watch %d: %v", i, err)
		}
		css = append(css, cs)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for cs.Next(ctx) {
			}
		}()
	}
	time.Sleep(idleSettle) // a steady state to measure, not a wait for a condition
	after = readMem()
	cancel()
	wg.Wait()
	for _, cs := range css {
		_ = cs.Close(context.Background())
	}
	return before, after
}

// BenchmarkIdleStreamMemory measures the memory of idle streams: idleStreams streams (one per
// collection, nothing written) spawned on one runtime, with mongosim in a child process so that
// only the client side is in the measured process, on a client whose pool holds a connection
// per cursor. After idleSettle the live heap is read (after two GCs) and compared with the heap
// after rt.Start. In the same run, before the runtime starts, the same number of raw driver
// change streams (each read by its own goroutine) give the baseline. Reported:
//   - heap-KB/stream: watchtree's live heap per idle stream, cursor and connection included
//     (target ≤ 64 KB);
//   - raw-heap-KB/stream and own-heap-KB/stream (= watchtree − raw, what watchtree adds beyond
//     the driver's own cursor; target ≤ 16 KB);
//   - stack-KB/stream and goroutines/stream (target ≤ 2: the reader and the driver's listener
//     of its pending getMore; goroutine stacks are not in the heap; the raw baseline's in
//     raw-stack-KB/stream), and heap+stack-KB/stream;
//   - idle-checkpoint-writes/s: checkpoint writes of all the idle streams together while they
//     idle, counted with a command monitor on the client (an idle stream writes its moving
//     post-batch resume token once per CheckpointPolicy.IdleInterval, 5 minutes by default, so
//     this should be 0; each such write moves every other stream's PBRT, so a short interval
//     makes idle streams keep each other writing);
//   - idle-allocs/stream/s and idle-alloc-B/stream/s: what the idle streams allocate while they
//     idle (the garbage of their getMores, one per MaxAwaitTime, and of their timers), per
//     stream and second (the whole process's, the driver's included; the raw baseline's is not
//     measured);
//   - spawn-ms/stream: Spawn until every stream is running.
func BenchmarkIdleStreamMemory(b *testing.B) {
	uri := startMongosimProcess(b)
	var ckptWrites atomic.Int64 // checkpoint writes sent by this client
	monitor := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		if e.CommandName == "update" {
			if coll, ok := e.Command.Lookup("update").StringValueOK(); ok && coll == mongostore.DefaultCheckpointCollection {
				ckptWrites.Add(1)
			}
		}
	}}
	cl := connect(b, uri, func(o *options.ClientOptions) { o.SetMaxPoolSize(idleStreams + 100).SetMonitor(monitor) })
	for i := 0; i < b.N; i++ {
		rawBefore, rawAfter := rawIdleStreams(b, cl)
		rawHeap, rawStack, _ := perStream(rawBefore, rawAfter)

		rt, stop := startRuntime(b, cl, nil)
		before := settledMem()
		if path := os.Getenv("WATCHTREE_IDLE_HEAPPROFILE"); path != "" {
			writeHeapProfile(b, path+".before")
		}
		start := time.Now()
		for s := range idleStreams {
			name := fmt.Sprintf("idle-%04d-%d", s, i)
			if _, err := rt.Spawn(context.Background(), watchtree.Stream[bson.Raw]{
				Name:       name,
				Collection: name,
				OnChange:   func(context.Context, *watchtree.Event[bson.Raw]) error { return nil },
			}); err != nil {
				b.Fatalf("spawn %s: %v", name, err)
			}
		}
		deadline := time.Now().Add(stallAfter)
		for {
			running := 0
			sts, _ := rt.Streams(context.Background())
			for _, st := range sts {
				if st.State == watchtree.StateRunning {
					running++
				}
			}
			if running == idleStreams {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d streams running after %v", running, idleStreams, stallAfter)
			}
			time.Sleep(50 * time.Millisecond)
		}
		spawnMS := float64(time.Since(start).Milliseconds()) / idleStreams
		writesBefore := ckptWrites.Load()
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		time.Sleep(idleSettle) // a steady state to measure, not a wait for a condition
		runtime.ReadMemStats(&ms1)
		idleWrites := float64(ckptWrites.Load()-writesBefore) / idleSettle.Seconds()
		perStreamSec := func(a, b uint64) float64 { return float64(b-a) / idleSettle.Seconds() / idleStreams }
		after := readMem()
		if path := os.Getenv("WATCHTREE_IDLE_HEAPPROFILE"); path != "" {
			writeHeapProfile(b, path)
		}
		stop()

		heap, stack, gor := perStream(before, after)
		b.ReportMetric(heap, "heap-KB/stream")
		b.ReportMetric(rawHeap, "raw-heap-KB/stream")
		b.ReportMetric(heap-rawHeap, "own-heap-KB/stream")
		b.ReportMetric(stack, "stack-KB/stream")
		b.ReportMetric(rawStack, "raw-stack-KB/stream")
		b.ReportMetric(heap+stack, "heap+stack-KB/stream")
		b.ReportMetric(idleWrites, "idle-checkpoint-writes/s")
		b.ReportMetric(perStreamSec(ms0.Mallocs, ms1.Mallocs), "idle-allocs/stream/s")
		b.ReportMetric(perStreamSec(ms0.TotalAlloc, ms1.TotalAlloc), "idle-alloc-B/stream/s")
		b.ReportMetric(gor, "goroutines/stream")
		b.ReportMetric(spawnMS, "spawn-ms/stream")
	}
}

// writeHeapProfile writes the heap profile (live objects as of the last GC) to path: set
// WATCHTREE_IDLE_HEAPPROFILE to see what the idle streams hold while they still run (the
// -memprofile of go test is written after they stopped).
func writeHeapProfile(b *testing.B, path string) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatalf("heap profile: %v", err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatalf("heap profile: %v", err)
	}
}
