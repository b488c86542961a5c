package checkpointer

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/store/memstore"
)

// BenchmarkTracker measures the low-water-mark bookkeeping per event (batches of 256 settled
// slightly out of order, as from 8 lanes).
func BenchmarkTracker(b *testing.B) {
	tr := newTracker()
	tokens := make([][]byte, 256)
	for i := range tokens {
		tokens[i] = evTok(uint64(i))
	}
	b.ReportAllocs()
	var seq uint64
	for i := 0; i < b.N; i += 256 {
		tr.progress(seq+256, tokens[0])
		for lane := uint64(0); lane < 8; lane++ {
			for j := lane; j < 256; j += 8 {
				tr.settle(seq+1+j, tokens[j], false)
			}
		}
		tr.advance()
		seq += 256
	}
}

// BenchmarkActorSettle measures the actor end to end per settled event: Progress and
// SettledBatch messages of 256 events, memstore writes with the default policy.
func BenchmarkActorSettle(b *testing.B) {
	sys := newTestSystem()
	ms := memstore.New(memstore.Options{})
	props, err := New(Config{Stream: "bench", Store: ms, Positions: &fakePositions{token: tok("now")}})
	if err != nil {
		b.Fatal(err)
	}
	pid := sys.Root.Spawn(props)
	defer func() { _ = sys.Root.StopFuture(pid).Wait() }()
	probe := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	defer func() { _ = sys.Root.StopFuture(probe).Wait() }()
	if _, err := sys.Root.RequestFuture(pid, &wire.ResolveStart{Incarnation: 1}, waitFor).Result(); err != nil {
		b.Fatal(err)
	}
	tokens := make([][]byte, 256)
	for i := range tokens {
		tokens[i] = evTok(uint64(i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	var seq uint64
	for i := 0; i < b.N; i += 256 {
		sys.Root.Send(pid, &wire.Progress{Incarnation: 1, ThroughSeq: seq + 256, PostBatchResumeToken: tokens[0]})
		batch := &wire.SettledBatch{Incarnation: 1, Runs: []*wire.SettledRun{
			{FirstSeq: seq + 1, Count: 256, LastToken: tokens[255], Outcome: messages.Outcome_OUTCOME_HANDLED}}}
		sys.Root.Send(pid, batch)
		seq += 256
	}
	if _, err := sys.Root.RequestFuture(pid, &wire.Flush{}, waitFor).Result(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(ms.Stats().Saves)/float64(seq)*100000, "writes/100k")
}
