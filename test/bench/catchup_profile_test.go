package bench

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/watchtree/watchtree"
)

// BenchmarkCatchUpWatchtree runs only watchtree's catch-up: one backlog of referenceEvents
// orders is written once, before the timer starts, and every op reads it with a new stream
// (its own checkpoints) started At a point before it, until the handler has seen every event.
// mongosim runs in a child process, so a CPU or allocation profile of this benchmark shows the
// consumer side only (plus the one-off backlog insert):
//
//	go test -C test -run '^$' -bench CatchUpWatchtree -benchtime 5x -cpuprofile cpu.out -memprofile mem.out ./bench/
//
// Reported per event: the process's CPU time (µs) and its heap allocations (count and bytes,
// from runtime.MemStats, so the driver's and the actors' allocations are included).
// catchUpRuns numbers the streams of BenchmarkCatchUpWatchtree across its runs (b.N of 1, then
// more), so that each starts without a checkpoint.
var catchUpRuns atomic.Int64

func BenchmarkCatchUpWatchtree(b *testing.B) {
	cl := connect(b, startMongosimProcess(b), nil)
	waitNextSecond()
	rt := newRuntime(b, cl, nil)
	n := referenceEvents
	c, at := prepare(b, cl, "catchup-backlog", n)
	defer drop(b, c)
	var cpu, allocs, bytes float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		spawn, wait, stop := watchtreeConsumer(b, rt, fmt.Sprintf("catchup-%d", catchUpRuns.Add(1)), "catchup-backlog", watchtree.At(at), n)
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		cpu0 := processCPU(b)
		spawn()
		wait()
		cpu += float64((processCPU(b) - cpu0).Microseconds())
		runtime.ReadMemStats(&m1)
		allocs += float64(m1.Mallocs - m0.Mallocs)
		bytes += float64(m1.TotalAlloc - m0.TotalAlloc)
		b.StopTimer()
		stop()
		b.StartTimer()
	}
	events := float64(b.N * n)
	b.ReportMetric(cpu/events, "cpu-µs/event")
	b.ReportMetric(allocs/events, "allocs/event")
	b.ReportMetric(bytes/events, "B/event")
	b.ReportMetric(events/b.Elapsed().Seconds(), "events/s")
}
