package mongosim

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// txnWaiting returns how many writes outside transactions are waiting for one.
func txnWaiting(srv *Server) int {
	e := srv.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.txnsLocked().waiting
}

// openTxnWriting starts a transaction on cl that sets {by: "txn"} on _id 1 of tx.c, and
// returns its session and session context.
func openTxnWriting(t *testing.T, cl *mongo.Client) (*mongo.Session, context.Context) {
	t.Helper()
	ctx := testCtx(t)
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.EndSession(context.Background()) })
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	sctx := mongo.NewSessionContext(ctx, sess)
	if _, err := cl.Database("tx").Collection("c").UpdateOne(sctx, bson.D{{Key: "_id", Value: 1}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "by", Value: "txn"}}}}); err != nil {
		t.Fatal(err)
	}
	return sess, sctx
}

// A write outside transactions to a document an open transaction wrote waits for the commit,
// then applies on top of the committed document; the commit does not fail.
func TestTxnWaitOutsideWriteWaitsForCommit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(ctx context.Context, c *mongo.Collection) error
		want  string
	}{
		{"update", func(ctx context.Context, c *mongo.Collection) error {
			_, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
			return err
		}, `{"_id": {"$numberInt":"1"},"n": {"$numberInt":"1"},"by": "txn"}`},
		{"findAndModify", func(ctx context.Context, c *mongo.Collection) error {
			return c.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "by", Value: "other"}}}}).Err()
		}, `{"_id": {"$numberInt":"1"},"n": {"$numberInt":"0"},"by": "other"}`},
		{"delete", func(ctx context.Context, c *mongo.Collection) error {
			_, err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}})
			return err
		}, ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, cl := startServer(t, Options{})
			other := connectClient(t, srv, nil)
			ctx := testCtx(t)
			if _, err := cl.Database("tx").Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}}); err != nil {
				t.Fatal(err)
			}
			sess, _ := openTxnWriting(t, cl)
			done := make(chan error, 1)
			go func() { done <- tc.write(ctx, other.Database("tx").Collection("c")) }()
			waitFor(t, 5*time.Second, "the outside write to wait for the transaction", func() bool { return txnWaiting(srv) == 1 })
			select {
			case err := <-done:
				t.Fatalf("the outside write finished while the transaction was open: %v", err)
			default:
			}
			if err := sess.CommitTransaction(ctx); err != nil {
				t.Fatalf("commit: %v (the outside write must not make it fail)", err)
			}
			if err := <-done; err != nil {
				t.Fatalf("outside write after the commit: %v", err)
			}
			docs := wDocs(srv, "tx", "c")
			got := ""
			if len(docs) == 1 {
				got = wJSON(docs[0])
			}
			if got != tc.want {
				t.Fatalf("document = %s, want %s", got, tc.want)
			}
		})
	}
}

// An abort releases the waiting write too, which then applies to the untouched document.
func TestTxnWaitOutsideWriteWaitsForAbort(t *testing.T) {
	srv, cl := startServer(t, Options{})
	other := connectClient(t, srv, nil)
	ctx := testCtx(t)
	if _, err := cl.Database("tx").Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	sess, _ := openTxnWriting(t, cl)
	done := make(chan error, 1)
	go func() {
		_, err := other.Database("tx").Collection("c").UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 5}}}})
		done <- err
	}()
	waitFor(t, 5*time.Second, "the outside write to wait", func() bool { return txnWaiting(srv) == 1 })
	if err := sess.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := wJSON(wDocs(srv, "tx", "c")[0]); got != `{"_id": {"$numberInt":"1"},"n": {"$numberInt":"5"}}` {
		t.Fatalf("document = %s", got)
	}
}

// maxTimeMS bounds the wait: the write fails with MaxTimeMSExpired (50), changes nothing, and
// the transaction still commits.
func TestTxnWaitBoundedByMaxTimeMS(t *testing.T) {
	srv, cl := startServer(t, Options{})
	other := connectClient(t, srv, nil)
	ctx := testCtx(t)
	if _, err := cl.Database("tx").Collection("c").InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 0}}, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}}}); err != nil {
		t.Fatal(err)
	}
	sess, _ := openTxnWriting(t, cl)
	start := time.Now()
	err := other.Database("tx").RunCommand(ctx, bson.D{{Key: "update", Value: "c"},
		{Key: "updates", Value: bson.A{
			bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 0}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "first", Value: true}}}}}},
			bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}}},
		}},
		{Key: "maxTimeMS", Value: 150}}).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != codeMaxTimeMSExpired || ce.Name != "MaxTimeMSExpired" {
		t.Fatalf("update = %v, want MaxTimeMSExpired (50)", err)
	}
	if el := time.Since(start); el < 150*time.Millisecond {
		t.Fatalf("failed after %s, before its maxTimeMS", el)
	}
	if err := sess.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	docs := wDocs(srv, "tx", "c")
	// The first statement ran before the wait, as on a server; the second changed nothing.
	if got := wJSON(docs[0]) + wJSON(docs[1]); got != `{"_id": {"$numberInt":"0"},"first": true}{"_id": {"$numberInt":"1"},"n": {"$numberInt":"0"},"by": "txn"}` {
		t.Fatalf("documents = %s", got)
	}
}

// A transaction left open past TransactionLifetimeLimit is aborted rather than waited for: the
// outside write proceeds and the transaction's commit fails with NoSuchTransaction.
func TestTxnWaitEndsAtTransactionLifetimeLimit(t *testing.T) {
	srv, cl := startServer(t, Options{TransactionLifetimeLimit: 300 * time.Millisecond})
	other := connectClient(t, srv, nil)
	ctx := testCtx(t)
	if _, err := cl.Database("tx").Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	sess, _ := openTxnWriting(t, cl)
	if _, err := other.Database("tx").Collection("c").UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	err := sess.CommitTransaction(ctx)
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != codeNoSuchTransaction {
		t.Fatalf("commit of the expired transaction = %v, want NoSuchTransaction", err)
	}
	if got := wJSON(wDocs(srv, "tx", "c")[0]); got != `{"_id": {"$numberInt":"1"},"n": {"$numberInt":"1"}}` {
		t.Fatalf("document = %s", got)
	}
}

// A waiting write on a connection that is killed ends with it: nothing is applied and no
// goroutine is left (goleak checks the package).
func TestTxnWaitEndsWithTheConnection(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	if _, err := cl.Database("tx").Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	sess, _ := openTxnWriting(t, cl)
	r := dialRaw(t, srv)
	r.send(opMsgBytes(t, 1, 0, bson.D{{Key: "update", Value: "c"}, {Key: "$db", Value: "tx"}}, map[string][]bson.D{
		"updates": {{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}}}}}))
	waitFor(t, 5*time.Second, "the raw write to wait", func() bool { return txnWaiting(srv) == 1 })
	_ = r.nc.Close()
	srv.KillAllConnections() // the server notices the hang-up only when it reads or writes
	waitFor(t, 5*time.Second, "the wait to end with the connection", func() bool { return txnWaiting(srv) == 0 })
	_ = sess.AbortTransaction(ctx)
	if got := wJSON(wDocs(srv, "tx", "c")[0]); got != `{"_id": {"$numberInt":"1"},"n": {"$numberInt":"0"}}` {
		t.Fatalf("document = %s", got)
	}
}
