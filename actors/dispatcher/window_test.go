package dispatcher

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/internal/wire"
)

// tokenAt is a resume token of the server's shape whose cluster time is (t, 1).
func tokenAt(t uint32) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(t)<<32|1)
	tok, _ := bson.Marshal(bson.D{{Key: "_data", Value: "82" + hex.EncodeToString(b[:]) + "2B0229"}})
	return tok
}

func at(t uint32) uint64 { return uint64(t)<<32 | 1 }

// liveBatch is an EventBatch of live events keyed keys, at cluster times ts, with a PBRT at pbrt.
func (h *harness) liveBatch(seq uint64, pbrt uint32, evs ...struct {
	key string
	ts  uint32
}) {
	b := &wire.EventBatch{Incarnation: h.inc, PostBatchResumeToken: tokenAt(pbrt)}
	for _, e := range evs {
		// The event's _id (its resume token) carries its cluster time e.ts.
		raw, err := bson.Marshal(bson.D{{Key: "_id", Value: bson.Raw(tokenAt(e.ts))}, {Key: "operationType", Value: "insert"},
			{Key: "n", Value: int64(seq)}, {Key: "documentKey", Value: bson.D{{Key: "_id", Value: e.key}}}})
		if err != nil {
			h.t.Fatal(err)
		}
		b.Raw = append(b.Raw, raw)
		b.ThroughSeq = seq
		seq++
	}
	h.credit -= len(evs)
	h.sys.Root.Send(h.disp, b)
}

type keyAt = struct {
	key string
	ts  uint32
}

// TestWindowDropsTouchedRowsAndOrdersTheRest: the rows of a chunk whose _id a live event
// touched between the watermarks are dropped; the others run after the live events up to the
// high watermark and before the first live event past it, key by key; an idle stream's PBRT
// past the high watermark releases a chunk too.
func TestWindowDropsTouchedRowsAndOrdersTheRest(t *testing.T) {
	var mu sync.Mutex
	byKey := map[string][]string{}
	h := newHarness(t, &fakeRouter{handle: func(_ context.Context, c call) error {
		mu.Lock()
		byKey[c.key] = append(byKey[c.key], c.op)
		mu.Unlock()
		return nil
	}}, func(c *Config) { c.Lanes = 3 })
	h.subscribe(1)
	sp := newSnapProbe(h)
	row := func(seq uint64, key string) *wire.Event {
		return &wire.Event{Seq: seq, Raw: tev{seq: seq, key: key, op: "snapshot"}.build().raw}
	}

	h.sys.Root.RequestWithCustomSender(h.disp, &wire.WindowOpen{Run: 7, Chunk: 1}, sp.pid)
	// a at 100 is before the low watermark (105): the row read later is newer, kept.
	// b at 110 is inside the window: the row is dropped.
	h.liveBatch(1, 110, keyAt{"a", 100}, keyAt{"b", 110})
	h.sys.Root.RequestWithCustomSender(h.disp, &wire.WindowChunk{Run: 7, Chunk: 1, Low: at(105), High: at(120),
		Events: []*wire.Event{row(1, "a"), row(2, "b"), row(3, "c")}}, sp.pid)
	// c at 130 is past the high watermark: the chunk is released right before it.
	h.liveBatch(3, 130, keyAt{"c", 130})
	closed := nextOf[*wire.WindowClosed](t, sp)
	if closed.GetDropped() != 1 || closed.GetDelivered() != 2 || closed.GetChunk() != 1 {
		t.Fatalf("WindowClosed %v: want 1 dropped (b), 2 delivered", closed)
	}
	settled := map[uint64]bool{}
	for len(settled) < 2 {
		for _, s := range nextOf[*wire.SnapshotSettled](t, sp).GetSettled() {
			settled[s.GetSeq()] = true
		}
	}
	h.waitSettled(1, 2, 3)

	// An idle stream: the chunk goes once a PBRT reaches its high watermark.
	h.sys.Root.RequestWithCustomSender(h.disp, &wire.WindowOpen{Run: 7, Chunk: 2}, sp.pid)
	h.sys.Root.RequestWithCustomSender(h.disp, &wire.WindowChunk{Run: 7, Chunk: 2, Low: at(140), High: at(150),
		Events: []*wire.Event{row(4, "d")}}, sp.pid)
	h.liveBatch(4, 145)
	h.liveBatch(4, 155)
	if closed := nextOf[*wire.WindowClosed](t, sp); closed.GetChunk() != 2 || closed.GetDelivered() != 1 {
		t.Fatalf("WindowClosed %v: want chunk 2 delivered by the idle PBRT", closed)
	}
	nextOf[*wire.SnapshotSettled](t, sp)

	// The stream outran the chunk: e changed at 172, past the high watermark (170), before the
	// rows arrived; that change already runs, so e's row is dropped, f's goes at once.
	h.sys.Root.RequestWithCustomSender(h.disp, &wire.WindowOpen{Run: 7, Chunk: 3}, sp.pid)
	h.liveBatch(4, 172, keyAt{"e", 172})
	h.sys.Root.RequestWithCustomSender(h.disp, &wire.WindowChunk{Run: 7, Chunk: 3, Low: at(160), High: at(170),
		Events: []*wire.Event{row(5, "e"), row(6, "f")}}, sp.pid)
	if closed := nextOf[*wire.WindowClosed](t, sp); closed.GetChunk() != 3 || closed.GetDropped() != 1 || closed.GetDelivered() != 1 {
		t.Fatalf("WindowClosed %v: want chunk 3 with e dropped, f delivered", closed)
	}
	nextOf[*wire.SnapshotSettled](t, sp)
	h.waitSettled(4)

	mu.Lock()
	defer mu.Unlock()
	want := map[string][]string{"a": {"insert", "snapshot"}, "b": {"insert"}, "c": {"snapshot", "insert"}, "d": {"snapshot"}, "e": {"insert"}, "f": {"snapshot"}}
	for k, ops := range want {
		if !slices.Equal(byKey[k], ops) {
			t.Errorf("key %s handled %v, want %v", k, byKey[k], ops)
		}
	}
}

// nextOf returns the snapshot source's next message of type M, skipping SnapshotDemand.
func nextOf[M any](t *testing.T, sp *snapProbe) M {
	t.Helper()
	for {
		m := sp.next(t)
		if _, ok := m.(*wire.SnapshotDemand); ok {
			continue
		}
		v, ok := m.(M)
		if !ok {
			t.Fatalf("snapshot source got %T", m)
		}
		return v
	}
}
