package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/actors/stream"
	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/messages"
)

func marshalStage(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSharedReason: a Shared Collection stream shares unless its pipeline has a stage other
// than $match; the option class keys the pipeline's stages, which split back as they were.
func TestSharedReason(t *testing.T) {
	match := marshalStage(t, bson.D{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "insert"}}}})
	add := marshalStage(t, bson.D{{Key: "$addFields", Value: bson.D{{Key: "x", Value: 1}}}})
	tests := []struct {
		name string
		spec Spec
		want bool // shares
	}{
		{"dedicated", Spec{Collection: "c"}, true},
		{"no pipeline", Spec{Collection: "c", Shared: true}, true},
		{"$match only", Spec{Collection: "c", Shared: true, Pipeline: []bson.Raw{match, match}}, true},
		{"$addFields", Spec{Collection: "c", Shared: true, Pipeline: []bson.Raw{match, add}}, false},
		{"database-wide", Spec{Database: "d", Shared: true}, false},
		{"pre-image required", Spec{Collection: "c", Shared: true, PreImage: "required"}, false},
		{"post-image required", Spec{Collection: "c", Shared: true, FullDocument: "required"}, false},
		{"pre-image when available", Spec{Collection: "c", Shared: true, PreImage: "whenAvailable"}, true},
	}
	for _, tt := range tests {
		if got := sharedReason(&tt.spec) == ""; got != tt.want {
			t.Errorf("%s: shares %v (reason %q), want %v", tt.name, got, sharedReason(&tt.spec), tt.want)
		}
	}
	a := Spec{Collection: "a", Pipeline: []bson.Raw{match}}
	b := Spec{Collection: "b", Pipeline: []bson.Raw{match}}
	c := Spec{Collection: "b", Pipeline: []bson.Raw{match}, FullDocument: "updateLookup"}
	if keyOf(&a, nil, "d") != keyOf(&b, nil, "d") {
		t.Error("same database, pipeline and options: different hubs")
	}
	if keyOf(&a, nil, "d") == keyOf(&c, nil, "d") || keyOf(&a, nil, "d") == keyOf(&a, nil, "e") {
		t.Error("another option class or database: the same hub")
	}
	got := splitPipeline(keyOf(&Spec{Pipeline: []bson.Raw{match, add}}, nil, "d").pipeline)
	if len(got) != 2 || string(got[0]) != string(match) || string(got[1]) != string(add) {
		t.Errorf("splitPipeline: %v", got)
	}
}

// testHub is a hub with no cursor: the tests drive route and advance as its goroutine would.
func testHub(t *testing.T) *hub {
	t.Helper()
	hs := newHubSet(clock.NewFake(time.Unix(1e9, 0)), zap.NewNop(), time.Second)
	h := newHub(hs, hubKey{db: "d"})
	t.Cleanup(h.cancel)
	return h
}

// testMember registers a member of coll with h, at position pos, catching up.
func testMember(h *hub, coll, pos string) *member {
	m := &member{set: h.set, hub: h, coll: coll, log: zap.NewNop(), maxAwait: time.Millisecond, wake: make(chan struct{}, 1)}
	m.setPos(tokenOf(pos))
	h.members[m] = struct{}{}
	h.colls[coll]++
	return m
}

func tokenOf(data string) bson.Raw {
	b, err := bson.Marshal(bson.D{{Key: "_data", Value: data}})
	if err != nil {
		panic(err)
	}
	return b
}

// TestHubMembersFollowHighWaterMarksOnly: a batch that ends with another collection's event
// has that event's token as its post-batch token; a member never takes it (a collection
// stream resumed from another collection's event fails on a server), only the high-water
// marks that follow. Its own events reach it through its queue.
func TestHubMembersFollowHighWaterMarksOnly(t *testing.T) {
	h := testHub(t)
	h.since["ca"], h.since["cb"] = "A", "A"
	m := testMember(h, "ca", "A1")
	if got := h.attach(m, m.posData); got != attachedNow {
		t.Fatalf("attach = %v, want attachedNow", got)
	}
	m.state = attachedTo

	h.route(ringEvent{coll: "cb", tok: "B2", id: tokenOf("B2")})
	h.advance(tokenOf("B2")) // the batch ended with cb's event: its token is the PBRT
	if got := tokenData(m.ResumeToken()); got != "A1" {
		t.Fatalf("after a batch ending with another collection's event: position %q, want A1 (its own)", got)
	}
	if got := tokenData(m.ReadThroughToken()); got != "B2" {
		t.Fatalf("after a batch ending with another collection's event: read through %q, want B2 (lag only)", got)
	}
	h.advance(tokenOf("B3")) // an empty getMore: a high-water mark
	if got := tokenData(m.ResumeToken()); got != "B3" {
		t.Fatalf("after a high-water mark: position %q, want B3", got)
	}

	h.route(ringEvent{coll: "ca", tok: "B4", id: tokenOf("B4"), raw: tokenOf("B4")})
	h.advance(tokenOf("B4"))
	if got := tokenData(m.ResumeToken()); got != "B3" {
		t.Fatalf("with its event queued: position %q, want B3 (nothing queued is skipped)", got)
	}
	h.route(ringEvent{coll: "cb", tok: "B5", id: tokenOf("B5")})
	h.advance(tokenOf("B5"))
	if got := tokenData(m.ReadThroughToken()); got != "B3" {
		t.Fatalf("with its event B4 queued: read through %q, want B3 (not past an event it has not read)", got)
	}
	ctx := context.Background()
	if !m.TryNext(ctx) || tokenData(m.ResumeToken()) != "B4" {
		t.Fatalf("its own event: TryNext then position %q, want B4", tokenData(m.ResumeToken()))
	}
	if got := tokenData(m.ReadThroughToken()); got != "B5" {
		t.Fatalf("its queue read: read through %q, want B5", got)
	}
}

// TestHubNotCoveredAsksForReopen: a member that finds its collection not read, with no reopen
// pending, arms one; a member before the hub's position is behind (the reopen, from the hub's
// own position, will not read what lies between); a broken hub (its cursor failed, not reopened
// yet) never parks a member.
func TestHubNotCoveredAsksForReopen(t *testing.T) {
	h := testHub(t)
	h.pos, h.posData = tokenOf("A0"), "A0"
	m := testMember(h, "ca", "A1")
	if got := h.attach(m, m.posData); got != notCovered {
		t.Fatalf("attach = %v, want notCovered", got)
	}
	h.mu.Lock()
	armed := h.debounce != nil
	h.mu.Unlock()
	if !armed {
		t.Fatal("a member found its collection not read and no reopen pending, and none was armed")
	}
	early := testMember(h, "cb", "0")
	if got := h.attach(early, early.posData); got != behind {
		t.Fatalf("attach of a member before the hub's position = %v, want behind (its backlog is its own to read)", got)
	}
	h.pos, h.posData = nil, ""
	if got := h.attach(m, m.posData); got != notCovered {
		t.Fatalf("attach to a hub with no position yet = %v, want notCovered (the member decides whether to park)", got)
	}
	h.pos, h.posData = tokenOf("A0"), "A0"
	h.reset("test")
	if got := h.attach(m, m.posData); got != behind {
		t.Fatalf("attach to a broken hub = %v, want behind (catch up on its own cursor)", got)
	}
}

// idleCursor is a catch-up cursor with nothing to read: each TryNext is an empty getMore.
type idleCursor struct{ tok bson.Raw }

func (c *idleCursor) TryNext(context.Context) bool { return false }
func (c *idleCursor) Current() bson.Raw            { return nil }
func (c *idleCursor) ResumeToken() bson.Raw        { return c.tok }
func (c *idleCursor) RemainingBatchLength() int    { return 0 }
func (c *idleCursor) Err() error                   { return nil }
func (c *idleCursor) Close(context.Context) error  { return nil }
func (c *idleCursor) CurrentIsStable() bool        { return true }
func (c *idleCursor) SplitsEvents() bool           { return false }

type idleWatcher struct{}

func (idleWatcher) Open(_ context.Context, from stream.Position) (stream.Cursor, error) {
	return &idleCursor{tok: tokenOf("A1")}, nil
}

// TestCatchUpTokensHeldPerCommandOnly: more members than catch-up tokens open their catch-up
// cursors and read them, and none keeps a token in between: a member whose stream stops
// reading (a stalled handler) never holds back the others, nor the next Spawn.
func TestCatchUpTokensHeldPerCommandOnly(t *testing.T) {
	h := testHub(t)
	h.since["c"] = "B" // read from after the members' position: they stay catching up
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := range 3 * catchUpCursors {
		m := &member{set: h.set, hub: h, coll: "c", catchUp: idleWatcher{}, log: zap.NewNop(), maxAwait: time.Millisecond,
			wake: make(chan struct{}, 1)}
		if err := m.openCatchUp(ctx, stream.Position{MaxAwaitTime: time.Millisecond}); err != nil {
			t.Fatalf("member %d: open: %v (the catch-up tokens are held between commands)", i, err)
		}
		if m.TryNext(ctx) || m.err != nil {
			t.Fatalf("member %d: TryNext true or err %v on an idle cursor", i, m.err)
		}
		if m.state != catchingUp {
			t.Fatalf("member %d: state %v, want catching up", i, m.state)
		}
		if n := h.set.catchUps.inUse(); n != 0 {
			t.Fatalf("member %d: %d catch-up tokens held after its commands returned, want 0", i, n)
		}
	}
}

// TestHubProbeMarkFollowedOncePassed: a hub whose every batch ends with an event probes for a
// high-water mark hubProbeEvery after its last one; a member takes the probe's mark as its
// position only once the hub's position has passed it (every event of its collection before
// the mark was then routed), and never while an event of its own is queued.
func TestHubProbeMarkFollowedOncePassed(t *testing.T) {
	h := testHub(t)
	fake := h.set.clk.(*clock.Fake)
	h.since["ca"], h.since["cb"] = "A", "A"
	h.followAt = fake.Now()
	m := testMember(h, "ca", "A1")
	if got := h.attach(m, m.posData); got != attachedNow {
		t.Fatalf("attach = %v, want attachedNow", got)
	}
	m.state = attachedTo
	busy := func(tok string) { // a batch ending with cb's event: no high-water mark
		h.route(ringEvent{coll: "cb", tok: tok, id: tokenOf(tok)})
		h.advance(tokenOf(tok))
	}
	busy("B1")
	if h.probeDue() {
		t.Fatal("a probe was due before hubProbeEvery without a high-water mark")
	}
	fake.Advance(hubProbeEvery)
	if !h.probeDue() {
		t.Fatalf("no probe due after %v without a high-water mark", hubProbeEvery)
	}
	h.probeAnswered(nil, errors.New("server down"))
	if h.probeDue() {
		t.Fatal("a failed probe was due again at once (it waits hubProbeEvery)")
	}
	fake.Advance(hubProbeEvery)
	h.probeAnswered(tokenOf("B5"), nil) // the server's current time: past the hub's position
	if h.probeDue() {
		t.Fatal("a probe was due with one's mark pending")
	}
	if got := tokenData(m.ResumeToken()); got != "A1" {
		t.Fatalf("before the hub read through the probe's mark: position %q, want A1", got)
	}
	busy("B4")
	if got := tokenData(m.ResumeToken()); got != "A1" {
		t.Fatalf("hub at B4, probe's mark B5: position %q, want A1 (events before B5 may be unread)", got)
	}
	h.route(ringEvent{coll: "ca", tok: "B6", id: tokenOf("B6"), raw: tokenOf("B6")})
	busy("B7")
	if got := tokenData(m.ResumeToken()); got != "A1" {
		t.Fatalf("its event B6 queued: position %q, want A1 (nothing queued is passed)", got)
	}
	if !m.TryNext(context.Background()) || tokenData(m.ResumeToken()) != "B6" {
		t.Fatalf("its own event: TryNext then position %q, want B6", tokenData(m.ResumeToken()))
	}
	// B5 was followed when the hub passed it, but the member's own B6 is later: never back.
	if got := tokenData(m.ResumeToken()); got != "B6" {
		t.Fatalf("after its event: position %q, want B6", got)
	}

	// Another round: the mark is followed by a member with nothing queued.
	fake.Advance(hubProbeEvery)
	if !h.probeDue() {
		t.Fatal("no probe due after the mark was followed and hubProbeEvery passed")
	}
	h.probeAnswered(tokenOf("B9"), nil)
	busy("B8")
	if got := tokenData(m.ResumeToken()); got != "B6" {
		t.Fatalf("hub at B8, mark B9: position %q, want B6", got)
	}
	busy("C1")
	if got := tokenData(m.ResumeToken()); got != "B9" {
		t.Fatalf("hub past the probe's mark B9 with nothing queued: position %q, want B9", got)
	}
	// A high-water mark of the cursor's own past a pending mark drops it.
	fake.Advance(hubProbeEvery)
	h.probeAnswered(tokenOf("D1"), nil)
	h.advance(tokenOf("D2"))
	h.mu.Lock()
	pending := h.probedData
	h.mu.Unlock()
	if pending != "" || tokenData(m.ResumeToken()) != "D2" {
		t.Fatalf("an empty getMore's mark D2 past the probe's D1: pending %q, position %q; want none, D2", pending, tokenData(m.ResumeToken()))
	}
}

// batchCursor is a catch-up cursor with a backlog, read as the driver reads a change stream: its
// first batch is loaded by the first TryNext (RemainingBatchLength is 0 before it), each later
// batch by a TryNext at the end of the previous one, and an empty read follows the last.
type batchCursor struct {
	batches [][]bson.Raw // the batches still to load
	batch   []bson.Raw   // the loaded batch's events not read yet
	current bson.Raw
	opens   *int
}

func (c *batchCursor) TryNext(context.Context) bool {
	if len(c.batch) == 0 {
		if len(c.batches) == 0 {
			return false
		}
		c.batch, c.batches = c.batches[0], c.batches[1:]
	}
	c.current, c.batch = c.batch[0], c.batch[1:]
	return true
}
func (c *batchCursor) Current() bson.Raw { return c.current }
func (c *batchCursor) ResumeToken() bson.Raw {
	if c.current == nil {
		return nil // a start at an operation time whose first batch holds events: no token yet
	}
	id, _, _ := envelopeOf(c.current)
	return id
}
func (c *batchCursor) RemainingBatchLength() int   { return len(c.batch) }
func (c *batchCursor) Err() error                  { return nil }
func (c *batchCursor) Close(context.Context) error { return nil }
func (c *batchCursor) CurrentIsStable() bool       { return true }
func (c *batchCursor) SplitsEvents() bool          { return false }

// backlogWatcher opens batchCursors over the same backlog, counting the opens.
type backlogWatcher struct {
	batches [][]bson.Raw
	opens   *int
}

func (w backlogWatcher) Open(_ context.Context, from stream.Position) (stream.Cursor, error) {
	*w.opens++
	var left [][]bson.Raw
	for _, b := range w.batches {
		var keep []bson.Raw
		for _, ev := range b {
			id, _, _ := envelopeOf(ev)
			if len(from.Token) == 0 || tokenData(id) > tokenData(from.Token) {
				keep = append(keep, ev)
			}
		}
		if len(keep) > 0 {
			left = append(left, keep)
		}
	}
	return &batchCursor{batches: left, opens: w.opens}, nil
}

// TestMemberReadsItsBacklogBeforeTheHubCoversIt: a member that starts at an operation time with
// a backlog, on a hub that does not read its collection yet, reads its first batch at once and
// every batch after it on the one cursor it opened: it does not park before its first read (the
// driver loads the first batch there, so the cursor only looks empty) nor at the end of a batch
// of events. Parking there dropped the cursor, waited for the hub's reopen and opened it again:
// a backlog's first event came about 110 ms late. Once its cursor comes back empty (level) it
// parks, as a member starting at a token does before its first read.
func TestMemberReadsItsBacklogBeforeTheHubCoversIt(t *testing.T) {
	h := testHub(t)
	h.pos, h.posData = tokenOf("A0"), "A0"
	ev := func(tok string) bson.Raw {
		b, err := bson.Marshal(bson.D{{Key: "_id", Value: bson.D{{Key: "_data", Value: tok}}},
			{Key: "operationType", Value: "insert"}, {Key: "ns", Value: bson.D{{Key: "db", Value: "d"}, {Key: "coll", Value: "c"}}}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	opens := 0
	w := backlogWatcher{batches: [][]bson.Raw{{ev("B1"), ev("B2")}, {ev("B3"), ev("B4")}}, opens: &opens}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m := &member{set: h.set, coll: "c", catchUp: w, log: zap.NewNop(), maxAwait: time.Millisecond, wake: make(chan struct{}, 1)}
	m.start = stream.Position{Kind: messages.StartKind_START_KIND_START_AT_OPERATION_TIME, MaxAwaitTime: time.Millisecond}
	if err := m.openCatchUp(ctx, m.start); err != nil {
		t.Fatal(err)
	}
	m.hub = h
	h.mu.Lock()
	h.members[m] = struct{}{}
	h.colls["c"]++
	h.mu.Unlock()
	for _, want := range []string{"B1", "B2", "B3", "B4"} {
		if !m.TryNext(ctx) {
			t.Fatalf("TryNext false before %s (state %v, err %v): the member parked on its backlog", want, m.state, m.err)
		}
		if got := tokenData(m.ResumeToken()); got != want {
			t.Fatalf("event %q, want %q", got, want)
		}
		if m.state != catchingUp {
			t.Fatalf("after %s: state %v, want catching up (a batch of events is no sign of being level)", want, m.state)
		}
	}
	if opens != 1 {
		t.Fatalf("%d opens of the catch-up cursor for one backlog, want 1", opens)
	}
	// Past the backlog the member waits (for the hub, on the test's fake clock): bounded here.
	waitBriefly := func(m *member) bool {
		wctx, wcancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer wcancel()
		return m.TryNext(wctx)
	}
	if waitBriefly(m) || waitBriefly(m) {
		t.Fatal("TryNext true past the backlog")
	}
	if m.state != parked {
		t.Fatalf("level with its collection, the hub not reading it: state %v, want parked", m.state)
	}

	fresh := &member{set: h.set, hub: h, coll: "c", catchUp: idleWatcher{}, log: zap.NewNop(), maxAwait: time.Millisecond, wake: make(chan struct{}, 1)}
	if err := fresh.openCatchUp(ctx, stream.Position{Kind: messages.StartKind_START_KIND_RESUME_AFTER, Token: tokenOf("A1"), MaxAwaitTime: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if waitBriefly(fresh); fresh.state != parked {
		t.Fatalf("a member starting at a token, before its first read: state %v, want parked (no getMore for an idle Spawn)", fresh.state)
	}
}
