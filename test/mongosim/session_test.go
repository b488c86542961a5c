package mongosim

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// sessTestWriteCmd is a test-only write command that counts its executions per server and
// goes through the same retryable-write dedupe as the real write commands. It isolates the
// session machinery from the write path.
const sessTestWriteCmd = "mongosimTestRetryableWrite"

var sessTestWriteCounts sync.Map // *Server -> *atomic.Int64

func init() {
	registerCommand(kindWrite, func(s *Server, c *command) (bson.D, error) {
		e := s.eng
		e.mu.Lock()
		defer e.mu.Unlock()
		if reply, found, err := e.retryLookupLocked(c); err != nil {
			return nil, err
		} else if found {
			return reply, nil
		}
		cnt, _ := sessTestWriteCounts.LoadOrStore(s, new(atomic.Int64))
		seq := cnt.(*atomic.Int64).Add(1)
		reply := bson.D{{Key: "n", Value: int32(1)}, {Key: "seq", Value: seq}}
		e.retryStoreLocked(c, reply)
		return reply, nil
	}, sessTestWriteCmd)
}

func sessTestWriteCount(s *Server) int64 {
	cnt, ok := sessTestWriteCounts.Load(s)
	if !ok {
		return 0
	}
	return cnt.(*atomic.Int64).Load()
}

// sessRetryCmd builds a command as the dispatcher would parse it.
func sessRetryCmd(lsid bson.Binary, txn *int64, autocommit *bool) *command {
	return &command{Name: sessTestWriteCmd, LSID: &lsid, TxnNumber: txn, Autocommit: autocommit}
}

func sessTestLSID(b byte) bson.Binary {
	d := make([]byte, 16)
	for i := range d {
		d[i] = b
	}
	return bson.Binary{Subtype: 4, Data: d}
}

func TestSessionRetryLookupStore(t *testing.T) {
	srv, _ := startServer(t, Options{})
	e := srv.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	lsid := sessTestLSID(1)
	five, four, six := int64(5), int64(4), int64(6)

	if _, found, err := e.retryLookupLocked(sessRetryCmd(lsid, &five, nil)); found || err != nil {
		t.Fatalf("first lookup: found=%v err=%v, want a miss", found, err)
	}
	// A failed first attempt stores nothing: the retry executes again.
	if _, found, err := e.retryLookupLocked(sessRetryCmd(lsid, &five, nil)); found || err != nil {
		t.Fatalf("lookup before store: found=%v err=%v, want a miss", found, err)
	}
	stored := bson.D{{Key: "n", Value: int32(3)}}
	e.retryStoreLocked(sessRetryCmd(lsid, &five, nil), stored)
	reply, found, err := e.retryLookupLocked(sessRetryCmd(lsid, &five, nil))
	if err != nil || !found || len(reply) != 1 || reply[0].Value != int32(3) {
		t.Fatalf("retry lookup = %v, %v, %v; want the stored reply", reply, found, err)
	}
	if cap(reply) != len(reply) {
		t.Fatalf("stored reply is not clipped: len %d cap %d", len(reply), cap(reply))
	}
	_, _, err = e.retryLookupLocked(sessRetryCmd(lsid, &four, nil))
	var ce *cmdError
	if !errors.As(err, &ce) || ce.Code != codeTransactionTooOld {
		t.Fatalf("lower txnNumber: err = %v, want TransactionTooOld (225)", err)
	}
	if _, found, err := e.retryLookupLocked(sessRetryCmd(lsid, &six, nil)); found || err != nil {
		t.Fatalf("higher txnNumber: found=%v err=%v, want a miss", found, err)
	}
	// The higher number replaced the old one: 5 is now too old.
	if _, _, err := e.retryLookupLocked(sessRetryCmd(lsid, &five, nil)); !errors.As(err, &ce) || ce.Code != codeTransactionTooOld {
		t.Fatalf("txnNumber 5 after 6: err = %v, want 225", err)
	}
	// Another session is independent.
	if _, found, err := e.retryLookupLocked(sessRetryCmd(sessTestLSID(2), &four, nil)); found || err != nil {
		t.Fatalf("other session: found=%v err=%v", found, err)
	}
	// Commands in a transaction (autocommit false) are not retryable writes: no-ops.
	f := false
	e.retryStoreLocked(sessRetryCmd(lsid, &six, &f), bson.D{{Key: "x", Value: 1}})
	if _, found, err := e.retryLookupLocked(sessRetryCmd(lsid, &four, &f)); found || err != nil {
		t.Fatalf("transaction command: found=%v err=%v, want no-op", found, err)
	}
	if _, found, _ := e.retryLookupLocked(sessRetryCmd(lsid, &six, nil)); found {
		t.Fatal("a transaction command's reply was stored as a retryable write's")
	}
	// No txnNumber at all: no-op.
	if _, found, err := e.retryLookupLocked(&command{LSID: &lsid}); found || err != nil {
		t.Fatalf("no txnNumber: found=%v err=%v", found, err)
	}
}

// TestSessionReapIdle checks that a session idle for longer than logicalSessionTimeoutMinutes
// is forgotten once the injected clock passes the timeout.
func TestSessionReapIdle(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	srv, _ := startServer(t, Options{Now: clock})
	e := srv.eng
	old, fresh := sessTestLSID(7), sessTestLSID(8)
	seven := int64(7)
	e.mu.Lock()
	e.retryLookupLocked(sessRetryCmd(old, &seven, nil))
	e.retryStoreLocked(sessRetryCmd(old, &seven, nil), bson.D{})
	e.mu.Unlock()

	advance(10 * time.Minute)
	e.mu.Lock()
	e.retryLookupLocked(sessRetryCmd(fresh, &seven, nil))
	_, kept := e.sessions.m[sessionKey(old)]
	e.mu.Unlock()
	if !kept {
		t.Fatal("a session idle for 10 minutes was reaped")
	}
	advance(25 * time.Minute) // old: idle 35 min; fresh: 25 min
	e.mu.Lock()
	e.touchSessionLocked(&command{LSID: &fresh})
	_, oldKept := e.sessions.m[sessionKey(old)]
	_, freshKept := e.sessions.m[sessionKey(fresh)]
	e.mu.Unlock()
	if oldKept || !freshKept {
		t.Fatalf("after 35 min: old kept=%v (want false), fresh kept=%v (want true)", oldKept, freshKept)
	}
}

// sessRun runs cmd on db inside the explicit session sess.
func sessRun(ctx context.Context, db *mongo.Database, sess *mongo.Session, cmd bson.D) (bson.M, error) {
	var out bson.M
	err := mongo.WithSession(ctx, sess, func(sc context.Context) error {
		return db.RunCommand(sc, cmd).Decode(&out)
	})
	return out, err
}

// TestSessionTxnNumberThroughDriver drives the dedupe over the wire: the same (lsid,
// txnNumber) executes once and the retry gets the stored reply; a lower txnNumber gets
// TransactionTooOld (225); another session is independent.
func TestSessionTxnNumberThroughDriver(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	db := cl.Database("test")
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	cmd := func(n int64) bson.D {
		return bson.D{{Key: sessTestWriteCmd, Value: 1}, {Key: "txnNumber", Value: n}}
	}
	first, err := sessRun(ctx, db, sess, cmd(5))
	if err != nil {
		t.Fatal(err)
	}
	again, err := sessRun(ctx, db, sess, cmd(5))
	if err != nil {
		t.Fatal(err)
	}
	if sessTestWriteCount(srv) != 1 {
		t.Fatalf("executions = %d after a retry with the same txnNumber, want 1", sessTestWriteCount(srv))
	}
	if first["seq"] != again["seq"] {
		t.Fatalf("retry reply seq %v != first reply seq %v", again["seq"], first["seq"])
	}
	_, err = sessRun(ctx, db, sess, cmd(4))
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(225) {
		t.Fatalf("lower txnNumber: err = %v, want TransactionTooOld (225)", err)
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) && ce.Name != "TransactionTooOld" {
		t.Fatalf("codeName = %q, want TransactionTooOld", ce.Name)
	}
	if _, err := sessRun(ctx, db, sess, cmd(6)); err != nil {
		t.Fatal(err)
	}
	if sessTestWriteCount(srv) != 2 {
		t.Fatalf("executions = %d after a higher txnNumber, want 2", sessTestWriteCount(srv))
	}
	other, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer other.EndSession(ctx)
	if _, err := sessRun(ctx, db, other, cmd(1)); err != nil {
		t.Fatalf("another session with a lower number: %v", err)
	}
	if sessTestWriteCount(srv) != 3 {
		t.Fatalf("executions = %d, want 3", sessTestWriteCount(srv))
	}
}

// sessInsertsOf returns the txnNumber and lsid.id of every logged insert into coll.
func sessInsertsOf(t *testing.T, s *Server, coll string) (txns []int64, lsids []string, errs []error) {
	t.Helper()
	for _, r := range s.CommandsNamed("insert") {
		if tgt, _ := r.Body[0].Value.(string); tgt != coll {
			continue
		}
		n, _ := lookupD(r.Body, "txnNumber")
		txn, ok := n.(int64)
		if !ok {
			t.Fatalf("insert without an Int64 txnNumber: %v", r.Body)
		}
		l, _ := lookupD(r.Body, "lsid")
		ld, _ := l.(bson.D)
		id, _ := lookupD(ld, "id")
		b, _ := id.(bson.Binary)
		txns, lsids, errs = append(txns, txn), append(lsids, string(b.Data)), append(errs, r.Err)
	}
	return txns, lsids, errs
}

// TestSessionRetryableInsertAfterClosedConnection: the first insert attempt loses its
// connection before executing; the driver retries with the same (lsid, txnNumber) and the
// document is inserted exactly once.
func TestSessionRetryableInsertAfterClosedConnection(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	c := cl.Database("test").Collection("retry_cc")
	if err := srv.ConfigureFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "closeConnection", Value: true}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("InsertOne was not retried: %v", err)
	}
	n, err := c.CountDocuments(ctx, bson.D{})
	if err != nil || n != 1 {
		t.Fatalf("count = %d, %v; want exactly 1", n, err)
	}
	txns, lsids, errs := sessInsertsOf(t, srv, "retry_cc")
	if len(txns) != 2 || txns[0] != txns[1] || lsids[0] != lsids[1] {
		t.Fatalf("inserts: txnNumbers %v, same lsid %v; want 2 with one (lsid, txnNumber)", txns, len(lsids) == 2 && lsids[0] == lsids[1])
	}
	if errs[0] == nil || errs[1] != nil {
		t.Fatalf("insert outcomes %v; want the first dropped and the retry ok", errs)
	}
}

// TestSessionRetryableInsertAfterWriteConcernError: the first insert executes but its reply
// carries a retryable writeConcernError; the driver retries with the same (lsid, txnNumber),
// and the retry is answered from the stored reply without inserting again (no duplicate key
// error, one document).
func TestSessionRetryableInsertAfterWriteConcernError(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	c := cl.Database("test").Collection("retry_wce")
	if err := srv.ConfigureFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"insert"}},
			{Key: "errorLabels", Value: bson.A{"RetryableWriteError"}},
			// ExceededTimeLimit: retryable, and not a state-change error that would make the
			// driver wait for its next heartbeat before retrying.
			{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 262}, {Key: "errmsg", Value: "operation exceeded time limit"}}}}}}); err != nil {
		t.Fatal(err)
	}
	res, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	if err != nil {
		t.Fatalf("InsertOne: %v (the retry must get the stored reply, not a duplicate key error)", err)
	}
	if res.InsertedID != int32(1) {
		t.Fatalf("InsertedID = %v", res.InsertedID)
	}
	n, err := c.CountDocuments(ctx, bson.D{})
	if err != nil || n != 1 {
		t.Fatalf("count = %d, %v; want exactly 1", n, err)
	}
	txns, lsids, errs := sessInsertsOf(t, srv, "retry_wce")
	if len(txns) != 2 || txns[0] != txns[1] || lsids[0] != lsids[1] {
		t.Fatalf("inserts: txnNumbers %v; want 2 with one (lsid, txnNumber)", txns)
	}
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("insert outcomes %v; both must succeed at the command level", errs)
	}
}

// TestSessionInsertTxnNumberTooOld sends inserts with explicit txnNumbers through RunCommand:
// a repeat is not executed again and a lower number fails with TransactionTooOld.
func TestSessionInsertTxnNumberTooOld(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	db := cl.Database("test")
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	ins := func(txn int64, id int) (bson.M, error) {
		return sessRun(ctx, db, sess, bson.D{{Key: "insert", Value: "too_old"},
			{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: id}}}}, {Key: "txnNumber", Value: txn}})
	}
	if _, err := ins(10, 1); err != nil {
		t.Fatal(err)
	}
	again, err := ins(10, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, dup := again["writeErrors"]; dup {
		t.Fatalf("the repeated insert executed again: %v", again)
	}
	_, err = ins(9, 2)
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(225) {
		t.Fatalf("lower txnNumber: %v, want TransactionTooOld (225)", err)
	}
	n, err := db.Collection("too_old").CountDocuments(ctx, bson.D{})
	if err != nil || n != 1 {
		t.Fatalf("count = %d, %v; want 1", n, err)
	}
}

// TestSessionRetryableWriteOlderThanTransaction: txnNumbers are shared between retryable
// writes and transactions of a session, so a retryable write numbered below the session's
// transaction fails with TransactionTooOld.
func TestSessionRetryableWriteOlderThanTransaction(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	db := cl.Database("test")
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	if _, err := sess.WithTransaction(ctx, func(sc context.Context) (any, error) {
		return db.Collection("old_txn").InsertOne(sc, bson.D{{Key: "_id", Value: 1}})
	}); err != nil {
		t.Fatal(err)
	}
	commits := srv.CommandsNamed("commitTransaction")
	if len(commits) != 1 {
		t.Fatalf("commitTransaction commands = %d", len(commits))
	}
	v, _ := lookupD(commits[0].Body, "txnNumber")
	txn, ok := v.(int64)
	if !ok || txn < 1 {
		t.Fatalf("commit txnNumber = %#v", v)
	}
	_, err = sessRun(ctx, db, sess, bson.D{{Key: sessTestWriteCmd, Value: 1}, {Key: "txnNumber", Value: txn - 1}})
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(225) {
		t.Fatalf("retryable write below the transaction's number: %v, want TransactionTooOld (225)", err)
	}
	if _, err := sessRun(ctx, db, sess, bson.D{{Key: sessTestWriteCmd, Value: 1}, {Key: "txnNumber", Value: txn + 1}}); err != nil {
		t.Fatalf("retryable write above the transaction's number: %v", err)
	}
}

// TestSessionRetryableNonIdempotentWritesAfterWriteConcernError: $inc through updateOne and
// findOneAndUpdate, retried by the driver after a retryable writeConcernError, is applied
// once: the retry is answered from the stored reply.
func TestSessionRetryableNonIdempotentWritesAfterWriteConcernError(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	c := cl.Database("test").Collection("retry_inc")
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	failOnce := func(cmd string) {
		t.Helper()
		if err := srv.ConfigureFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"},
			{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
			{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{cmd}},
				{Key: "errorLabels", Value: bson.A{"RetryableWriteError"}},
				{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 262}, {Key: "errmsg", Value: "operation exceeded time limit"}}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	inc := bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}
	failOnce("update")
	res, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, inc)
	if err != nil {
		t.Fatalf("UpdateOne: %v", err)
	}
	if res.ModifiedCount != 1 {
		t.Fatalf("UpdateOne modified %d, want the stored reply's 1", res.ModifiedCount)
	}
	failOnce("findAndModify")
	var after bson.M
	if err := c.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 1}}, inc, options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&after); err != nil {
		t.Fatalf("FindOneAndUpdate: %v", err)
	}
	if after["n"] != int32(2) {
		t.Fatalf("FindOneAndUpdate returned n = %v, want 2", after["n"])
	}
	var doc bson.M
	if err := c.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc["n"] != int32(2) {
		t.Fatalf("n = %v after two retried increments, want 2 (each applied once)", doc["n"])
	}
	if a, b := len(srv.CommandsNamed("update")), len(srv.CommandsNamed("findAndModify")); a != 2 || b != 2 {
		t.Fatalf("update/findAndModify commands = %d/%d, want 2/2 (each retried once)", a, b)
	}
}
