package main

// A row is one line of docs/benchmarks.md: a figure of one benchmark, the baseline it is
// compared with (measured in the same `make bench` run) and their ratio.
type row struct {
	Group  string // the section heading
	Label  string // what is measured
	Bench  string // benchmark name as printed, without the -GOMAXPROCS suffix
	Metric string // the figure's unit as reported (b.ReportMetric, or ns/op, allocs/op)
	// BaseBench and BaseMetric name the baseline; BaseBench empty means Bench itself. No
	// BaseMetric: an absolute figure with no baseline.
	BaseBench, BaseMetric string
	// Ratio is the unit of a ratio the benchmark reports itself (it may be the median of rounds
	// inside one run); empty: Metric / BaseMetric, computed per run.
	Ratio  string
	Target string // the target, in words; empty for none
}

// rows is the report's content. Every benchmark of the repository has at least one row
// (TestEveryBenchmarkHasARow checks it), so a new benchmark cannot be left out silently.
var rows = []row{
	// test/mongosim
	{Group: "mongosim", Label: "inserts/s, one client", Bench: "BenchmarkInsert", Metric: "inserts/s"},
	{Group: "mongosim", Label: "inserts/s, parallel clients (baseline: one client)", Bench: "BenchmarkInsertParallel", Metric: "inserts/s",
		BaseBench: "BenchmarkInsert", BaseMetric: "inserts/s"},
	{Group: "mongosim", Label: "change events/s delivered to one watcher", Bench: "BenchmarkChangeStreamThroughput", Metric: "events/s"},
	{Group: "mongosim", Label: "insert-to-event latency p50, ms", Bench: "BenchmarkChangeStreamLatency", Metric: "p50-ms"},
	{Group: "mongosim", Label: "insert-to-event latency p99, ms (baseline: p50)", Bench: "BenchmarkChangeStreamLatency", Metric: "p99-ms", BaseMetric: "p50-ms"},
	{Group: "mongosim", Label: "inserts/s with 100 idle change streams (baseline: none open)", Bench: "BenchmarkInsertWithIdleWatchers",
		Metric: "inserts/s-100-watchers", BaseMetric: "inserts/s-0-watchers", Ratio: "ratio", Target: "ratio ≈ 1"},
	{Group: "mongosim", Label: "events/s of a database stream with the shared-cursor hub's $match on ns.coll, pushed down into the oplog scan (baseline: not pushed down)",
		Bench: "BenchmarkChangeStreamNamespaceMatch/pushdown=true", Metric: "events/s", BaseBench: "BenchmarkChangeStreamNamespaceMatch/pushdown=false", BaseMetric: "events/s"},
	{Group: "mongosim", Label: "events built per event delivered by that stream, pushed down (baseline: not pushed down)",
		Bench: "BenchmarkChangeStreamNamespaceMatch/pushdown=true", Metric: "built/event", BaseBench: "BenchmarkChangeStreamNamespaceMatch/pushdown=false", BaseMetric: "built/event"},
	{Group: "mongosim", Label: "mongosim's ns per event of that stream, server side alone, pushed down (baseline: not pushed down)",
		Bench: "BenchmarkChangeStreamNamespaceMatchServer/pushdown=true", Metric: "ns/op", BaseBench: "BenchmarkChangeStreamNamespaceMatchServer/pushdown=false", BaseMetric: "ns/op"},
	{Group: "mongosim", Label: "snapshot chunk queries/s through the _id index (baseline: the same query scanned and sorted)", Bench: "BenchmarkFindIDRange",
		Metric: "indexed-chunks/s", BaseMetric: "scanned-chunks/s", Ratio: "index-speedup", Target: "> 1"},

	// the pipeline without a server
	{Group: "pipeline", Label: "tree overhead, 1 lane, events/s (baseline: messaging floor)", Bench: "BenchmarkPipelineOverhead/lanes=1",
		Metric: "events/s", BaseMetric: "floor-events/s", Ratio: "ratio-to-floor", Target: "≥ 1,000,000 events/s"},
	{Group: "pipeline", Label: "tree overhead, 8 lanes, events/s (baseline: messaging floor)", Bench: "BenchmarkPipelineOverhead/lanes=8",
		Metric: "events/s", BaseMetric: "floor-events/s", Ratio: "ratio-to-floor", Target: "≥ 1,000,000 events/s"},
	{Group: "pipeline", Label: "tree overhead, allocations per event, 1 lane", Bench: "BenchmarkPipelineOverhead/lanes=1", Metric: "allocs/event"},
	{Group: "pipeline", Label: "checkpoint writes per 100,000 events, tree overhead", Bench: "BenchmarkPipelineOverhead/lanes=1", Metric: "writes/100k-events"},
	{Group: "pipeline", Label: "dispatcher alone, 1 lane, events/s", Bench: "BenchmarkDispatcherPipeline/lanes=1", Metric: "events/s"},
	{Group: "pipeline", Label: "dispatcher alone, 8 lanes, events/s (baseline: 1 lane)", Bench: "BenchmarkDispatcherPipeline/lanes=8", Metric: "events/s",
		BaseBench: "BenchmarkDispatcherPipeline/lanes=1", BaseMetric: "events/s"},
	{Group: "pipeline", Label: "dispatcher, 1 ms handler, 8 lanes, events/s (baseline: 1 lane)", Bench: "BenchmarkDispatcherLanesSlowHandler/lanes=8",
		Metric: "events/s", BaseBench: "BenchmarkDispatcherLanesSlowHandler/lanes=1", BaseMetric: "events/s", Target: "≥ 7×"},
	{Group: "pipeline", Label: "stream actor's reader, events/s", Bench: "BenchmarkStreamReader", Metric: "events/s"},
	{Group: "pipeline", Label: "checkpointer's low-water mark, ns per event", Bench: "BenchmarkTracker", Metric: "ns/op"},
	{Group: "pipeline", Label: "checkpointer actor, ns per settled event (baseline: the low-water mark alone)", Bench: "BenchmarkActorSettle",
		Metric: "ns/op", BaseBench: "BenchmarkTracker", BaseMetric: "ns/op"},
	{Group: "pipeline", Label: "checkpointer actor, writes per 100,000 events", Bench: "BenchmarkActorSettle", Metric: "writes/100k"},
	{Group: "pipeline", Label: "routing one event to its handler, ns", Bench: "BenchmarkRoute", Metric: "ns/op"},
	{Group: "pipeline", Label: "a lane's work per event (route, call, release), ns (baseline: the reference consumer's decode of the same event)",
		Bench: "BenchmarkRouteAgainstReference/watchtree", Metric: "ns/op", BaseBench: "BenchmarkRouteAgainstReference/reference", BaseMetric: "ns/op"},
	{Group: "pipeline", Label: "decoding an event into a struct, ns (baseline: into bson.Raw)", Bench: "BenchmarkDecodeEvent/struct", Metric: "ns/op",
		BaseBench: "BenchmarkDecodeEvent/raw", BaseMetric: "ns/op"},
	{Group: "pipeline", Label: "memstore checkpoint save, ns", Bench: "BenchmarkSave", Metric: "ns/op"},
	{Group: "pipeline", Label: "walking a change event's top-level elements, ns (baseline: bsoncore's reader)", Bench: "BenchmarkWalk/rawbson",
		Metric: "ns/op", BaseBench: "BenchmarkWalk/bsoncore", BaseMetric: "ns/op"},
	{Group: "pipeline", Label: "finding an event's documentKey (its lane), ns (baseline: bsoncore's lookup)", Bench: "BenchmarkLaneKey/laneKey",
		Metric: "ns/op", BaseBench: "BenchmarkLaneKey/bsoncore", BaseMetric: "ns/op"},
	{Group: "pipeline", Label: "encoding 256 settlements as runs, eight lanes' order, ns (baseline: in seq order)", Bench: "BenchmarkSettledRuns/lanes=8",
		Metric: "ns/op", BaseBench: "BenchmarkSettledRuns/lanes=1", BaseMetric: "ns/op"},
	{Group: "pipeline", Label: "the OpenTelemetry adapter per handler call (process span, histogram), with the SDK, ns (baseline: no-op providers: the adapter's own work)",
		Bench: "BenchmarkTraceHandler/sdk", Metric: "ns/op", BaseBench: "BenchmarkTraceHandler/noop", BaseMetric: "ns/op"},

	// end to end on mongosim
	{Group: "end to end", Label: "a console snapshot with MongoDB frozen, ns (baseline: the same with MongoDB healthy)", Bench: "BenchmarkConsoleDuringOutage/frozen",
		Metric: "ns/op", BaseBench: "BenchmarkConsoleDuringOutage/healthy", BaseMetric: "ns/op"},
	{Group: "end to end", Label: "the slowest console snapshot with MongoDB frozen, ms", Bench: "BenchmarkConsoleDuringOutage/frozen", Metric: "max-ms"},
	{Group: "end to end", Label: "catch-up events/s, watchtree (baseline: raw driver loop)", Bench: "BenchmarkEndToEnd",
		Metric: "watchtree-events/s", BaseMetric: "raw-events/s", Ratio: "ratio", Target: "ratio ≥ 0.9"},
	{Group: "end to end", Label: "catch-up events/s against the best hand-written consumer (median of rounds)", Bench: "BenchmarkAgainstReference",
		Metric: "wt-events/s", BaseMetric: "ref-events/s", Ratio: "catchup-ratio", Target: "ratio ≥ 0.95"},
	{Group: "end to end", Label: "CPU µs per event against the hand-written consumer", Bench: "BenchmarkAgainstReference",
		Metric: "wt-cpu-µs/event", BaseMetric: "ref-cpu-µs/event", Ratio: "cpu-ratio", Target: "ratio ≤ 1.3"},
	{Group: "end to end", Label: "live throughput ratio against the hand-written consumer", Bench: "BenchmarkAgainstReference", Metric: "live-ratio"},
	{Group: "end to end", Label: "voluntary context switches per 1,000 events in catch-up against the hand-written consumer", Bench: "BenchmarkAgainstReference",
		Metric: "wt-vcsw/kevent", BaseMetric: "ref-vcsw/kevent"},
	{Group: "end to end", Label: "mongosim's CPU µs per event serving the catch-up, watchtree (baseline: the hand-written consumer)", Bench: "BenchmarkAgainstReference",
		Metric: "wt-server-cpu-µs/event", BaseMetric: "ref-server-cpu-µs/event"},
	{Group: "end to end", Label: "bytes allocated per event in catch-up against the hand-written consumer", Bench: "BenchmarkAgainstReference",
		Metric: "wt-B/event", BaseMetric: "ref-B/event"},
	{Group: "end to end", Label: "watchtree's catch-up alone, events/s", Bench: "BenchmarkCatchUpWatchtree", Metric: "events/s"},
	{Group: "end to end", Label: "watchtree's catch-up alone, CPU µs per event", Bench: "BenchmarkCatchUpWatchtree", Metric: "cpu-µs/event"},
	{Group: "end to end", Label: "watchtree's catch-up alone, allocations per event", Bench: "BenchmarkCatchUpWatchtree", Metric: "allocs/event"},
	{Group: "end to end", Label: "checkpoint writes per 100,000 events, default policy", Bench: "BenchmarkCheckpointWrites",
		Metric: "writes/100k-events", Target: "not one per event"},

	// sinks
	{Group: "sinks", Label: "events/s into JetStream through sink.Handler, 8 publishers (baseline: a hand-written loop publishing the raw BSON event with Nats-Msg-Id, PubAck awaited)",
		Bench: "BenchmarkJetStreamSink", Metric: "sink-events/s", BaseMetric: "loop-events/s", Ratio: "ratio", Target: "ratio ≥ 0.8"},
	{Group: "sinks", Label: "the same, as a ratio to a hand-written loop publishing the sink's payload (canonical Extended JSON)",
		Bench: "BenchmarkJetStreamSink", Metric: "ratio-same-payload"},
	{Group: "sinks", Label: "events/s into RabbitMQ through sink.Handler, 8 publishers (baseline: a hand-written loop publishing the raw BSON event with message-id, confirm awaited)",
		Bench: "BenchmarkRabbitMQSink", Metric: "sink-events/s", BaseMetric: "loop-events/s", Ratio: "ratio", Target: "ratio ≥ 0.8"},
	{Group: "sinks", Label: "RabbitMQ sink against the same loop publishing the same Extended JSON payload (ratio)",
		Bench: "BenchmarkRabbitMQSink", Metric: "ratio-same-payload"},
	{Group: "sinks", Label: "RabbitMQ, what the gap is made of: the loop with the sink's Extended JSON payload, against the raw-BSON loop (ratio)",
		Bench: "BenchmarkRabbitMQSinkFactors", Metric: "json/loop"},
	{Group: "sinks", Label: "RabbitMQ: that loop with the sink's other properties too (mandatory, Watchtree-Key, timestamp), against the raw-BSON loop (ratio)",
		Bench: "BenchmarkRabbitMQSinkFactors", Metric: "props/loop"},
	{Group: "sinks", Label: "RabbitMQ: the sink behind the same sink.Handler, against the raw-BSON loop (ratio)",
		Bench: "BenchmarkRabbitMQSinkFactors", Metric: "sink/loop"},
	{Group: "sinks", Label: "RabbitMQ: the raw-BSON loop on a channel per publisher, against one channel (ratio)",
		Bench: "BenchmarkRabbitMQSinkFactors", Metric: "loop8ch/loop"},
	{Group: "sinks", Label: "RabbitMQ: the raw-BSON loop with transient messages (no disk write before the confirm: not a fair baseline), against persistent (ratio)",
		Bench: "BenchmarkRabbitMQSinkFactors", Metric: "transient/loop"},
	{Group: "sinks", Label: "events/s into Kafka (kfake) through sink.Handler, 8 publishers (baseline: a hand-written ProduceSync loop of the raw BSON event, idempotent producer, acks=all)",
		Bench: "BenchmarkKafkaSink", Metric: "sink-events/s", BaseMetric: "loop-events/s", Ratio: "ratio", Target: "ratio ≥ 0.8"},
	{Group: "sinks", Label: "Kafka sink against the same loop producing the same Extended JSON payload (ratio)",
		Bench: "BenchmarkKafkaSink", Metric: "ratio-same-payload"},
	{Group: "sinks", Label: "the sinks' default payload: a change event as canonical Extended JSON, ns (baseline: bson.MarshalExtJSON, byte-identical output, same run)",
		Bench: "BenchmarkExtJSON", Metric: "ns/op", BaseMetric: "driver-ns/op"},

	// lanes
	{Group: "exactly once", Label: "Transactional, TxBatch 100, events/s (baseline: the same handler without a transaction)", Bench: "BenchmarkTransactional",
		Metric: "batch100-events/s", BaseMetric: "plain-events/s", Ratio: "ratio", Target: "ratio ≥ 0.5"},
	{Group: "exactly once", Label: "Transactional, a transaction per event, events/s (baseline: without a transaction)", Bench: "BenchmarkTransactional",
		Metric: "txn-events/s", BaseMetric: "plain-events/s", Ratio: "ratio"},
	{Group: "lanes", Label: "1 ms handler, 8 lanes, events/s (baseline: 1 lane), order checked", Bench: "BenchmarkLanes",
		Metric: "lanes8-events/s", BaseMetric: "lanes1-events/s", Ratio: "speedup", Target: "≥ 7×"},

	// memory
	{Group: "memory", Label: "heap per idle stream, KB (baseline: a raw driver change stream)", Bench: "BenchmarkIdleStreamMemory",
		Metric: "heap-KB/stream", BaseMetric: "raw-heap-KB/stream"},
	{Group: "memory", Label: "watchtree's own heap per idle stream, KB (the heap less the driver's cursor)", Bench: "BenchmarkIdleStreamMemory",
		Metric: "own-heap-KB/stream", Target: "≤ 16 KB"},
	{Group: "memory", Label: "heap + goroutine stacks per idle stream, KB", Bench: "BenchmarkIdleStreamMemory", Metric: "heap+stack-KB/stream"},
	{Group: "memory", Label: "goroutines per idle stream", Bench: "BenchmarkIdleStreamMemory", Metric: "goroutines/stream", Target: "≤ 2"},
	{Group: "memory", Label: "idle streams' checkpoint writes/s (1,000 streams)", Bench: "BenchmarkIdleStreamMemory", Metric: "idle-checkpoint-writes/s"},

	// failover
	{Group: "failover", Label: "graceful handover, ms (baseline: an AllInstances stream's Stop + Start)", Bench: "BenchmarkLeaderGracefulHandover",
		Metric: "handover-ms", BaseMetric: "restart-baseline-ms", Ratio: "handover/restart", Target: "< 1,000 ms"},
	{Group: "failover", Label: "crash failover, MongoDB leases, TTL 2s, ms (baseline: polling formula TTL + StandbyPoll)", Bench: "BenchmarkLeaderCrashFailover/mongo",
		Metric: "failover-ms", BaseMetric: "polling-formula-ms", Target: "≤ 2,500 ms (TTL + 0.5s)"},
	{Group: "failover", Label: "crash failover, Redis leases, TTL 2s, ms (baseline: polling formula)", Bench: "BenchmarkLeaderCrashFailover/redis",
		Metric: "failover-ms", BaseMetric: "polling-formula-ms", Target: "≤ 2,500 ms (TTL + 0.5s)"},
	{Group: "failover", Label: "lease calls per minute as leader, MongoDB (baseline: 60s / RenewEvery)", Bench: "BenchmarkLeaseWriteLoad/mongo",
		Metric: "leader-calls/min", BaseMetric: "leader-formula/min"},
	{Group: "failover", Label: "lease calls per minute as standby, MongoDB", Bench: "BenchmarkLeaseWriteLoad/mongo", Metric: "standby-calls/min"},
	{Group: "failover", Label: "lease calls per minute as leader, Redis (baseline: 60s / RenewEvery)", Bench: "BenchmarkLeaseWriteLoad/redis",
		Metric: "leader-calls/min", BaseMetric: "leader-formula/min"},
	{Group: "failover", Label: "lease calls per minute as standby, Redis", Bench: "BenchmarkLeaseWriteLoad/redis", Metric: "standby-calls/min"},

	// balance
	{Group: "balance", Label: "3 instances × 30 SingleLeader streams to 10 leaderships each, ms", Bench: "BenchmarkLeaderBalance30", Metric: "balance-ms"},
	{Group: "balance", Label: "the same, in renew periods", Bench: "BenchmarkLeaderBalance30", Metric: "renew-periods"},

	// snapshot
	{Group: "snapshot", Label: "snapshot, 1 partition, docs/s (baseline: raw find loop)", Bench: "BenchmarkSnapshot",
		Metric: "p1-docs/s", BaseMetric: "raw-docs/s", Ratio: "p1-ratio", Target: "ratio ≥ 0.9"},
	{Group: "snapshot", Label: "snapshot, 4 partitions, docs/s (baseline: raw find loop)", Bench: "BenchmarkSnapshot",
		Metric: "p4-docs/s", BaseMetric: "raw-docs/s", Ratio: "p4-ratio", Target: "ratio ≥ 1.3"},
	{Group: "snapshot", Label: "snapshot, 1 partition, against the same chunked queries by hand (ratio)", Bench: "BenchmarkSnapshot", Metric: "p1-vs-chunked-ratio"},
	{Group: "snapshot", Label: "snapshot, 4 partitions with 5,000-document chunks, against the raw loop (ratio)", Bench: "BenchmarkSnapshot", Metric: "p4-batch5000-ratio"},
	{Group: "snapshot", Label: "resume from 50%, ms (baseline: a full snapshot)", Bench: "BenchmarkSnapshotResume",
		Metric: "resume-ms", BaseMetric: "full-ms", Ratio: "resume-ratio", Target: "ratio ≈ 0.5"},
	// shared cursors (issue 38)
	{Group: "shared cursors", Label: "10,000 streams over 100 collections, default client: Spawn until every one runs, s", Bench: "BenchmarkSharedManyStreams",
		Metric: "running-s", Target: "≤ 60 s"},
	{Group: "shared cursors", Label: "the same, until every one reads the hub's cursor (attached), s", Bench: "BenchmarkSharedManyStreams", Metric: "attached-s"},
	{Group: "shared cursors", Label: "hub cursors open at once on the server (one option class, one database)", Bench: "BenchmarkSharedManyStreams",
		Metric: "hub-cursors", Target: "≤ 1"},
	{Group: "shared cursors", Label: "hub cursor opens for the 10,000 Spawns", Bench: "BenchmarkSharedManyStreams", Metric: "hub-opens"},
	{Group: "shared cursors", Label: "connections of the runtime's client, at most, spawning, idle and delivering (pool events)", Bench: "BenchmarkSharedManyStreams",
		Metric: "peak-conns", Target: "≤ 20"},
	{Group: "shared cursors", Label: "connections, at most, until the inserts (Spawns and idling only)", Bench: "BenchmarkSharedManyStreams", Metric: "spawn-peak-conns"},
	{Group: "shared cursors", Label: "connections, at most, Runtime.Stop included (final checkpoints)", Bench: "BenchmarkSharedManyStreams", Metric: "stop-peak-conns"},
	{Group: "shared cursors", Label: "heap per idle stream, its whole tree with its member, KB", Bench: "BenchmarkSharedManyStreams", Metric: "heap-KB/stream"},
	{Group: "shared cursors", Label: "the hub side of an idle member (heap allocated by the hub and member code), KB", Bench: "BenchmarkSharedManyStreams",
		Metric: "member-heap-KB", Target: "≤ 4 KB"},
	{Group: "shared cursors", Label: "goroutines per idle stream (the stream's reader; a member has none of its own)", Bench: "BenchmarkSharedManyStreams",
		Metric: "goroutines/stream"},
	{Group: "shared cursors", Label: "goroutine stacks per idle stream, KB", Bench: "BenchmarkSharedManyStreams", Metric: "stack-KB/stream"},
	{Group: "shared cursors", Label: "one insert per collection, until all 10,000 streams have theirs, s", Bench: "BenchmarkSharedManyStreams", Metric: "delivered-s"},
	{Group: "shared cursors", Label: "fraction of the 10,000 streams that got their collection's insert exactly once", Bench: "BenchmarkSharedManyStreams",
		Metric: "delivered-fraction", Target: "1"},
	{Group: "shared cursors", Label: "100 members on 100 collections, events/s (baseline: one dedicated stream, the same total write load; median of rounds)",
		Bench: "BenchmarkSharedThroughput", Metric: "shared-events/s", BaseMetric: "dedicated1-events/s", Ratio: "throughput-ratio", Target: "ratio ≥ 0.9"},
	{Group: "shared cursors", Label: "100 dedicated streams on 100 collections, events/s (baseline: one dedicated stream)", Bench: "BenchmarkSharedThroughput",
		Metric: "dedicated100-events/s", BaseMetric: "dedicated1-events/s"},
	{Group: "shared cursors", Label: "the writes alone, no stream, events/s (the writer's ceiling)", Bench: "BenchmarkSharedThroughput", Metric: "writes-only-events/s"},
	{Group: "shared cursors", Label: "mongosim's CPU µs per event, 100 members (baseline: one dedicated stream; median of rounds)", Bench: "BenchmarkSharedThroughput",
		Metric: "shared-server-cpu-µs/event", BaseMetric: "dedicated1-server-cpu-µs/event", Ratio: "server-cpu-ratio", Target: "ratio ≤ 1.2"},
	{Group: "shared cursors", Label: "mongosim's CPU µs per event, 100 dedicated streams (baseline: one dedicated stream)", Bench: "BenchmarkSharedThroughput",
		Metric: "dedicated100-server-cpu-µs/event", BaseMetric: "dedicated1-server-cpu-µs/event", Ratio: "dedicated100-server-cpu-ratio"},
	{Group: "shared cursors", Label: "mongosim's CPU µs per event of the writes alone", Bench: "BenchmarkSharedThroughput", Metric: "writes-only-server-cpu-µs/event"},
	{Group: "shared cursors", Label: "client CPU µs per event, 100 members, the writer's included (baseline: one dedicated stream)", Bench: "BenchmarkSharedThroughput",
		Metric: "shared-client-cpu-µs/event", BaseMetric: "dedicated1-client-cpu-µs/event"},
	{Group: "shared cursors", Label: "client CPU µs per event, 100 dedicated streams (baseline: one dedicated stream)", Bench: "BenchmarkSharedThroughput",
		Metric: "dedicated100-client-cpu-µs/event", BaseMetric: "dedicated1-client-cpu-µs/event"},
	{Group: "shared cursors", Label: "99 members' events/s while the 100th is stalled 1 s by its handler (baseline: undisturbed; median of rounds)", Bench: "BenchmarkSharedStall",
		Metric: "stalled-others-events/s", BaseMetric: "undisturbed-events/s", Ratio: "stall-ratio", Target: "ratio ≥ 0.9"},
	{Group: "shared cursors", Label: "the stalled member's phase, until it handled all its events, ms", Bench: "BenchmarkSharedStall", Metric: "stalled-member-ms"},
	{Group: "shared cursors", Label: "members moved off the hub's cursor during the stall rounds", Bench: "BenchmarkSharedStall", Metric: "detaches", Target: "0"},
}
