package engine

import "context"

// CheckpointWrites bounds the checkpointer store calls (Load and Save) under way at once across
// the streams of one runtime. Each stream's checkpointer makes one call at a time, but nothing
// bounded them across streams: Runtime.Stop writes every stream's final checkpoint at once, and
// with 10,000 streams that took the client's whole pool (100 connections, the driver's default
// cap) in BenchmarkSharedManyStreams. Eight is twice the other pools (catch-up cursors and
// namespace checks, 4 each), so that with the hub's cursor they stay within the 20 connections
// of shared cursors' budget. A call beyond them waits for a token (checkpointer.Config.Admit)
// before its IOTimeout starts: with 10,000 final writes queued at Stop, a wait inside the
// IOTimeout failed 5% of them on a loaded host. The queue is bounded by Stop's own timeout.
const CheckpointWrites = 8

// admit is checkpointer.Config.Admit over the tokens t.
func (t tokens) admit(ctx context.Context) (func(), error) {
	if err := t.take(ctx); err != nil {
		return nil, err
	}
	return t.give, nil
}
