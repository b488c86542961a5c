package mongosim

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
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
	cluster, _, _, err := h.open("admin", int32(1), bson.D{{Key: "allChangesForCluster", Value: true}})
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
	// The cluster stream sees the same events and is never invalidated.
	got, _, id, err = cluster.getMore(0, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ops = nil
	for _, ev := range got {
		ops = append(ops, csEvOp(ev))
	}
	if fmt.Sprint(ops) != "[insert drop dropDatabase]" || id == 0 {
		t.Fatalf("cluster stream ops %v id %d", ops, id)
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

// ---------------------------------------------------------------------------------------------
// Driver-level tests: Collection.Watch, Database.Watch and Client.Watch of the real driver.

// csEvent decodes the stream's current event.
func csEvent(t *testing.T, cs *mongo.ChangeStream) bson.D {
	t.Helper()
	var ev bson.D
	if err := bson.Unmarshal(cs.Current, &ev); err != nil {
		t.Fatalf("decode event: %v", err)
	}
	return ev
}

// csNext returns the next event, failing the test if none arrives within 10s.
func csNext(t *testing.T, cs *mongo.ChangeStream) bson.D {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !cs.Next(ctx) {
		t.Fatalf("no event: %v", cs.Err())
	}
	return csEvent(t, cs)
}

// csWatch opens a collection stream and closes it at cleanup.
func csWatch(t *testing.T, coll *mongo.Collection, pipeline any, opts ...options.Lister[options.ChangeStreamOptions]) *mongo.ChangeStream {
	t.Helper()
	if pipeline == nil {
		pipeline = mongo.Pipeline{}
	}
	cs, err := coll.Watch(testCtx(t), pipeline, opts...)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close(context.Background()) })
	return cs
}

func csKeys(d bson.D) []string {
	var ks []string
	for _, e := range d {
		ks = append(ks, e.Key)
	}
	return ks
}

func csGet(d bson.D, path ...string) any {
	var v any = d
	for _, p := range path {
		dd, ok := v.(bson.D)
		if !ok {
			return nil
		}
		v, _ = lookupD(dd, p)
	}
	return v
}

func csJSON(v any) string {
	b, err := bson.MarshalExtJSON(bson.D{{Key: "v", Value: v}}, false, false)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(b)
	return s[len(`{"v":`) : len(s)-1]
}

func csServerCode(err error) int32 {
	var se mongo.ServerError
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return ce.Code
	}
	if errors.As(err, &se) {
		for _, c := range []int32{6, 47, 260, 280, 286} {
			if se.HasErrorCode(int(c)) {
				return c
			}
		}
	}
	return 0
}

var csTokenRE = regexp.MustCompile(`^82[0-9A-F]{44}$`)

func TestChangeStreamEventShapes(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("db").Collection("c")
	cs := csWatch(t, coll, nil)
	if cs.ID() == 0 {
		t.Fatal("initial aggregate returned a dead cursor")
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: int32(1)}, {Key: "x", Value: int32(1)}, {Key: "y", Value: "gone"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: int32(1)}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: int32(2)}}}, {Key: "$unset", Value: bson.D{{Key: "y", Value: ""}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: int32(1)}}, bson.D{{Key: "x", Value: int32(3)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: int32(1)}}); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		keys  string
		check map[string]string
	}{
		{"[_id operationType clusterTime wallTime fullDocument ns documentKey]", map[string]string{
			"operationType": `"insert"`, "fullDocument": `{"_id":1,"x":1,"y":"gone"}`,
			"ns": `{"db":"db","coll":"c"}`, "documentKey": `{"_id":1}`}},
		{"[_id operationType clusterTime wallTime ns documentKey updateDescription]", map[string]string{
			"operationType":     `"update"`,
			"updateDescription": `{"updatedFields":{"x":2},"removedFields":["y"],"truncatedArrays":[]}`}},
		{"[_id operationType clusterTime wallTime fullDocument ns documentKey]", map[string]string{
			"operationType": `"replace"`, "fullDocument": `{"_id":1,"x":3}`}},
		{"[_id operationType clusterTime wallTime ns documentKey]", map[string]string{
			"operationType": `"delete"`, "documentKey": `{"_id":1}`}},
	}
	var prev resumeToken
	for i, w := range want {
		ev := csNext(t, cs)
		if got := fmt.Sprint(csKeys(ev)); got != w.keys {
			t.Errorf("event %d keys %s, want %s", i, got, w.keys)
		}
		for k, v := range w.check {
			if got := csJSON(csGet(ev, k)); got != v {
				t.Errorf("event %d %s = %s, want %s", i, k, got, v)
			}
		}
		id := csGet(ev, "_id").(bson.D)
		data, _ := lookupD(id, "_data")
		if s, _ := data.(string); len(id) != 1 || !csTokenRE.MatchString(s) {
			t.Errorf("event %d _id %v is not {_data: <46 uppercase hex>}", i, id)
		}
		tok := csToken(t, id)
		if i > 0 && tok.compare(prev) <= 0 {
			t.Errorf("token %d does not increase", i)
		}
		prev = tok
		ct, ok := csGet(ev, "clusterTime").(bson.Timestamp)
		if !ok || ct != tok.ts {
			t.Errorf("clusterTime %v, want the token's %v", csGet(ev, "clusterTime"), tok.ts)
		}
		if wt, ok := csGet(ev, "wallTime").(bson.DateTime); !ok || time.Since(wt.Time()) > time.Minute {
			t.Errorf("wallTime %v", csGet(ev, "wallTime"))
		}
	}
	_ = srv
}

func TestChangeStreamUpdateDescriptionTruncatedArrays(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("db").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: int32(1)},
		{Key: "array", Value: bson.A{"foo", bson.D{{Key: "a", Value: "bar"}}, int32(1), int32(2), int32(3)}}}); err != nil {
		t.Fatal(err)
	}
	cs := csWatch(t, coll, nil)
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: int32(1)}}, mongo.Pipeline{
		{{Key: "$set", Value: bson.D{{Key: "array", Value: bson.A{"foo", bson.D{{Key: "a", Value: "bar"}}}}}}}}); err != nil {
		t.Fatal(err)
	}
	ev := csNext(t, cs)
	want := `{"updatedFields":{},"removedFields":[],"truncatedArrays":[{"field":"array","newSize":2}]}`
	if got := csJSON(csGet(ev, "updateDescription")); got != want {
		t.Fatalf("updateDescription %s, want %s", got, want)
	}
	if _, ok := csGet(ev, "updateDescription", "truncatedArrays").(bson.A)[0].(bson.D)[1].Value.(int32); !ok {
		t.Fatal("newSize is not an int32")
	}
	// Dotted array element changes.
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: int32(1)}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "array.1.a", Value: "baz"}}}}); err != nil {
		t.Fatal(err)
	}
	ev = csNext(t, cs)
	if got := csJSON(csGet(ev, "updateDescription", "updatedFields")); got != `{"array.1.a":"baz"}` {
		t.Fatalf("updatedFields %s", got)
	}
}

func TestChangeStreamDropAndInvalidate(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	db := cl.Database("db")
	coll := db.Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	cs := csWatch(t, coll, nil)
	if err := coll.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	drop := csNext(t, cs)
	if fmt.Sprint(csKeys(drop)) != "[_id operationType clusterTime wallTime ns]" || csGet(drop, "operationType") != "drop" {
		t.Fatalf("drop event %v", drop)
	}
	inv := csNext(t, cs)
	if fmt.Sprint(csKeys(inv)) != "[_id operationType clusterTime wallTime]" || csGet(inv, "operationType") != "invalidate" {
		t.Fatalf("invalidate event %v", inv)
	}
	dropTok, invTok := csToken(t, csGet(drop, "_id")), csToken(t, csGet(inv, "_id"))
	want := dropTok
	want.fromInvalidate = true
	if invTok != want || csGet(inv, "clusterTime") != csGet(drop, "clusterTime") {
		t.Fatalf("invalidate token %s, want %s", invTok.hex(), want.hex())
	}
	if cs.ID() != 0 {
		t.Fatalf("cursor id %d after invalidate, want 0", cs.ID())
	}
	nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if cs.Next(nctx) || cs.Err() != nil {
		t.Fatalf("Next after invalidate: err %v", cs.Err())
	}

	// resumeAfter the invalidate token: 260 without labels. startAfter it: a working stream
	// that sees the recreated collection and no second invalidate.
	_, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(csGet(inv, "_id")))
	if csServerCode(err) != codeInvalidResumeToken {
		t.Fatalf("resumeAfter invalidate: %v, want 260", err)
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) && len(ce.Labels) != 0 {
		t.Fatalf("260 carries labels %v", ce.Labels)
	}
	sa := csWatch(t, coll, nil, options.ChangeStream().SetStartAfter(csGet(inv, "_id")))
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	if ev := csNext(t, sa); csGet(ev, "operationType") != "insert" {
		t.Fatalf("after startAfter: %v", ev)
	}

	// rename: rename event with `to`, then invalidate.
	rs := csWatch(t, coll, nil)
	if err := db.RunCommand(ctx, bson.D{{Key: "renameCollection", Value: "db.c"}, {Key: "to", Value: "db.d"}}).Err(); err != nil {
		// renameCollection runs on admin.
		if err2 := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "renameCollection", Value: "db.c"}, {Key: "to", Value: "db.d"}}).Err(); err2 != nil {
			t.Fatalf("renameCollection: %v / %v", err, err2)
		}
	}
	ren := csNext(t, rs)
	if csGet(ren, "operationType") != "rename" || csJSON(csGet(ren, "to")) != `{"db":"db","coll":"d"}` ||
		csJSON(csGet(ren, "ns")) != `{"db":"db","coll":"c"}` {
		t.Fatalf("rename event %v", ren)
	}
	if ev := csNext(t, rs); csGet(ev, "operationType") != "invalidate" {
		t.Fatalf("after rename: %v", ev)
	}
}

func TestChangeStreamDropDatabaseInvalidatesDatabaseStream(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	db := cl.Database("db")
	if _, err := db.Collection("a").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	cs, err := db.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	if err := db.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	var ops []string
	for cs.Next(ctx) {
		ev := csEvent(t, cs)
		ops = append(ops, fmt.Sprint(csGet(ev, "operationType")))
		if csGet(ev, "operationType") == "dropDatabase" && csJSON(csGet(ev, "ns")) != `{"db":"db"}` {
			t.Fatalf("dropDatabase ns %v", csGet(ev, "ns"))
		}
	}
	if cs.Err() != nil || fmt.Sprint(ops) != "[drop dropDatabase invalidate]" || cs.ID() != 0 {
		t.Fatalf("ops %v, err %v, id %d", ops, cs.Err(), cs.ID())
	}
}

func TestChangeStreamScopes(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	fast := options.ChangeStream().SetMaxAwaitTime(10 * time.Millisecond)
	collStream := csWatch(t, cl.Database("db0").Collection("c0"), nil, fast)
	dbStream, err := cl.Database("db0").Watch(ctx, mongo.Pipeline{}, fast)
	if err != nil {
		t.Fatal(err)
	}
	defer dbStream.Close(context.Background())
	clusterStream, err := cl.Watch(ctx, mongo.Pipeline{}, fast)
	if err != nil {
		t.Fatal(err)
	}
	defer clusterStream.Close(context.Background())
	writes := []struct{ db, coll string }{{"db0", "c1"}, {"db1", "c0"}, {"admin", "x"}, {"config", "x"}, {"db0", "c0"}}
	for i, w := range writes {
		if _, err := cl.Database(w.db).Collection(w.coll).InsertOne(ctx, bson.D{{Key: "i", Value: i}}); err != nil {
			t.Fatalf("insert %v: %v", w, err)
		}
	}
	ns := func(cs *mongo.ChangeStream, n int) []string {
		var out []string
		for i := 0; i < n; i++ {
			ev := csNext(t, cs)
			out = append(out, fmt.Sprintf("%v.%v", csGet(ev, "ns", "db"), csGet(ev, "ns", "coll")))
		}
		return out
	}
	if got := ns(collStream, 1); fmt.Sprint(got) != "[db0.c0]" {
		t.Errorf("collection stream saw %v", got)
	}
	if got := ns(dbStream, 2); fmt.Sprint(got) != "[db0.c1 db0.c0]" {
		t.Errorf("database stream saw %v", got)
	}
	if got := ns(clusterStream, 3); fmt.Sprint(got) != "[db0.c1 db1.c0 db0.c0]" {
		t.Errorf("cluster stream saw %v", got)
	}
	// Nothing more is pending on any of them.
	for _, cs := range []*mongo.ChangeStream{collStream, dbStream, clusterStream} {
		if cs.TryNext(ctx) {
			t.Errorf("extra event %v", csEvent(t, cs))
		}
	}
}

func TestChangeStreamFullDocumentModes(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	db := cl.Database("db")
	plain, images := db.Collection("plain"), db.Collection("images")
	if err := db.CreateCollection(ctx, "images"); err != nil {
		t.Fatal(err)
	}
	if err := db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "images"},
		{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}}).Err(); err != nil {
		t.Fatalf("collMod: %v", err)
	}
	for _, c := range []*mongo.Collection{plain, images} {
		if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 0}}); err != nil {
			t.Fatal(err)
		}
	}
	type mode struct {
		fd, fdbc string
	}
	// update: x 0 -> 1, then a second update x -> 2 before the stream reads, so that
	// updateLookup (current document) and the post-image (x: 1) differ.
	open := func(c *mongo.Collection, m mode) *mongo.ChangeStream {
		o := options.ChangeStream()
		if m.fd != "" {
			o.SetFullDocument(options.FullDocument(m.fd))
		}
		if m.fdbc != "" {
			o.SetFullDocumentBeforeChange(options.FullDocument(m.fdbc))
		}
		return csWatch(t, c, nil, o)
	}
	cases := []struct {
		coll     *mongo.Collection
		m        mode
		fullDoc  string // JSON of fullDocument on the first update, "-" when absent
		before   string // JSON of fullDocumentBeforeChange, "-" when absent
		wantCode int32  // error instead of an event
	}{
		{plain, mode{}, "-", "-", 0},
		{plain, mode{fd: "updateLookup"}, `{"_id":1,"x":2}`, "-", 0},
		{plain, mode{fd: "whenAvailable"}, `null`, "-", 0},
		{images, mode{fd: "whenAvailable"}, `{"_id":1,"x":1}`, "-", 0},
		{images, mode{fd: "required"}, `{"_id":1,"x":1}`, "-", 0},
		{plain, mode{fd: "required"}, "", "", codeNoMatchingDocument},
		{plain, mode{fdbc: "off"}, "-", "-", 0},
		{plain, mode{fdbc: "whenAvailable"}, "-", `null`, 0},
		{images, mode{fdbc: "whenAvailable"}, "-", `{"_id":1,"x":0}`, 0},
		{images, mode{fdbc: "required"}, "-", `{"_id":1,"x":0}`, 0},
		{plain, mode{fdbc: "required"}, "", "", codeNoMatchingDocument},
	}
	var streams []*mongo.ChangeStream
	for _, tc := range cases {
		streams = append(streams, open(tc.coll, tc.m))
	}
	for _, c := range []*mongo.Collection{plain, images} {
		for _, x := range []int{1, 2} {
			if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: x}}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, tc := range cases {
		cs := streams[i]
		name := fmt.Sprintf("%s %+v", tc.coll.Name(), tc.m)
		nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ok := cs.Next(nctx)
		cancel()
		if tc.wantCode != 0 {
			if ok || csServerCode(cs.Err()) != tc.wantCode {
				t.Errorf("%s: got event %v / err %v, want code %d", name, ok, cs.Err(), tc.wantCode)
			}
			continue
		}
		if !ok {
			t.Errorf("%s: no event: %v", name, cs.Err())
			continue
		}
		ev := csEvent(t, cs)
		check := func(field, want string) {
			v, present := lookupD(ev, field)
			switch {
			case want == "-" && present:
				t.Errorf("%s: %s present (%s), want absent", name, field, csJSON(v))
			case want != "-" && !present:
				t.Errorf("%s: %s absent, want %s", name, field, want)
			case want != "-" && csJSON(v) != want:
				t.Errorf("%s: %s = %s, want %s", name, field, csJSON(v), want)
			}
		}
		check("fullDocument", tc.fullDoc)
		check("fullDocumentBeforeChange", tc.before)
	}

	// updateLookup on a document deleted since: fullDocument null. Pre-images of replace and
	// delete events.
	look := open(plain, mode{fd: "updateLookup"})
	pre := open(images, mode{fdbc: "required"})
	if _, err := plain.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 9}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if ev := csNext(t, look); csJSON(csGet(ev, "fullDocument")) != "null" {
		t.Errorf("updateLookup of a deleted document: %v", csGet(ev, "fullDocument"))
	}
	if _, err := images.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "y", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := images.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if ev := csNext(t, pre); csGet(ev, "operationType") != "replace" || csJSON(csGet(ev, "fullDocumentBeforeChange")) != `{"_id":1,"x":2}` {
		t.Errorf("replace pre-image: %v", ev)
	}
	if ev := csNext(t, pre); csGet(ev, "operationType") != "delete" || csJSON(csGet(ev, "fullDocumentBeforeChange")) != `{"_id":1,"y":1}` {
		t.Errorf("delete pre-image: %v", ev)
	}
}

func TestChangeStreamResumeFromEveryKindOfToken(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("db").Collection("c")
	fast := options.ChangeStream().SetMaxAwaitTime(10 * time.Millisecond) // TryNext need not wait
	cs := csWatch(t, coll, nil, fast)
	if cs.TryNext(ctx) {
		t.Fatal("event on a new stream")
	}
	hwm := cs.ResumeToken() // the empty batch's postBatchResumeToken
	if hwm == nil {
		t.Fatal("no resume token after an empty batch")
	}
	startTime := bson.Timestamp{}
	for i := 1; i <= 3; i++ {
		r, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}})
		if err != nil {
			t.Fatal(err)
		}
		_ = r
	}
	first := csNext(t, cs)
	startTime = csGet(first, "clusterTime").(bson.Timestamp)
	ids := func(cs *mongo.ChangeStream, n int) string {
		var out []any
		for i := 0; i < n; i++ {
			out = append(out, csGet(csNext(t, cs), "documentKey", "_id"))
		}
		if cs.TryNext(ctx) {
			out = append(out, "extra", csGet(csEvent(t, cs), "documentKey", "_id"))
		}
		return fmt.Sprint(out)
	}
	// Event token: strictly after it.
	if got := ids(csWatch(t, coll, nil, fast, options.ChangeStream().SetResumeAfter(csGet(first, "_id"))), 2); got != "[2 3]" {
		t.Errorf("resumeAfter event token: %s", got)
	}
	if got := ids(csWatch(t, coll, nil, fast, options.ChangeStream().SetStartAfter(csGet(first, "_id"))), 2); got != "[2 3]" {
		t.Errorf("startAfter event token: %s", got)
	}
	// PBRT (high-water mark) from before the inserts: all three.
	if got := ids(csWatch(t, coll, nil, fast, options.ChangeStream().SetResumeAfter(hwm)), 3); got != "[1 2 3]" {
		t.Errorf("resumeAfter PBRT: %s", got)
	}
	// startAtOperationTime: at or after the time.
	if got := ids(csWatch(t, coll, nil, fast, options.ChangeStream().SetStartAtOperationTime(&startTime)), 3); got != "[1 2 3]" {
		t.Errorf("startAtOperationTime: %s", got)
	}
	// A stream's own ResumeToken after the last event of a batch equals the PBRT, and resuming
	// from it yields only later events.
	csNext(t, cs)
	csNext(t, cs)
	tok := cs.ResumeToken()
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 4}}); err != nil {
		t.Fatal(err)
	}
	if got := ids(csWatch(t, coll, nil, fast, options.ChangeStream().SetResumeAfter(tok)), 1); got != "[4]" {
		t.Errorf("resume from ResumeToken(): %s", got)
	}
}

func TestChangeStreamPostBatchResumeTokenOnEmptyBatches(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("db").Collection("c")
	other := cl.Database("db").Collection("other")
	cs := csWatch(t, coll, nil, options.ChangeStream().SetMaxAwaitTime(10*time.Millisecond))
	var last resumeToken
	step := func(what string) {
		t.Helper()
		if cs.TryNext(ctx) {
			t.Fatalf("%s: unexpected event", what)
		}
		rt := cs.ResumeToken()
		if rt == nil {
			t.Fatalf("%s: no resume token", what)
		}
		tok := csToken(t, csRawToD(t, rt))
		if !tok.isHWM() {
			t.Fatalf("%s: empty-batch token %s is not a high-water mark", what, tok.hex())
		}
		if tok.compare(last) < 0 {
			t.Fatalf("%s: token moved backwards: %s < %s", what, tok.hex(), last.hex())
		}
		if want := hwmToken(tsNext(srv.ClusterTime())); tok != want {
			t.Fatalf("%s: token %s, want HWM(lastApplied+1) %s", what, tok.hex(), want.hex())
		}
		last = tok
	}
	step("first batch")
	step("empty getMore")
	// Writes elsewhere advance the high-water mark without events.
	if _, err := other.InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	step("after an unrelated write")
	// After an event, the token is the event's; the next empty batch moves past it.
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	ev := csNext(t, cs)
	evTok := csToken(t, csGet(ev, "_id"))
	if got := csToken(t, csRawToD(t, cs.ResumeToken())); got != evTok || evTok.compare(last) <= 0 {
		t.Fatalf("token after the batch's last event %s, want the event's %s (> %s)", got.hex(), evTok.hex(), last.hex())
	}
	last = evTok
	step("empty getMore after an event")
}

func csRawToD(t *testing.T, raw bson.Raw) bson.D {
	var d bson.D
	if err := bson.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// csNextResult is the outcome of a Next run in the background.
type csNextResult struct {
	ok bool
	at time.Time // when Next returned
}

// csGoNext runs cs.Next in a goroutine. Its cleanup (registered after the stream's own Close,
// so it runs first) cancels that Next and waits for it, so Close never races Next even when
// the test fails early.
func csGoNext(t *testing.T, ctx context.Context, cs *mongo.ChangeStream) <-chan csNextResult {
	ctx, cancel := context.WithCancel(ctx)
	out := make(chan csNextResult, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		ok := cs.Next(ctx)
		out <- csNextResult{ok, time.Now()}
	}()
	t.Cleanup(func() {
		cancel()
		<-finished
	})
	return out
}

// csWaitingGetMore reports whether a change-stream getMore is blocked in the server.
func csWaitingGetMore(srv *Server) bool {
	srv.eng.mu.Lock()
	defer srv.eng.mu.Unlock()
	for _, ent := range srv.eng.cursors.open {
		if ent.inUse && ent.cur.isChangeStream() {
			return true
		}
	}
	return false
}

func TestChangeStreamAwaitDataWakeUpLatency(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("db").Collection("c")
	cs := csWatch(t, coll, nil, options.ChangeStream().SetMaxAwaitTime(10*time.Second))
	if cs.TryNext(ctx) { // consume the empty first batch, so Next goes straight to a getMore
		t.Fatal("unexpected event")
	}
	got := csGoNext(t, ctx, cs)
	// Let the getMore reach the server and block: poll the command log.
	waitFor(t, 5*time.Second, "getMore waiting in the server", func() bool { return csWaitingGetMore(srv) })
	start := time.Now()
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		lat := r.at.Sub(start)
		if !r.ok {
			t.Fatalf("Next returned false: %v", cs.Err())
		}
		if lat > 2*time.Second {
			t.Fatalf("event arrived %s after the insert (maxAwaitTime 10s): not woken", lat)
		}
		t.Logf("insert-to-event latency %s", lat)
	case <-time.After(9 * time.Second):
		t.Fatal("event did not arrive before the await time ran out")
	}
}

// csPipelineOf returns the $changeStream stage of a logged aggregate.
func csStageOf(r CommandRecord) bson.D {
	pv, _ := lookupD(r.Body, "pipeline")
	arr, _ := pv.(bson.A)
	if len(arr) == 0 {
		return nil
	}
	st, _ := arr[0].(bson.D)
	v, _ := lookupD(st, "$changeStream")
	d, _ := v.(bson.D)
	return d
}

func TestChangeStreamHistoryLostAfterTruncateOplog(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("db").Collection("c")
	cs := csWatch(t, coll, nil)
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	tok := csGet(csNext(t, cs), "_id")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	srv.TruncateOplog(srv.ClusterTime())
	_, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(tok))
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != codeChangeStreamHistoryLost || ce.Name != "ChangeStreamHistoryLost" {
		t.Fatalf("resume below the history floor: %v, want 286 ChangeStreamHistoryLost", err)
	}
	if !ce.HasErrorLabel("NonResumableChangeStreamError") {
		t.Fatalf("labels %v, want NonResumableChangeStreamError", ce.Labels)
	}
	if ce.Message != "Resume of change stream was not possible, as the resume point may no longer be in the oplog." {
		t.Fatalf("message %q", ce.Message)
	}
}

func TestChangeStreamHistoryLostWhenOplogCapacityExceeded(t *testing.T) {
	srv, cl := startServer(t, Options{OplogCapacity: 5})
	ctx := testCtx(t)
	coll := cl.Database("db").Collection("c")
	cs := csWatch(t, coll, nil, options.ChangeStream().SetBatchSize(1))
	for i := 0; i < 3; i++ {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	csNext(t, cs) // the batch holds one event; the stream sits at event 0
	for i := 3; i < 20; i++ {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	srv.ResetCommands()
	nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if cs.Next(nctx) {
		t.Fatalf("got an event after the history was lost: %v", csEvent(t, cs))
	}
	if code := csServerCode(cs.Err()); code != codeChangeStreamHistoryLost {
		t.Fatalf("error %v, want 286", cs.Err())
	}
	if n := len(srv.CommandsNamed("aggregate")); n != 0 {
		t.Fatalf("the driver resumed (%d aggregates) after ChangeStreamHistoryLost", n)
	}
}

// csFastRecoveryClient connects a client whose monitor checks every 500ms (the minimum).
//
// Driver v2.10.0 has a race after a network error on an application connection: when the
// cancellation of the in-progress monitoring check misses the streaming hello that is already
// waiting in the server, that hello runs its full maxAwaitTimeMS (= heartbeat interval, 10s by
// default) while the server stays Unknown, and a resume that needs server selection waits that
// long. It happens against real servers too; tests that close connections on purpose shorten
// the window instead of flaking.
func csFastRecoveryClient(t *testing.T, srv *Server) *mongo.Client {
	return connectClient(t, srv, func(o *options.ClientOptions) { o.SetHeartbeatInterval(500 * time.Millisecond) })
}

func TestChangeStreamResumesAfterNetworkErrorOnGetMore(t *testing.T) {
	srv, _ := startServer(t, Options{})
	cl := csFastRecoveryClient(t, srv)
	ctx := testCtx(t)
	coll := cl.Database("db").Collection("c")
	cs := csWatch(t, coll, mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "insert"}}}}},
		options.ChangeStream().SetBatchSize(1))
	for i := 1; i <= 2; i++ {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	ev1 := csNext(t, cs)
	if err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"getMore"}}, {Key: "closeConnection", Value: true}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	ev2 := csNext(t, cs)
	if csGet(ev2, "documentKey", "_id") != int32(2) {
		t.Fatalf("after resume: %v", ev2)
	}
	aggs := srv.CommandsNamed("aggregate")
	if len(aggs) != 2 {
		t.Fatalf("%d aggregates, want the original and one resume", len(aggs))
	}
	ra, ok := lookupD(csStageOf(aggs[1]), "resumeAfter")
	if !ok || csJSON(ra) != csJSON(csGet(ev1, "_id")) {
		t.Fatalf("resume aggregate's resumeAfter %v, want the first event's token %v", ra, csGet(ev1, "_id"))
	}
	if len(aggs[1].Body) == 0 || csJSON(csGet(aggs[1].Body, "pipeline")) == "" {
		t.Fatal("no pipeline")
	}
}

func TestChangeStreamResumeLabels(t *testing.T) {
	cases := []struct {
		name       string
		failPoint  bson.D
		wantResume bool
	}{
		{"failGetMoreAfterCursorCheckout code 6", bson.D{{Key: "configureFailPoint", Value: "failGetMoreAfterCursorCheckout"},
			{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
			{Key: "data", Value: bson.D{{Key: "errorCode", Value: 6}, {Key: "closeConnection", Value: false}}}}, true},
		{"failCommand getMore code 6 without labels", bson.D{{Key: "configureFailPoint", Value: "failCommand"},
			{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
			{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"getMore"}}, {Key: "errorCode", Value: 6}}}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, cl := startServer(t, Options{})
			ctx := testCtx(t)
			coll := cl.Database("db").Collection("c")
			cs := csWatch(t, coll, nil)
			if err := srv.ConfigureFailPoint(tc.failPoint); err != nil {
				t.Fatal(err)
			}
			if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
				t.Fatal(err)
			}
			nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			ok := cs.Next(nctx)
			aggs := srv.CommandsNamed("aggregate")
			if tc.wantResume {
				if !ok || csGet(csEvent(t, cs), "documentKey", "_id") != int32(1) {
					t.Fatalf("no event after resume: %v", cs.Err())
				}
				if len(aggs) != 2 {
					t.Fatalf("%d aggregates, want 2", len(aggs))
				}
				if _, ok := lookupD(csStageOf(aggs[1]), "resumeAfter"); !ok {
					t.Fatalf("resume aggregate without resumeAfter: %v", aggs[1].Body)
				}
				return
			}
			if ok || csServerCode(cs.Err()) != 6 || len(aggs) != 1 {
				t.Fatalf("ok %v err %v aggregates %d: want error 6 and no resume", ok, cs.Err(), len(aggs))
			}
		})
	}
}

func TestChangeStreamResumesAcrossStepDown(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("db").Collection("c")
	cs := csWatch(t, coll, nil, options.ChangeStream().SetMaxAwaitTime(5*time.Second))
	if cs.TryNext(ctx) {
		t.Fatal("unexpected event")
	}
	got := csGoNext(t, ctx, cs)
	waitFor(t, 5*time.Second, "getMore waiting", func() bool { return csWaitingGetMore(srv) })
	if err := srv.StepDown(300 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// The waiting getMore failed with a resumable error; the driver resumes once the node is
	// primary again. A write after re-election reaches the resumed stream.
	waitFor(t, 10*time.Second, "re-election", func() bool {
		primary, _ := srv.state.roleInfo()
		return primary
	})
	var insertErr error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if _, insertErr = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); insertErr == nil {
			break
		}
	}
	if insertErr != nil {
		t.Fatal(insertErr)
	}
	select {
	case r := <-got:
		ok := r.ok
		if !ok {
			t.Fatalf("stream ended: %v", cs.Err())
		}
		if csGet(csEvent(t, cs), "documentKey", "_id") != int32(1) {
			t.Fatalf("event %v", csEvent(t, cs))
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no event after the stepdown")
	}
	if n := len(srv.CommandsNamed("aggregate")); n < 2 {
		t.Fatalf("%d aggregates: the driver did not resume", n)
	}
}

func TestChangeStreamTransactionEvents(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("db").Collection("c")
	if err := cl.Database("db").CreateCollection(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	cs := csWatch(t, coll, nil)
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(context.Background())
	_, err = sess.WithTransaction(ctx, func(sc context.Context) (any, error) {
		for i := 1; i <= 3; i++ {
			if _, err := coll.InsertOne(sc, bson.D{{Key: "_id", Value: i}}); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var prev resumeToken
	var ct any
	for i := 0; i < 3; i++ {
		ev := csNext(t, cs)
		tok := csToken(t, csGet(ev, "_id"))
		if i == 0 {
			ct = csGet(ev, "clusterTime")
		} else if csGet(ev, "clusterTime") != ct || tok.compare(prev) <= 0 || tok.txnOpIndex != prev.txnOpIndex+1 {
			t.Fatalf("event %d: clusterTime %v (want %v), token %s after %s", i, csGet(ev, "clusterTime"), ct, tok.hex(), prev.hex())
		}
		prev = tok
		lsid, ok := csGet(ev, "lsid").(bson.D)
		if !ok {
			t.Fatalf("event %d without lsid: %v", i, ev)
		}
		if id, _ := lookupD(lsid, "id"); csJSON(id) != csJSON(bson.Binary{Subtype: 4, Data: csSessionID(t, sess)}) {
			t.Fatalf("lsid %v is not the session's", lsid)
		}
		if _, ok := csGet(ev, "txnNumber").(int64); !ok {
			t.Fatalf("txnNumber %v", csGet(ev, "txnNumber"))
		}
	}
}

func csSessionID(t *testing.T, sess *mongo.Session) []byte {
	t.Helper()
	raw := sess.ID()
	_, data := raw.Lookup("id").Binary()
	return data
}

func TestChangeStreamBatchSizeLimitsEvents(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("db").Collection("c")
	cs := csWatch(t, coll, nil, options.ChangeStream().SetBatchSize(2))
	docs := []any{}
	for i := 0; i < 5; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if got := csGet(csNext(t, cs), "documentKey", "_id"); got != int32(i) {
			t.Fatalf("event %d: _id %v", i, got)
		}
	}
	for _, r := range srv.CommandsNamed("getMore") {
		if v, _ := lookupD(r.Body, "batchSize"); v != int32(2) {
			t.Fatalf("getMore batchSize %v", v)
		}
	}
	if n := len(srv.CommandsNamed("getMore")); n < 3 {
		t.Fatalf("%d getMores for 5 events in batches of 2", n)
	}
}

func TestChangeStreamIdleWatchersOnOtherNamespacesAreNotWoken(t *testing.T) {
	h := newCSHarness(t, Options{})
	var idle []*changeStream
	for i := 0; i < 100; i++ {
		if _, _, _, err := h.open("db", fmt.Sprintf("idle%d", i), bson.D{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, _, err := h.open("otherdb", int32(1), bson.D{}); err != nil {
		t.Fatal(err)
	}
	h.srv.eng.mu.Lock()
	for _, ent := range h.srv.eng.cursors.open {
		idle = append(idle, ent.cur.(*changeStream))
	}
	h.srv.eng.mu.Unlock()
	for _, cs := range idle { // drain anything pending
		select {
		case <-cs.wake:
		default:
		}
	}
	h.log(csIns("db", "busy", 1))
	for _, cs := range idle {
		select {
		case <-cs.wake:
			t.Fatalf("%s was signalled by a write to db.busy", cs)
		default:
		}
	}
	watcher, _, _, err := h.open("db", "busy", bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	_ = watcher
	h.srv.eng.mu.Lock()
	var busy *changeStream
	for _, ent := range h.srv.eng.cursors.open {
		if ent.cur.namespace() == "db.busy" {
			busy = ent.cur.(*changeStream)
		}
	}
	h.srv.eng.mu.Unlock()
	h.log(csIns("db", "busy", 2))
	select {
	case <-busy.wake:
	default:
		t.Fatal("the watcher of db.busy was not signalled")
	}
}

func TestChangeStreamEngineUserPipeline(t *testing.T) {
	h := newCSHarness(t, Options{})
	match, _, _, err := h.open("db", "c", bson.D{}, bson.D{{Key: "$match", Value: bson.D{{Key: "documentKey._id", Value: int32(2)}}}})
	if err != nil {
		t.Fatal(err)
	}
	proj, _, _, err := h.open("db", "c", bson.D{}, bson.D{{Key: "$project", Value: bson.D{{Key: "op", Value: "$operationType"}}}})
	if err != nil {
		t.Fatal(err)
	}
	noID, _, _, err := h.open("db", "c", bson.D{}, bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: int32(0)}}}})
	if err != nil {
		t.Fatal(err)
	}
	es := h.log(csIns("db", "c", int32(1)), csIns("db", "c", int32(2)), csIns("db", "c", int32(3)))
	got, pbrt, _, err := match.getMore(0, time.Second)
	if err != nil || len(got) != 1 || csGet(got[0], "documentKey", "_id") != int32(2) {
		t.Fatalf("$match: %v %v", got, err)
	}
	// The filtered-out event after the match does not hold the token back... but the token of a
	// non-empty batch is its last event's.
	if csToken(t, pbrt) != eventToken(es[1]) {
		t.Fatalf("pbrt %v, want the matched event's token", pbrt)
	}
	got, _, _, err = proj.getMore(0, time.Second)
	if err != nil || len(got) != 3 || fmt.Sprint(csKeys(got[0])) != "[_id op]" || csGet(got[0], "op") != "insert" {
		t.Fatalf("$project: %v %v", got, err)
	}
	_, _, _, err = noID.getMore(0, time.Second)
	csWantCode(t, err, codeChangeStreamFatalError)
	if ce := err.(*cmdError); ce.Msg != errModifiedID().Msg {
		t.Fatalf("message %q", ce.Msg)
	}
	if labels := computeLabels(&command{Name: "getMore", ChangeStream: true}, codeChangeStreamFatalError); fmt.Sprint(labels) != "[NonResumableChangeStreamError]" {
		t.Fatalf("labels %v", labels)
	}
}

func TestChangeStreamShowExpandedEvents(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	db := cl.Database("db")
	fast := options.ChangeStream().SetMaxAwaitTime(10 * time.Millisecond)
	plain, err := db.Watch(ctx, mongo.Pipeline{}, fast)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close(context.Background())
	expanded, err := db.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetShowExpandedEvents(true))
	if err != nil {
		t.Fatal(err)
	}
	defer expanded.Close(context.Background())
	if err := db.CreateCollection(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("c").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "x", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	// Without the option only the insert is seen, without collectionUUID.
	ev := csNext(t, plain)
	if csGet(ev, "operationType") != "insert" {
		t.Fatalf("plain stream saw %v first", csGet(ev, "operationType"))
	}
	if _, ok := lookupD(ev, "collectionUUID"); ok {
		t.Fatal("collectionUUID without showExpandedEvents")
	}
	create := csNext(t, expanded)
	if csGet(create, "operationType") != "create" || fmt.Sprint(csKeys(create)) != "[_id operationType clusterTime wallTime ns collectionUUID operationDescription]" {
		t.Fatalf("create event %v", create)
	}
	uuid, ok := csGet(create, "collectionUUID").(bson.Binary)
	if !ok || uuid.Subtype != 4 || len(uuid.Data) != 16 {
		t.Fatalf("collectionUUID %v", csGet(create, "collectionUUID"))
	}
	ci := csNext(t, expanded)
	if csGet(ci, "operationType") != "createIndexes" || csGet(ci, "operationDescription", "indexes") == nil {
		t.Fatalf("createIndexes event %v", ci)
	}
	ins := csNext(t, expanded)
	if csGet(ins, "operationType") != "insert" || csJSON(csGet(ins, "collectionUUID")) != csJSON(uuid) {
		t.Fatalf("insert event with showExpandedEvents %v", ins)
	}
}

func TestChangeStreamEngineBatchesStayUnder16MB(t *testing.T) {
	h := newCSHarness(t, Options{})
	cur, _, _, err := h.open("db", "c", bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 6<<20)
	for i := 0; i < 3; i++ {
		en := csIns("db", "c", int32(i))
		en.doc = bson.D{{Key: "_id", Value: int32(i)}, {Key: "blob", Value: bson.Binary{Data: big}}}
		h.log(en)
	}
	var sizes []int
	var seen int
	for seen < 3 {
		got, _, _, err := cur.getMore(0, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			t.Fatal("empty batch with events pending")
		}
		size := 0
		for _, ev := range got {
			size += approxSize(ev)
		}
		if size > maxBSONSize {
			t.Fatalf("batch of %d bytes exceeds 16MB", size)
		}
		sizes = append(sizes, len(got))
		seen += len(got)
	}
	if fmt.Sprint(sizes) != "[2 1]" {
		t.Fatalf("batch sizes %v, want [2 1]", sizes)
	}
}

func TestChangeStreamWaitingGetMoreEndsWhenConnectionDies(t *testing.T) {
	srv, _ := startServer(t, Options{})
	cl := csFastRecoveryClient(t, srv)
	ctx := testCtx(t)
	coll := cl.Database("db").Collection("c")
	cs := csWatch(t, coll, nil, options.ChangeStream().SetMaxAwaitTime(10*time.Second))
	if cs.TryNext(ctx) {
		t.Fatal("unexpected event")
	}
	id := cs.ID() // read before Next runs concurrently
	got := csGoNext(t, ctx, cs)
	waitFor(t, 5*time.Second, "getMore waiting", func() bool { return csWaitingGetMore(srv) })
	srv.KillAllConnections()
	// The server-side getMore ends at once (its connection is gone) and its cursor is dropped.
	waitFor(t, 2*time.Second, "the waiting getMore to end", func() bool {
		srv.eng.mu.Lock()
		defer srv.eng.mu.Unlock()
		return srv.eng.cursors.open[id] == nil
	})
	// The client's pool was cleared by the kill: an insert racing that may fail once.
	var insertErr error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		_, insertErr = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
		if insertErr == nil || mongo.IsDuplicateKeyError(insertErr) {
			insertErr = nil
			break
		}
	}
	if insertErr != nil {
		t.Fatal(insertErr)
	}
	select {
	case r := <-got:
		ok := r.ok
		if !ok || csGet(csEvent(t, cs), "documentKey", "_id") != int32(1) {
			t.Fatalf("after the connection kill: ok %v err %v", ok, cs.Err())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no event after the connection kill")
	}
	if n := len(srv.CommandsNamed("aggregate")); n != 2 {
		t.Fatalf("%d aggregates, want a resume", n)
	}
}

func TestChangeStreamEngineDisambiguatedPaths(t *testing.T) {
	h := newCSHarness(t, Options{})
	cur, _, _, err := h.open("db", "c", bson.D{{Key: "showExpandedEvents", Value: true}})
	if err != nil {
		t.Fatal(err)
	}
	upd := func(ud bson.D, post bson.D) *oplogEntry {
		return &oplogEntry{op: "update", db: "db", coll: "c", docKey: bson.D{{Key: "_id", Value: int32(1)}}, updateDesc: ud, post: post}
	}
	h.log(
		// Plain paths: an empty disambiguatedPaths.
		upd(bson.D{{Key: "updatedFields", Value: bson.D{{Key: "x.y", Value: 1}}}}, nil),
		// Numeric components resolved against the post-image.
		upd(bson.D{{Key: "updatedFields", Value: bson.D{{Key: "arr.2.5", Value: 1}}}, {Key: "removedFields", Value: bson.A{"m.7"}}},
			bson.D{{Key: "_id", Value: int32(1)}, {Key: "arr", Value: bson.A{0, 1, bson.D{{Key: "5", Value: 1}}}}, {Key: "m", Value: bson.D{}}}),
		// Numeric path, no image and the document is gone: the stream refuses to guess.
		upd(bson.D{{Key: "updatedFields", Value: bson.D{{Key: "a.1", Value: 1}}}}, nil),
	)
	got, _, _, err := cur.getMore(2, time.Second)
	if err != nil || len(got) != 2 {
		t.Fatalf("getMore: %v %v", got, err)
	}
	if dp := csJSON(csGet(got[0], "updateDescription", "disambiguatedPaths")); dp != "{}" {
		t.Fatalf("plain paths: %s", dp)
	}
	if dp := csJSON(csGet(got[1], "updateDescription", "disambiguatedPaths")); dp != `{"arr.2.5":["arr",2,"5"],"m.7":["m","7"]}` {
		t.Fatalf("numeric paths: %s", dp)
	}
	_, _, _, err = cur.getMore(0, time.Second)
	csWantCode(t, err, codeUnsupported)
}

func TestChangeStreamEngineAggregateFields(t *testing.T) {
	h := newCSHarness(t, Options{})
	pipeline := bson.A{bson.D{{Key: "$changeStream", Value: bson.D{}}}}
	for _, tc := range []struct {
		name string
		body bson.D
		code int32
	}{
		{"unknown field", bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: pipeline}, {Key: "cursor", Value: bson.D{}}, {Key: "bogus", Value: 1}}, 40415},
		{"no cursor", bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: pipeline}}, codeFailedToParse},
		{"explain", bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: pipeline}, {Key: "cursor", Value: bson.D{}}, {Key: "explain", Value: true}}, codeUnsupported},
		{"non-simple collation", bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: pipeline}, {Key: "cursor", Value: bson.D{}},
			{Key: "collation", Value: bson.D{{Key: "locale", Value: "fr"}}}}, codeUnsupported},
	} {
		_, err := cmdAggregateChangeStream(h.srv, h.command("db", tc.body))
		var ce *cmdError
		if !errors.As(err, &ce) || ce.Code != tc.code {
			t.Errorf("%s: %v, want code %d", tc.name, err, tc.code)
		}
	}
	// comment and maxTimeMS are accepted.
	ok := bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: pipeline}, {Key: "cursor", Value: bson.D{}},
		{Key: "comment", Value: "x"}, {Key: "maxTimeMS", Value: int64(5)}, {Key: "collation", Value: bson.D{{Key: "locale", Value: "simple"}}}}
	if _, err := cmdAggregateChangeStream(h.srv, h.command("db", ok)); err != nil {
		t.Fatal(err)
	}
}

// TestChangeStreamResumeFromAnotherNamespacesEvent: a collection stream resumed from the token
// of another collection's event never finds it among its own events. As on a server, the open
// succeeds and the stream fails (280, NonResumableChangeStreamError) once it meets its next
// event; a high-water mark of the same time resumes, and so does a database stream that holds
// the event.
func TestChangeStreamResumeFromAnotherNamespacesEvent(t *testing.T) {
	h := newCSHarness(t, Options{})
	es := h.log(csIns("db", "other", 1))
	foreign := eventToken(es[0]).doc()
	cur, batch, _, err := h.open("db", "c", bson.D{{Key: "resumeAfter", Value: foreign}})
	if err != nil || len(batch) != 0 {
		t.Fatalf("open from another collection's event: batch %v, err %v; want an empty batch and no error yet", batch, err)
	}
	if got, _, _, err := cur.getMore(0, 0); err != nil || len(got) != 0 {
		t.Fatalf("getMore with no event of its own: %v %v, want nothing and no error", got, err)
	}
	h.log(csIns("db", "other", 2)) // another collection's: still nothing to compare
	if got, _, _, err := cur.getMore(0, 0); err != nil || len(got) != 0 {
		t.Fatalf("getMore after another collection's write: %v %v", got, err)
	}
	h.log(csIns("db", "c", 3))
	_, _, _, err = cur.getMore(0, 0)
	csWantCode(t, err, codeChangeStreamFatalError)
	if err != nil && !strings.Contains(err.Error(), "resume token was not found") {
		t.Errorf("error %q does not say the token was not found", err)
	}

	// The high-water mark at the event's time resumes, and returns the later event.
	_, batch, _, err = h.open("db", "c", bson.D{{Key: "resumeAfter", Value: hwmToken(es[0].ts).doc()}})
	if err != nil || len(batch) != 1 {
		t.Fatalf("resume from a high-water mark: batch %v, err %v; want the one event of c", batch, err)
	}
	// A database stream holds the other collection's event: its token resumes it.
	_, batch, _, err = h.open("db", int32(1), bson.D{{Key: "resumeAfter", Value: foreign}})
	if err != nil || len(batch) != 2 {
		t.Fatalf("database stream from the event: batch %v, err %v; want the two later events", batch, err)
	}
}
