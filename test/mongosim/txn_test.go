package mongosim

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// txSessionID returns the lsid.id of a driver session.
func txSessionID(t *testing.T, sess *mongo.Session) bson.Binary {
	t.Helper()
	var id struct {
		ID bson.Binary `bson:"id"`
	}
	if err := bson.Unmarshal(sess.ID(), &id); err != nil {
		t.Fatal(err)
	}
	return id.ID
}

// txCmd builds a command inside a transaction as the dispatcher would parse it.
func txCmd(name, db string, body bson.D, lsid bson.Binary, n int64, start bool) *command {
	f := false
	full := append(bson.D{{Key: name, Value: body[0].Value}}, body[1:]...)
	return &command{Name: name, DB: db, Body: full, LSID: &lsid, TxnNumber: &n, Autocommit: &f, StartTxn: start}
}

func txInsert(id int) bson.D {
	return bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: int32(id)}}}}}
}

func txCode(err error) int32 {
	var ce *cmdError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return 0
}

func TestTxnCommitMakesWritesVisibleAtOnce(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("tx").Collection("c")
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: 0}}, bson.D{{Key: "_id", Value: 2}}}); err != nil {
		t.Fatal(err)
	}
	before := len(wOplog(srv))
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	sctx := mongo.NewSessionContext(ctx, sess)
	if _, err := coll.InsertMany(sctx, []any{bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "_id", Value: 4}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(sctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.DeleteOne(sctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	// Nothing is visible, nor logged, before the commit.
	if docs := wDocs(srv, "tx", "c"); len(docs) != 2 || wJSON(docs[0]) != `{"_id": {"$numberInt":"1"},"v": {"$numberInt":"0"}}` {
		t.Fatalf("committed state changed before commit: %v", docs)
	}
	if n := len(wOplog(srv)); n != before {
		t.Fatalf("%d oplog entries appeared before commit", n-before)
	}
	// The transaction sees its own writes.
	srv.eng.mu.Lock()
	f := false
	var n int64
	if st := srv.eng.txnsLocked().m[string(txSessionID(t, sess).Data)]; st != nil {
		n = st.number
	}
	v := srv.eng.viewLocked(&command{LSID: txPtr(txSessionID(t, sess)), TxnNumber: &n, Autocommit: &f}, "tx", "c")
	own := v != nil && v.count() == 3
	srv.eng.mu.Unlock()
	if !own {
		t.Fatalf("view does not show the transaction's writes (view %v)", v)
	}
	if err := sess.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	docs := wDocs(srv, "tx", "c")
	var ids []string
	for _, d := range docs {
		ids = append(ids, wJSON(d))
	}
	if got := strings.Join(ids, " "); got != `{"_id": {"$numberInt":"1"},"v": {"$numberInt":"1"}} {"_id": {"$numberInt":"3"}} {"_id": {"$numberInt":"4"}}` {
		t.Fatalf("after commit: %s", got)
	}
	ens := wOplog(srv)[before:]
	if len(ens) != 4 {
		t.Fatalf("commit logged %d entries, want 4", len(ens))
	}
	id := txSessionID(t, sess)
	for i, en := range ens {
		if en.ts != ens[0].ts || en.txnOpIndex != uint32(i) {
			t.Fatalf("entry %d: ts %v txnOpIndex %d; want one ts and increasing index", i, en.ts, en.txnOpIndex)
		}
		if en.txnNumber == nil || *en.txnNumber < 1 {
			t.Fatalf("entry %d txnNumber = %v", i, en.txnNumber)
		}
		gotID, _ := lookupD(en.lsid, "id")
		uid, _ := lookupD(en.lsid, "uid")
		if b, ok := gotID.(bson.Binary); !ok || string(b.Data) != string(id.Data) {
			t.Fatalf("entry %d lsid = %v", i, en.lsid)
		}
		if b, ok := uid.(bson.Binary); !ok || len(b.Data) != 32 {
			t.Fatalf("entry %d lsid.uid = %v", i, uid)
		}
	}
	var ops []string
	for _, en := range ens {
		ops = append(ops, en.op)
	}
	if got := strings.Join(ops, ","); got != "insert,insert,update,delete" {
		t.Fatalf("ops = %s", got)
	}
	// Committing again (the driver's retry) is idempotent.
	if err := sess.CommitTransaction(ctx); err != nil {
		t.Fatalf("second commit: %v", err)
	}
	if n := len(wOplog(srv)); n != before+4 {
		t.Fatalf("second commit logged again")
	}
}

func txPtr[T any](v T) *T { return &v }

func TestTxnAbortDiscards(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("tx").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	before := len(wOplog(srv))
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	sctx := mongo.NewSessionContext(ctx, sess)
	if _, err := coll.InsertOne(sctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Database("tx").Collection("fresh").InsertOne(sctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := sess.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if docs := wDocs(srv, "tx", "c"); len(docs) != 1 {
		t.Fatalf("aborted insert visible: %v", docs)
	}
	srv.eng.mu.Lock()
	fresh := srv.eng.collLocked("tx", "fresh")
	srv.eng.mu.Unlock()
	if fresh != nil {
		t.Fatal("aborted transaction created its collection")
	}
	if n := len(wOplog(srv)); n != before {
		t.Fatalf("abort logged %d entries", n-before)
	}
}

func TestTxnCreatesCollectionAtCommit(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	_, err = sess.WithTransaction(ctx, func(sctx context.Context) (any, error) {
		return cl.Database("tx").Collection("new").InsertOne(sctx, bson.D{{Key: "_id", Value: 1}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if docs := wDocs(srv, "tx", "new"); len(docs) != 1 {
		t.Fatalf("docs = %v", docs)
	}
	var ops []string
	for _, en := range wOplog(srv) {
		if en.coll == "new" {
			ops = append(ops, en.op)
			if en.txnNumber == nil {
				t.Fatalf("%s entry of the transaction has no txnNumber", en.op)
			}
		}
	}
	if got := strings.Join(ops, ","); got != "create,insert" {
		t.Fatalf("ops = %s", got)
	}
}

// TestTxnWithTransactionRetriesWriteConflict: a document the transaction wrote is changed by
// another client; the transaction's next write of it fails with WriteConflict labelled
// TransientTransactionError, and WithTransaction runs the callback again.
func TestTxnWithTransactionRetriesWriteConflict(t *testing.T) {
	srv, cl := startServer(t, Options{})
	other := connectClient(t, srv, nil)
	ctx := testCtx(t)
	coll := cl.Database("tx").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	attempts := 0
	var firstErr error
	inc := bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}
	_, err = sess.WithTransaction(ctx, func(sctx context.Context) (any, error) {
		attempts++
		// The read takes the transaction's snapshot; the outside write then changes the
		// document (the transaction does not hold it yet, so the write does not wait).
		if err := coll.FindOne(sctx, bson.D{{Key: "_id", Value: 1}}).Err(); err != nil {
			return nil, err
		}
		if attempts == 1 {
			if _, err := other.Database("tx").Collection("c").UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}},
				bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 100}}}}); err != nil {
				return nil, err
			}
		}
		_, err := coll.UpdateOne(sctx, bson.D{{Key: "_id", Value: 1}}, inc)
		if attempts == 1 {
			firstErr = err
		}
		return nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	var ce mongo.CommandError
	if !errors.As(firstErr, &ce) || ce.Code != codeWriteConflict || !ce.HasErrorLabel("TransientTransactionError") {
		t.Fatalf("first attempt error = %v, want WriteConflict with TransientTransactionError", firstErr)
	}
	if attempts != 2 {
		t.Fatalf("attempts = %d, want 2", attempts)
	}
	if n, _ := lookupD(wDocs(srv, "tx", "c")[0], "n"); n != int32(101) {
		t.Fatalf("n = %v, want 101 (the outside write and the retried transaction)", n)
	}
}

// A write outside transactions that the transaction's own writes do not hold (here a unique
// key the transaction's insert also takes, invisible outside it) proceeds, and the commit then
// fails with WriteConflict.
func TestTxnWriteConflictAtCommit(t *testing.T) {
	srv, cl := startServer(t, Options{})
	other := connectClient(t, srv, nil)
	ctx := testCtx(t)
	coll := cl.Database("tx").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "u", Value: 1}},
		Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	sctx := mongo.NewSessionContext(ctx, sess)
	if _, err := coll.UpdateOne(sctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "by", Value: "txn"}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(sctx, bson.D{{Key: "_id", Value: 2}, {Key: "u", Value: "k"}}); err != nil {
		t.Fatal(err)
	}
	// Another client takes the unique key u: "k" the transaction's insert also takes.
	if _, err := other.Database("tx").Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 3}, {Key: "u", Value: "k"}}); err != nil {
		t.Fatal(err)
	}
	err = sess.CommitTransaction(ctx)
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != codeWriteConflict || !ce.HasErrorLabel("TransientTransactionError") {
		t.Fatalf("commit = %v, want WriteConflict with TransientTransactionError", err)
	}
	docs := wDocs(srv, "tx", "c")
	if len(docs) != 2 || wJSON(docs[0]) != `{"_id": {"$numberInt":"1"}}` {
		t.Fatalf("a conflicting commit applied something: %v", docs)
	}
}

func TestTxnDuplicateKeyAbortsTransaction(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("tx").Collection("c")
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	sctx := mongo.NewSessionContext(ctx, sess)
	if _, err := coll.InsertOne(sctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	// The duplicate is detected against the transaction's own view.
	if _, err := coll.InsertOne(sctx, bson.D{{Key: "_id", Value: 1}}); !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("duplicate inside the transaction: %v", err)
	}
	err = sess.CommitTransaction(ctx)
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != codeNoSuchTransaction || !ce.HasErrorLabel("TransientTransactionError") {
		t.Fatalf("commit after a failed write = %v, want NoSuchTransaction", err)
	}
	if docs := wDocs(srv, "tx", "c"); len(docs) != 0 {
		t.Fatalf("aborted transaction left %v", docs)
	}
}

// TestTxnStateMachine drives the handlers directly with (lsid, txnNumber) combinations.
func TestTxnStateMachine(t *testing.T) {
	srv, _ := startServer(t, Options{})
	lsid := bson.Binary{Subtype: 4, Data: []byte("0123456789abcdef")}
	adm := func(name string, n int64) error {
		_, err := commandTable[name].handler(srv, txCmd(name, "admin", bson.D{{Key: name, Value: 1}}, lsid, n, false))
		return err
	}
	ins := func(id int, n int64, start bool) error {
		_, err := cmdInsert(srv, txCmd("insert", "tx", txInsert(id), lsid, n, start))
		return err
	}
	steps := []struct {
		what string
		err  error
		want int32
	}{
		{"insert without start on an unknown txn", ins(1, 1, false), codeNoSuchTransaction},
		{"start txn 1", ins(1, 1, true), 0},
		{"continue txn 1", ins(2, 1, false), 0},
		{"start txn 1 again", ins(3, 1, true), codeConflictingOperationInProgress},
		{"commit txn 1", adm("commitTransaction", 1), 0},
		{"commit txn 1 again", adm("commitTransaction", 1), 0},
		{"write after commit", ins(4, 1, false), codeTransactionCommitted},
		{"abort after commit", adm("abortTransaction", 1), codeTransactionCommitted},
		{"start old txn 0", ins(5, 0, true), codeTransactionTooOld},
		{"start txn 2", ins(6, 2, true), 0},
		{"start txn 3 aborts 2", ins(7, 3, true), 0},
		{"commit txn 2", adm("commitTransaction", 2), codeTransactionTooOld},
		{"abort txn 3", adm("abortTransaction", 3), 0},
		{"write in aborted txn 3", ins(8, 3, false), codeNoSuchTransaction},
		{"commit aborted txn 3", adm("commitTransaction", 3), codeNoSuchTransaction},
		{"commit unknown txn 9", adm("commitTransaction", 9), codeNoSuchTransaction},
	}
	for _, st := range steps {
		if got := txCode(st.err); got != st.want {
			t.Fatalf("%s: code %d (%v), want %d", st.what, got, st.err, st.want)
		}
	}
	var ids []any
	for _, d := range wDocs(srv, "tx", "c") {
		ids = append(ids, d[0].Value)
	}
	if !slices.Equal(ids, []any{int32(1), int32(2)}) {
		t.Fatalf("committed ids = %v, want only txn 1's [1 2]", ids)
	}
	// A retryable write below the latest transaction number is too old; above it, it aborts
	// the open transaction.
	if _, err := cmdInsert(srv, &command{Name: "insert", DB: "tx", Body: txInsert(20), LSID: &lsid, TxnNumber: txPtr(int64(2))}); txCode(err) != codeTransactionTooOld {
		t.Fatalf("retryable write with txnNumber 2 after transaction 3: %v, want 225", err)
	}
	if err := ins(21, 5, true); err != nil {
		t.Fatal(err)
	}
	if _, err := cmdInsert(srv, &command{Name: "insert", DB: "tx", Body: txInsert(22), LSID: &lsid, TxnNumber: txPtr(int64(6))}); err != nil {
		t.Fatal(err)
	}
	if got := txCode(adm("commitTransaction", 5)); got != codeTransactionTooOld && got != codeNoSuchTransaction {
		t.Fatalf("commit of the transaction a newer retryable write aborted: code %d", got)
	}
	// endSessions forgets the session's transactions.
	if err := ins(10, 7, true); err != nil {
		t.Fatal(err)
	}
	srv.eng.mu.Lock()
	srv.eng.abortSessionTxnsLocked(string(lsid.Data))
	srv.eng.mu.Unlock()
	if got := txCode(adm("commitTransaction", 7)); got != codeNoSuchTransaction {
		t.Fatalf("commit after endSessions: code %d, want 251", got)
	}
}

// TestTxnConcurrentTransactionsConflictAtOnce: the second of two open transactions writing
// one document fails at once; the first commits.
func TestTxnConcurrentTransactionsConflictAtOnce(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("tx").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "owner", Value: ""}}); err != nil {
		t.Fatal(err)
	}
	start := func() (*mongo.Session, context.Context) {
		sess, err := cl.StartSession()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sess.EndSession(context.Background()) })
		if err := sess.StartTransaction(); err != nil {
			t.Fatal(err)
		}
		return sess, mongo.NewSessionContext(ctx, sess)
	}
	a, actx := start()
	b, bctx := start()
	set := func(who string) bson.D { return bson.D{{Key: "$set", Value: bson.D{{Key: "owner", Value: who}}}} }
	if _, err := coll.UpdateOne(actx, bson.D{{Key: "_id", Value: 1}}, set("a")); err != nil {
		t.Fatal(err)
	}
	_, err := coll.UpdateOne(bctx, bson.D{{Key: "_id", Value: 1}}, set("b"))
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != codeWriteConflict || !ce.HasErrorLabel("TransientTransactionError") {
		t.Fatalf("second transaction's write = %v, want WriteConflict with TransientTransactionError", err)
	}
	if err := b.AbortTransaction(ctx); err != nil {
		t.Logf("abort of the failed transaction: %v", err)
	}
	if err := a.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if v, _ := lookupD(wDocs(srv, "tx", "c")[0], "owner"); v != "a" {
		t.Fatalf("owner = %v, want a", v)
	}
	// The document is free again: a new transaction can write it.
	b2, b2ctx := start()
	if _, err := coll.UpdateOne(b2ctx, bson.D{{Key: "_id", Value: 1}}, set("b")); err != nil {
		t.Fatalf("after the first committed: %v", err)
	}
	if err := b2.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if v, _ := lookupD(wDocs(srv, "tx", "c")[0], "owner"); v != "b" {
		t.Fatalf("owner = %v, want b", v)
	}
}

// TestTxnReadModifyWriteLosesNothing: concurrent transactions each read a counter and write
// it back plus one. Snapshot reads plus write-conflict detection make every lost update a
// WriteConflict that WithTransaction retries, so the final count is exact.
func TestTxnReadModifyWriteLosesNothing(t *testing.T) {
	srv, cl1 := startServer(t, Options{})
	cl2 := connectClient(t, srv, nil)
	ctx := testCtx(t)
	if _, err := cl1.Database("tx").Collection("ctr").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: int32(0)}}); err != nil {
		t.Fatal(err)
	}
	const perClient = 6
	errs := make(chan error, 2*perClient)
	done := make(chan struct{})
	var running sync.WaitGroup
	for _, cl := range []*mongo.Client{cl1, cl2} {
		coll := cl.Database("tx").Collection("ctr")
		for i := 0; i < perClient; i++ {
			running.Add(1)
			go func() {
				defer running.Done()
				sess, err := cl.StartSession()
				if err != nil {
					errs <- err
					return
				}
				defer sess.EndSession(context.Background())
				_, err = sess.WithTransaction(ctx, func(sctx context.Context) (any, error) {
					var doc struct {
						N int32 `bson:"n"`
					}
					if err := coll.FindOne(sctx, bson.D{{Key: "_id", Value: 1}}).Decode(&doc); err != nil {
						return nil, err
					}
					return coll.UpdateOne(sctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: doc.N + 1}}}})
				})
				if err != nil {
					errs <- err
				}
			}()
		}
	}
	go func() { running.Wait(); close(done) }()
	<-done
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n, _ := lookupD(wDocs(srv, "tx", "ctr")[0], "n"); n != int32(2*perClient) {
		t.Fatalf("n = %v, want %d: a transaction lost an update", n, 2*perClient)
	}
}
