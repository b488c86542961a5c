package mongosim

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// ---------------------------------------------------------------------------------------------
// Engine-level tests: they drive the oplog and the change-stream cursor directly (entries are
// logged by hand), so that positions, tokens and waking are checked independently of the write
// commands. The driver-level tests further down go through Collection/Database/Client.Watch.

// csHarness opens streams on a server and logs entries into its oplog by hand.
type csHarness struct {
	t   *testing.T
	srv *Server
	ctx context.Context
}

func newCSHarness(t *testing.T, opts Options) *csHarness {
	t.Helper()
	srv, err := Start(testCtx(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return &csHarness{t: t, srv: srv, ctx: testCtx(t)}
}

// log appends one entry per op to the oplog, each with its own cluster time, like
// non-transactional writes. It returns the entries.
func (h *csHarness) log(entries ...*oplogEntry) []*oplogEntry {
	e := h.srv.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, en := range entries {
		en.ts = e.clock.tick()
		e.logLocked(en)
	}
	return entries
}

// logTxn appends entries that share one cluster time, like a committed transaction.
func (h *csHarness) logTxn(entries ...*oplogEntry) []*oplogEntry {
	e := h.srv.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	ts := e.clock.tick()
	for i, en := range entries {
		en.ts, en.txnOpIndex = ts, uint32(i)
	}
	e.logLocked(entries...)
	return entries
}

func csIns(db, coll string, id any) *oplogEntry {
	return &oplogEntry{op: "insert", db: db, coll: coll, docKey: bson.D{{Key: "_id", Value: id}},
		doc: bson.D{{Key: "_id", Value: id}, {Key: "x", Value: int32(1)}}}
}

func (h *csHarness) command(db string, body bson.D) *command {
	body = append(body, bson.E{Key: "$db", Value: db})
	return &command{Name: body[0].Key, DB: db, Body: body, ctx: h.ctx}
}

// csCursor is an open stream as the harness sees it.
type csCursor struct {
	h    *csHarness
	db   string
	coll string // getMore's collection
	id   int64
}

// open runs the change-stream aggregate and returns the cursor and its first batch.
func (h *csHarness) open(db string, target any, spec bson.D, stages ...bson.D) (*csCursor, []bson.D, bson.D, error) {
	pipeline := bson.A{bson.D{{Key: "$changeStream", Value: spec}}}
	for _, st := range stages {
		pipeline = append(pipeline, st)
	}
	c := h.command(db, bson.D{{Key: "aggregate", Value: target}, {Key: "pipeline", Value: pipeline},
		{Key: "cursor", Value: bson.D{}}})
	reply, err := cmdAggregateChangeStream(h.srv, c)
	if err != nil {
		return nil, nil, nil, err
	}
	batch, pbrt, id, ns := h.parseCursor(reply, "firstBatch")
	cur := &csCursor{h: h, db: db, id: id}
	cur.coll = ns[len(db)+1:]
	return cur, batch, pbrt, nil
}

func (h *csHarness) parseCursor(reply bson.D, key string) (batch []bson.D, pbrt bson.D, id int64, ns string) {
	h.t.Helper()
	cv, _ := lookupD(reply, "cursor")
	cd := cv.(bson.D)
	bv, _ := lookupD(cd, key)
	for _, x := range bv.(bson.A) {
		batch = append(batch, x.(bson.D))
	}
	pv, ok := lookupD(cd, "postBatchResumeToken")
	if !ok {
		h.t.Fatalf("reply without postBatchResumeToken: %v", reply)
	}
	pbrt = pv.(bson.D)
	iv, _ := lookupD(cd, "id")
	id = iv.(int64)
	nv, _ := lookupD(cd, "ns")
	ns = nv.(string)
	return
}

// getMore runs one getMore with the given batchSize (0: none) and maxTimeMS.
func (cur *csCursor) getMore(batchSize int32, maxWait time.Duration) ([]bson.D, bson.D, int64, error) {
	body := bson.D{{Key: "getMore", Value: cur.id}, {Key: "collection", Value: cur.coll},
		{Key: "maxTimeMS", Value: maxWait.Milliseconds()}}
	if batchSize > 0 {
		body = append(body, bson.E{Key: "batchSize", Value: batchSize})
	}
	reply, err := cmdGetMore(cur.h.srv, cur.h.command(cur.db, body))
	if err != nil {
		return nil, nil, 0, err
	}
	batch, pbrt, id, _ := cur.h.parseCursor(reply, "nextBatch")
	return batch, pbrt, id, nil
}

func csToken(t *testing.T, v any) resumeToken {
	t.Helper()
	tok, err := decodeResumeToken(v)
	if err != nil {
		t.Fatalf("undecodable token %v: %v", v, err)
	}
	return tok
}

func csEvID(ev bson.D) bson.D { v, _ := lookupD(ev, "_id"); return v.(bson.D) }
func csEvOp(ev bson.D) string { v, _ := lookupD(ev, "operationType"); s, _ := v.(string); return s }

func csWantCode(t *testing.T, err error, code int32) {
	t.Helper()
	var ce *cmdError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v, want code %d", err, code)
	}
	if ce.Code != code {
		t.Fatalf("error code %d (%s), want %d", ce.Code, ce.Msg, code)
	}
}

func TestChangeStreamEngineNewStreamStartsAfterLastOp(t *testing.T) {
	h := newCSHarness(t, Options{})
	h.log(csIns("db", "c", 1))
	last := h.srv.ClusterTime()
	cur, batch, pbrt, err := h.open("db", "c", bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	if len(batch) != 0 || cur.id == 0 {
		t.Fatalf("first batch %v id %d: want empty and a live cursor", batch, cur.id)
	}
	if got, want := csToken(t, pbrt), hwmToken(tsNext(last)); got != want {
		t.Fatalf("initial pbrt %s, want HWM(last+1) %s", got.hex(), want.hex())
	}
	h.log(csIns("db", "c", 2), csIns("db", "other", 3), csIns("db", "c", 4))
	got, pbrt2, id, err := cur.getMore(0, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || id != cur.id {
		t.Fatalf("got %d events (id %d), want the 2 of db.c", len(got), id)
	}
	if fmt.Sprint(got[1]) == "" || csToken(t, pbrt2) != csToken(t, csEvID(got[1])) {
		t.Fatalf("pbrt %v, want the last event's token %v", pbrt2, csEvID(got[1]))
	}
	// Empty batch once caught up: HWM(lastApplied+1), after the last event.
	empty, pbrt3, _, err := cur.getMore(0, 0)
	if err != nil || len(empty) != 0 {
		t.Fatalf("getMore: %v %v", empty, err)
	}
	if got, want := csToken(t, pbrt3), hwmToken(tsNext(h.srv.ClusterTime())); got != want || got.compare(csToken(t, pbrt2)) <= 0 {
		t.Fatalf("empty-batch pbrt %s, want %s after %s", got.hex(), want.hex(), csToken(t, pbrt2).hex())
	}
}

func TestChangeStreamEngineResumePositions(t *testing.T) {
	h := newCSHarness(t, Options{})
	start := h.srv.ClusterTime()
	es := h.log(csIns("db", "c", 1), csIns("db", "c", 2), csIns("db", "c", 3))
	ids := func(evs []bson.D) (out []any) {
		for _, ev := range evs {
			dk, _ := lookupD(ev, "documentKey")
			v, _ := lookupD(dk.(bson.D), "_id")
			out = append(out, v)
		}
		return
	}
	// startAtOperationTime: events at or after T.
	_, batch, pbrt, err := h.open("db", "c", bson.D{{Key: "startAtOperationTime", Value: es[1].ts}})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ids(batch)) != "[2 3]" {
		t.Fatalf("startAtOperationTime: ids %v, want [2 3]", ids(batch))
	}
	if csToken(t, pbrt) != eventToken(es[2]) {
		t.Fatalf("pbrt %v, want the last event's token", pbrt)
	}
	// resumeAfter an event token: strictly after it.
	_, batch, _, err = h.open("db", "c", bson.D{{Key: "resumeAfter", Value: eventToken(es[0]).doc()}})
	if err != nil || fmt.Sprint(ids(batch)) != "[2 3]" {
		t.Fatalf("resumeAfter event 1: %v %v", ids(batch), err)
	}
	// resumeAfter an HWM token at T: events at or after T.
	_, batch, _, err = h.open("db", "c", bson.D{{Key: "resumeAfter", Value: hwmToken(es[2].ts).doc()}})
	if err != nil || fmt.Sprint(ids(batch)) != "[3]" {
		t.Fatalf("resumeAfter HWM(ts3): %v %v", ids(batch), err)
	}
	// startAtOperationTime in the future: nothing yet, pbrt = HWM(T); later events at >= T only.
	future := bson.Timestamp{T: start.T + 1000, I: 1}
	cur, batch, pbrt, err := h.open("db", "c", bson.D{{Key: "startAtOperationTime", Value: future}})
	if err != nil || len(batch) != 0 || csToken(t, pbrt) != hwmToken(future) {
		t.Fatalf("future start: %v %v %v", batch, pbrt, err)
	}
	h.log(csIns("db", "c", 4))
	if got, _, _, err := cur.getMore(0, 0); err != nil || len(got) != 0 {
		t.Fatalf("event before the start time delivered: %v %v", got, err)
	}
	// The initial empty batch with batchSize 0 keeps the client's token as pbrt.
	c := h.command("db", bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{
		bson.D{{Key: "$changeStream", Value: bson.D{{Key: "resumeAfter", Value: eventToken(es[0]).doc()}}}}}},
		{Key: "cursor", Value: bson.D{{Key: "batchSize", Value: int32(0)}}}})
	reply, err := cmdAggregateChangeStream(h.srv, c)
	if err != nil {
		t.Fatal(err)
	}
	b, p, _, _ := h.parseCursor(reply, "firstBatch")
	if len(b) != 0 || csToken(t, p) != eventToken(es[0]) {
		t.Fatalf("batchSize 0: batch %v pbrt %v, want empty and the resume token", b, p)
	}
}

func TestChangeStreamEngineResumeErrors(t *testing.T) {
	h := newCSHarness(t, Options{})
	es := h.log(csIns("db", "c", 1), csIns("db", "c", 2))
	// A token of an event that never existed at that position: 280.
	bogus := eventToken(es[1])
	bogus.txnOpIndex = 5
	_, _, _, err := h.open("db", "c", bson.D{{Key: "resumeAfter", Value: bogus.doc()}})
	csWantCode(t, err, codeChangeStreamFatalError)
	// resumeAfter an invalidate token: 260.
	_, _, _, err = h.open("db", "c", bson.D{{Key: "resumeAfter", Value: invalidateToken(es[0]).doc()}})
	csWantCode(t, err, codeInvalidResumeToken)
	// Both resumeAfter and startAfter: 50865; two kinds of resume option: 40674.
	_, _, _, err = h.open("db", "c", bson.D{{Key: "resumeAfter", Value: eventToken(es[0]).doc()}, {Key: "startAfter", Value: eventToken(es[0]).doc()}})
	csWantCode(t, err, 50865)
	_, _, _, err = h.open("db", "c", bson.D{{Key: "resumeAfter", Value: eventToken(es[0]).doc()}, {Key: "startAtOperationTime", Value: es[0].ts}})
	csWantCode(t, err, 40674)
	// Undecodable token.
	_, _, _, err = h.open("db", "c", bson.D{{Key: "resumeAfter", Value: bson.D{{Key: "_data", Value: "zz"}}}})
	csWantCode(t, err, codeFailedToParse)
	// History lost: truncation above the token, and startAtOperationTime below the floor.
	h.srv.TruncateOplog(es[1].ts)
	_, _, _, err = h.open("db", "c", bson.D{{Key: "resumeAfter", Value: eventToken(es[0]).doc()}})
	csWantCode(t, err, codeChangeStreamHistoryLost)
	_, _, _, err = h.open("db", "c", bson.D{{Key: "startAtOperationTime", Value: es[0].ts}})
	csWantCode(t, err, codeChangeStreamHistoryLost)
	_, _, _, err = h.open("db", "c", bson.D{{Key: "resumeAfter", Value: hwmToken(es[0].ts).doc()}})
	csWantCode(t, err, codeChangeStreamHistoryLost)
	// The retained event is still a valid resume point.
	if _, _, _, err = h.open("db", "c", bson.D{{Key: "resumeAfter", Value: eventToken(es[1]).doc()}}); err != nil {
		t.Fatalf("resume from the retained event: %v", err)
	}
	// Option and scope validation.
	for _, tc := range []struct {
		name   string
		db     string
		target any
		spec   bson.D
		stages []bson.D
		code   int32
	}{
		{"unknown option", "db", "c", bson.D{{Key: "bogus", Value: 1}}, nil, 40415},
		{"bad fullDocument", "db", "c", bson.D{{Key: "fullDocument", Value: "x"}}, nil, codeBadValue},
		{"bad fullDocumentBeforeChange", "db", "c", bson.D{{Key: "fullDocumentBeforeChange", Value: "x"}}, nil, codeBadValue},
		{"cluster stream off admin", "db", int32(1), bson.D{{Key: "allChangesForCluster", Value: true}}, nil, codeInvalidOptions},
		{"cluster stream on a collection", "admin", "c", bson.D{{Key: "allChangesForCluster", Value: true}}, nil, codeInvalidOptions},
		{"database stream on admin", "admin", int32(1), bson.D{}, nil, codeInvalidNamespace},
		{"unknown stage", "db", "c", bson.D{}, []bson.D{{{Key: "$unsupported", Value: 1}}}, 40324},
		{"disallowed stage", "db", "c", bson.D{}, []bson.D{{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}}}}}, codeIllegalOperation},
		{"second $changeStream", "db", "c", bson.D{}, []bson.D{{{Key: "$changeStream", Value: bson.D{}}}}, 40602},
	} {
		_, _, _, err := h.open(tc.db, tc.target, tc.spec, tc.stages...)
		var ce *cmdError
		if !errors.As(err, &ce) || ce.Code != tc.code {
			t.Errorf("%s: error %v, want code %d", tc.name, err, tc.code)
		}
	}
}

func TestChangeStreamEngineTransactionTokens(t *testing.T) {
	h := newCSHarness(t, Options{})
	cur, _, _, err := h.open("db", int32(1), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	n := int64(7)
	lsid := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}}
	es := h.logTxn(csIns("db", "a", 1), csIns("db", "b", 2), csIns("db", "a", 3))
	for _, en := range es {
		en.lsid, en.txnNumber = lsid, &n
	}
	got, _, _, err := cur.getMore(0, time.Second)
	if err != nil || len(got) != 3 {
		t.Fatalf("got %d events, err %v", len(got), err)
	}
	var prev resumeToken
	for i, ev := range got {
		tok := csToken(t, csEvID(ev))
		if tok.ts != es[0].ts || tok.txnOpIndex != uint32(i) {
			t.Fatalf("event %d token %s: want ts %v and txnOpIndex %d", i, tok.hex(), es[0].ts, i)
		}
		if i > 0 && tok.compare(prev) <= 0 {
			t.Fatalf("tokens not increasing at %d", i)
		}
		prev = tok
		ct, _ := lookupD(ev, "clusterTime")
		if ct != es[0].ts {
			t.Fatalf("clusterTime %v, want shared %v", ct, es[0].ts)
		}
		if _, ok := lookupD(ev, "lsid"); !ok {
			t.Fatalf("transaction event without lsid: %v", ev)
		}
		if v, _ := lookupD(ev, "txnNumber"); v != int64(7) {
			t.Fatalf("txnNumber %v", v)
		}
	}
	// Resuming from the middle of the transaction skips exactly the events before it.
	_, batch, _, err := h.open("db", int32(1), bson.D{{Key: "resumeAfter", Value: csEvID(got[0])}})
	if err != nil || len(batch) != 2 {
		t.Fatalf("resume inside the transaction: %d events, %v", len(batch), err)
	}
}

func TestChangeStreamEngineInvalidate(t *testing.T) {
	h := newCSHarness(t, Options{})
	coll, _, _, err := h.open("db", "c", bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	dbs, _, _, err := h.open("db", int32(1), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	es := h.log(csIns("db", "c", 1), &oplogEntry{op: "drop", db: "db", coll: "c"},
		&oplogEntry{op: "dropDatabase", db: "db"})
	// batchSize 1: insert, then drop, then invalidate with cursor id 0.
	var ops []string
	var lastID int64
	for i := 0; i < 3; i++ {
		got, pbrt, id, err := coll.getMore(1, time.Second)
		if err != nil || len(got) != 1 {
			t.Fatalf("getMore %d: %v %v", i, got, err)
		}
		if csToken(t, pbrt) != csToken(t, csEvID(got[0])) {
			t.Fatalf("pbrt %v != event token %v", pbrt, csEvID(got[0]))
		}
		ops = append(ops, csEvOp(got[0]))
		lastID = id
		if i == 2 {
			if csToken(t, csEvID(got[0])) != invalidateToken(es[1]) {
				t.Fatalf("invalidate token %v, want the drop's token with fromInvalidate", csEvID(got[0]))
			}
			if _, ok := lookupD(got[0], "ns"); ok {
				t.Fatalf("invalidate has ns: %v", got[0])
			}
		}
	}
	if fmt.Sprint(ops) != "[insert drop invalidate]" || lastID != 0 {
		t.Fatalf("ops %v, last cursor id %d; want [insert drop invalidate] and id 0", ops, lastID)
	}
	if _, _, _, err := coll.getMore(0, 0); err == nil {
		t.Fatal("getMore after invalidate succeeded")
	} else {
		csWantCode(t, err, codeCursorNotFound)
	}
	// The database stream sees insert, drop and dropDatabase, then invalidate.
	got, _, id, err := dbs.getMore(0, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ops = nil
	for _, ev := range got {
		ops = append(ops, csEvOp(ev))
	}
	if fmt.Sprint(ops) != "[insert drop dropDatabase invalidate]" || id != 0 {
		t.Fatalf("database stream ops %v id %d", ops, id)
	}
	// resumeAfter the drop: the invalidate comes again at once. startAfter the invalidate:
	// no second invalidate for the same drop; the recreated collection is seen.
	_, batch, _, err := h.open("db", "c", bson.D{{Key: "resumeAfter", Value: eventToken(es[1]).doc()}})
	if err != nil || len(batch) != 1 || csEvOp(batch[0]) != "invalidate" {
		t.Fatalf("resumeAfter drop: %v %v", batch, err)
	}
	sa, batch, pbrt, err := h.open("db", "c", bson.D{{Key: "startAfter", Value: invalidateToken(es[1]).doc()}})
	if err != nil {
		t.Fatal(err)
	}
	// The dropDatabase after the drop invalidates the new stream too (a collection stream ends
	// when its database is dropped); that is a different event, so that is expected.
	if len(batch) != 1 || csEvOp(batch[0]) != "invalidate" || csToken(t, csEvID(batch[0])) != invalidateToken(es[2]) {
		t.Fatalf("startAfter invalidate: %v (pbrt %v)", batch, pbrt)
	}
	_ = sa
	h.log(csIns("db", "c", 9))
	sa2, batch, _, err := h.open("db", "c", bson.D{{Key: "startAfter", Value: invalidateToken(es[2]).doc()}})
	if err != nil || len(batch) != 1 || csEvOp(batch[0]) != "insert" || sa2.id == 0 {
		t.Fatalf("startAfter the last invalidate: %v %v", batch, err)
	}
}

func TestChangeStreamEngineAwaitWakesAtOnce(t *testing.T) {
	h := newCSHarness(t, Options{})
	cur, _, _, err := h.open("db", "c", bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	other, _, _, err := h.open("db", "other", bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	_ = other
	type res struct {
		n   int
		err error
		at  time.Time
	}
	done := make(chan res, 1)
	go func() {
		got, _, _, err := cur.getMore(0, 10*time.Second)
		done <- res{len(got), err, time.Now()}
	}()
	// Wait until the getMore is blocked: it has drained its wake slot and holds the cursor.
	waitFor(t, 5*time.Second, "getMore checked out", func() bool {
		h.srv.eng.mu.Lock()
		defer h.srv.eng.mu.Unlock()
		ent := h.srv.eng.cursors.open[cur.id]
		return ent != nil && ent.inUse
	})
	h.log(csIns("db", "other", 1)) // not relevant: must not end the wait
	select {
	case r := <-done:
		t.Fatalf("getMore returned on an unrelated write: %+v", r)
	default:
	}
	start := time.Now()
	h.log(csIns("db", "c", 1))
	select {
	case r := <-done:
		if r.err != nil || r.n != 1 {
			t.Fatalf("getMore: %d events, %v", r.n, r.err)
		}
		if lat := r.at.Sub(start); lat > time.Second {
			t.Fatalf("woken after %s", lat)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("getMore not woken by the insert")
	}
}

func TestChangeStreamEngineInterruptAndClose(t *testing.T) {
	h := newCSHarness(t, Options{})
	cur, _, _, err := h.open("db", "c", bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, _, _, err := cur.getMore(0, 10*time.Second)
		errc <- err
	}()
	waitFor(t, 5*time.Second, "getMore waiting", func() bool {
		h.srv.eng.mu.Lock()
		defer h.srv.eng.mu.Unlock()
		ent := h.srv.eng.cursors.open[cur.id]
		return ent != nil && ent.inUse
	})
	h.srv.eng.hub.interrupt()
	select {
	case err := <-errc:
		csWantCode(t, err, codeInterruptedDueToReplStateChange)
	case <-time.After(5 * time.Second):
		t.Fatal("interrupt did not end the getMore")
	}
	// closeAll ends a waiting getMore too.
	cur2, _, _, err := h.open("db", "c", bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _, _, err := cur2.getMore(0, 10*time.Second)
		errc <- err
	}()
	waitFor(t, 5*time.Second, "getMore waiting", func() bool {
		h.srv.eng.mu.Lock()
		defer h.srv.eng.mu.Unlock()
		ent := h.srv.eng.cursors.open[cur2.id]
		return ent != nil && ent.inUse
	})
	h.srv.eng.hub.closeAll()
	select {
	case err := <-errc:
		csWantCode(t, err, codeInterruptedAtShutdown)
	case <-time.After(5 * time.Second):
		t.Fatal("closeAll did not end the getMore")
	}
}

func TestChangeStreamEngineSlowWatcherLosesHistory(t *testing.T) {
	h := newCSHarness(t, Options{OplogCapacity: 10})
	cur, _, _, err := h.open("db", "c", bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 25; i++ {
		h.log(csIns("db", "c", i))
	}
	_, _, _, err = cur.getMore(0, 0)
	csWantCode(t, err, codeChangeStreamHistoryLost)
	// Hub registrations are removed with the cursor.
	h.srv.eng.mu.Lock()
	n := len(h.srv.eng.hub.colls)
	h.srv.eng.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d hub registrations left after the cursor died", n)
	}
}
