// Package bench holds watchtree's benchmarks: the performance targets, measured with
// `go test -bench` and reported through b.ReportMetric, never asserted in timed unit tests.
// The package has no tests; `make test` compiles it and runs nothing.
//
//	go test -C test -run '^$' -bench . -benchmem ./bench/
//
// The benchmarks and their targets (on the 2-core CI machine):
//
//   - BenchmarkPipelineOverhead lives in the root module (actors/supervisor), since it drives
//     the tree's private actor messages: `go test -run '^$' -bench PipelineOverhead
//     ./actors/supervisor/`. A synthetic stream actor feeds the real tree (stream supervisor,
//     checkpointer with memstore, dispatcher with a no-op Router). Reports events/s (target ≥
//     1,000,000), exact allocs/event, checkpoint writes per 100,000 events, and the ratio to a
//     messaging floor measured in the same run (the same batches sent to an actor that only
//     grants credit back).
//   - BenchmarkEndToEnd: orders already in the oplog of a mongosim running in a child process,
//     read by watchtree streams (decode into Event[T] + handler + checkpointing) and by a raw
//     driver loop (ChangeStream.Next + the fullDocument decoded into T), in alternating phases of
//     the same run. Reports both rates and their ratio (target ≥ 0.9).
//   - BenchmarkAgainstReference: watchtree against the best hand-written consumer (a reader
//     goroutine with batchSize 1024, a decode goroutine that unmarshals only fullDocument and
//     keeps the resume token, no checkpoints), 50,000 events a phase over 5 alternating rounds,
//     mongosim in a child process. Reports the median and range of the catch-up throughput ratio
//     (target ≥ 0.95), the CPU-per-event ratio (process CPU time / events; target ≤ 1.3) and the
//     live throughput ratio. Run it with -benchtime 1x.
//   - BenchmarkLanes: a handler sleeping 1ms, 8 lanes against 1 lane in the same run, with
//     per-document order and completeness checked. Reports the speed-up (target ≥ 7).
//   - BenchmarkCheckpointWrites: 100,000 events through a stream with the default
//     CheckpointPolicy; reports checkpoint writes per 100,000 events, counted by the server's
//     command log (update commands on the checkpoint collection) and by the Observer.
//   - BenchmarkIdleStreamMemory: 1,000 idle streams spawned on one runtime, with mongosim in
//     a child process so only the client side is measured. Reports live heap per stream
//     (target ≤ 64 KB) against a baseline of 1,000 raw driver change streams, goroutine stacks,
//     and the idle streams' checkpoint write rate.
//   - BenchmarkLeaderGracefulHandover: two runtimes share a SingleLeader stream (default
//     LeasePolicy) under one insert per millisecond; from the leader's Handle.Stop to the first
//     event handled by the standby (target < 1s), against an AllInstances stream's Stop + Start
//     to its first event in the same run.
//   - BenchmarkLeaderCrashFailover: TTL 2s; the leader's lease I/O frozen as a dead process's
//     would be, to the first event on the new leader (target ≤ TTL + 0.5s), beside the polling
//     formula TTL + StandbyPoll; on MongoDB and Redis leases.
//   - BenchmarkLeaseWriteLoad: lease store calls per stream per minute as leader and standby,
//     measured at the default policy scaled down tenfold; on MongoDB and Redis.
//   - BenchmarkLeaderBalance30: 3 instances × 30 SingleLeader streams started together, to
//     10 leaderships each.
//   - BenchmarkSharedManyStreams: 10,000 Collection streams (shared cursors, the default) over
//     100 collections on one runtime with a default client, mongosim in a child process: time
//     until every stream runs (target ≤ 60 s), hub cursors open at once (≤ 1), the client's
//     connections from its pool events (≤ 20), heap, goroutines and stacks per idle stream, the
//     hub side of a member from the sampled heap profile (≤ 4 KB), and one insert per collection
//     delivered to every stream. Run it alone with
//     `go test -run '^$' -bench BenchmarkSharedManyStreams -benchtime 1x ./bench/` (about 2 min).
//   - BenchmarkSharedThroughput: the same total write load read by 100 members on 100
//     collections, one dedicated stream and 100 dedicated streams, in alternating rounds:
//     throughput ratio members / one stream (target ≥ 0.9) and mongosim's CPU per event (child
//     process, /proc; target ≤ 1.2× one stream's), the 100 dedicated streams' beside them.
//   - BenchmarkSharedStall: 100 members; one member's handler blocks 1 s, the 99 others'
//     throughput against an undisturbed phase (target ≥ 0.9×).
//
// Ratios compare figures measured in the same run, so that the load of a shared machine
// affects both sides alike: baseline phases run before and after (or alternate with) the
// measured ones. The child-process server is this test binary re-executed with the environment
// variable WATCHTREE_BENCH_MONGOSIM_CHILD=1 (see TestMain).
package bench
