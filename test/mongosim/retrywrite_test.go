package mongosim

import (
	"context"
	"errors"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// onPrimaryTransactionalWrite configures the fail point with mode and data (nil: none).
func onPrimaryTransactionalWrite(t *testing.T, cl *mongo.Client, mode any, data bson.D) {
	t.Helper()
	cmd := bson.D{{Key: "configureFailPoint", Value: "onPrimaryTransactionalWrite"}, {Key: "mode", Value: mode}}
	if data != nil {
		cmd = append(cmd, bson.E{Key: "data", Value: data})
	}
	setFailPoint(t, cl, cmd)
}

// sessWrite runs a write command in sess and returns its reply, write errors included (the
// driver reports those as a WriteException, which is not a failure here).
func sessWrite(t *testing.T, ctx context.Context, db *mongo.Database, sess *mongo.Session, cmd bson.D) bson.M {
	t.Helper()
	var out bson.M
	err := mongo.WithSession(ctx, sess, func(sc context.Context) error {
		raw, err := db.RunCommand(sc, cmd).Raw()
		var we mongo.WriteException
		if err != nil && !errors.As(err, &we) {
			return err
		}
		return bson.Unmarshal(raw, &out)
	})
	if err != nil {
		t.Fatalf("%v: %v", cmd[0].Key, err)
	}
	return out
}

// field returns the value of key in a decoded subdocument (nil when absent).
func field(doc any, key string) any {
	d, _ := doc.(bson.D)
	v, _ := lookupD(d, key)
	return v
}

var failBeforeCommit = bson.D{{Key: "failBeforeCommitExceptionCode", Value: 1}}

// retryDocN returns field n of document _id 1 of coll (-1 when there is no such document).
func retryDocN(t *testing.T, coll *mongo.Collection) int32 {
	t.Helper()
	var d struct {
		N int32 `bson:"n"`
	}
	if err := coll.FindOne(context.Background(), bson.D{{Key: "_id", Value: 1}}).Decode(&d); err != nil {
		if err == mongo.ErrNoDocuments {
			return -1
		}
		t.Fatal(err)
	}
	return d.N
}

// With failBeforeCommitExceptionCode (and closeConnection, its default) the first attempt is
// not committed and the connection is closed: the driver sees a network error, retries, and
// the retry applies the write once. Failing twice leaves nothing applied and the driver gives
// up with the network error. Each single-document write the driver retries is checked.
func TestRetryableWriteFailBeforeCommit(t *testing.T) {
	inc := bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}
	id1 := bson.D{{Key: "_id", Value: 1}}
	cases := []struct {
		name   string
		seed   bool  // document _id 1 with n 1 exists before
		want   int32 // n of document _id 1 after the write applied once (-1: absent)
		opName string
		run    func(ctx context.Context, c *mongo.Collection) error
	}{
		{"insertOne", false, 0, "insert", func(ctx context.Context, c *mongo.Collection) error {
			_, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}})
			return err
		}},
		{"updateOne", true, 2, "update", func(ctx context.Context, c *mongo.Collection) error {
			_, err := c.UpdateOne(ctx, id1, inc)
			return err
		}},
		{"upsert", false, 1, "update", func(ctx context.Context, c *mongo.Collection) error {
			res, err := c.UpdateOne(ctx, id1, inc, options.UpdateOne().SetUpsert(true))
			if err == nil && res.UpsertedCount != 1 {
				t.Errorf("upsert result %+v, want one upsert", res)
			}
			return err
		}},
		{"replaceOne", true, 5, "update", func(ctx context.Context, c *mongo.Collection) error {
			_, err := c.ReplaceOne(ctx, id1, bson.D{{Key: "n", Value: 5}})
			return err
		}},
		{"deleteOne", true, -1, "delete", func(ctx context.Context, c *mongo.Collection) error {
			res, err := c.DeleteOne(ctx, id1)
			if err == nil && res.DeletedCount != 1 {
				t.Errorf("deleteOne result %+v, want 1 deleted", res)
			}
			return err
		}},
		{"findOneAndUpdate", true, 2, "findAndModify", func(ctx context.Context, c *mongo.Collection) error {
			var d bson.M
			err := c.FindOneAndUpdate(ctx, id1, inc, options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&d)
			if err == nil && d["n"] != int32(2) {
				t.Errorf("findOneAndUpdate returned %v, want n 2", d)
			}
			return err
		}},
		{"findOneAndReplace", true, 7, "findAndModify", func(ctx context.Context, c *mongo.Collection) error {
			return c.FindOneAndReplace(ctx, id1, bson.D{{Key: "n", Value: 7}}).Err()
		}},
		{"findOneAndDelete", true, -1, "findAndModify", func(ctx context.Context, c *mongo.Collection) error {
			return c.FindOneAndDelete(ctx, id1).Err()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := startServer(t, Options{})
			var rec cmdRecorder
			cl := connectClient(t, srv, func(o *options.ClientOptions) { o.SetMonitor(rec.Monitor()) })
			ctx := context.Background() // no deadline: the driver retries once
			coll := cl.Database("fbc").Collection("c")
			before := int32(-1)
			if tc.seed {
				if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 1}}); err != nil {
					t.Fatal(err)
				}
				before = 1
			}
			onPrimaryTransactionalWrite(t, cl, bson.D{{Key: "times", Value: 1}}, failBeforeCommit)
			if err := tc.run(ctx, coll); err != nil {
				t.Fatalf("write after one failure before commit: %v", err)
			}
			evs := rec.Named(tc.opName)
			if len(evs) != 2 || !evs[0].Network || !evs[1].OK {
				t.Fatalf("%s events %+v, want a network error and a successful retry", tc.opName, evs)
			}
			if got := retryDocN(t, coll); got != tc.want {
				t.Fatalf("n %d after the retried write, want %d (applied once)", got, tc.want)
			}

			// Twice: the retry fails too, nothing is applied.
			if err := coll.Drop(ctx); err != nil {
				t.Fatal(err)
			}
			if tc.seed {
				if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 1}}); err != nil {
					t.Fatal(err)
				}
			}
			onPrimaryTransactionalWrite(t, cl, bson.D{{Key: "times", Value: 2}}, failBeforeCommit)
			err := tc.run(ctx, coll)
			var le mongo.LabeledError
			if !mongo.IsNetworkError(err) || !errors.As(err, &le) || !le.HasErrorLabel("RetryableWriteError") {
				t.Fatalf("write failed twice before commit: %v, want the network error labelled RetryableWriteError", err)
			}
			if got := retryDocN(t, coll); got != before {
				t.Fatalf("n %d after two failures before commit, want %d (nothing applied)", got, before)
			}
		})
	}
}

// A bulkWrite whose first batch is a deleteMany or updateMany: the driver sends that batch
// without txnNumber (a multi-document write is not retryable), so the fail point does not
// see it; the single-document write after it fails before commit once and is retried.
func TestRetryableWriteAfterMultiInBulk(t *testing.T) {
	for _, multi := range []mongo.WriteModel{
		mongo.NewDeleteManyModel().SetFilter(bson.D{{Key: "x", Value: 11}}),
		mongo.NewUpdateManyModel().SetFilter(bson.D{{Key: "x", Value: 11}}).SetUpdate(bson.D{{Key: "$inc", Value: bson.D{{Key: "x", Value: 1}}}}),
	} {
		srv, cl := startServer(t, Options{})
		ctx := context.Background()
		coll := cl.Database("fbc").Collection("bulk")
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 11}}); err != nil {
			t.Fatal(err)
		}
		onPrimaryTransactionalWrite(t, cl, bson.D{{Key: "times", Value: 1}}, failBeforeCommit)
		srv.ResetCommands()
		res, err := coll.BulkWrite(ctx, []mongo.WriteModel{multi,
			mongo.NewInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 2}, {Key: "x", Value: 22}})})
		if err != nil {
			t.Fatalf("bulkWrite: %v", err)
		}
		if res.InsertedCount != 1 || res.DeletedCount+res.ModifiedCount != 1 {
			t.Fatalf("result %+v, want the multi write once and one insert", res)
		}
		if n := len(srv.CommandsNamed("insert")); n != 2 {
			t.Fatalf("%d insert commands, want 2 (the failed one and its retry)", n)
		}
		if n := countDocs(t, cl, "fbc", "bulk"); n != 1+res.ModifiedCount {
			t.Fatalf("%d documents", n)
		}
	}
}

// A multi-document statement sent as a retryable write fails with InvalidOptions as a write
// error of its own; the other statements of the batch run.
func TestRetryableWriteRefusesMulti(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	db := cl.Database("fbc")
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	// (txnNumbers well above the driver's own: the pool may hand out an lsid it used.)
	out := sessWrite(t, ctx, db, sess, bson.D{{Key: "update", Value: "m"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}}, {Key: "upsert", Value: true}},
		bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}}}, {Key: "multi", Value: true}},
	}}, {Key: "ordered", Value: false}, {Key: "txnNumber", Value: int64(100)}})
	we, _ := out["writeErrors"].(bson.A)
	if out["n"] != int32(1) || len(we) != 1 {
		t.Fatalf("reply %v, want the upsert and one write error", out)
	}
	if field(we[0], "index") != int32(1) || field(we[0], "code") != int32(codeInvalidOptions) {
		t.Fatalf("write error %v, want index 1 code 72", we[0])
	}
	out = sessWrite(t, ctx, db, sess, bson.D{{Key: "delete", Value: "m"}, {Key: "deletes", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: 0}}}}, {Key: "txnNumber", Value: int64(101)}})
	if we, _ := out["writeErrors"].(bson.A); len(we) != 1 || field(we[0], "code") != int32(codeInvalidOptions) || out["n"] != int32(0) {
		t.Fatalf("delete limit 0 as a retryable write: %v, want InvalidOptions and nothing deleted", out)
	}
}

// The fail point counts statements that write, not commands: with {skip: 1} the second
// statement of one update command fails. closeConnection false turns the failure into that
// statement's write error; the first statement is committed and recorded, so running the
// same write again (same txnNumber) executes only the second.
func TestRetryableWriteFailBeforeCommitPerStatement(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	db := cl.Database("fbc")
	coll := db.Collection("stmts")
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 0}, {Key: "y", Value: 0}}, bson.D{{Key: "_id", Value: 1}, {Key: "y", Value: 0}}}); err != nil {
		t.Fatal(err)
	}
	onPrimaryTransactionalWrite(t, cl, bson.D{{Key: "skip", Value: 1}},
		bson.D{{Key: "closeConnection", Value: false}, {Key: "failBeforeCommitExceptionCode", Value: int32(codeInternalError)}})
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	cmd := bson.D{{Key: "update", Value: "stmts"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 0}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "y", Value: 1}}}}}},
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "y", Value: 1}}}}}},
	}}, {Key: "txnNumber", Value: int64(100)}}
	out := sessWrite(t, ctx, db, sess, cmd)
	we, _ := out["writeErrors"].(bson.A)
	if out["nModified"] != int32(1) || len(we) != 1 || field(we[0], "index") != int32(1) || field(we[0], "code") != int32(codeInternalError) {
		t.Fatalf("reply %v, want nModified 1 and InternalError at index 1", out)
	}
	onPrimaryTransactionalWrite(t, cl, "off", nil)
	out = sessWrite(t, ctx, db, sess, cmd)
	if out["nModified"] != int32(2) || out["writeErrors"] != nil {
		t.Fatalf("second run %v, want nModified 2 (statement 0 from the history, 1 executed)", out)
	}
	var docs []bson.M
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(ctx, &docs); err != nil || len(docs) != 2 || docs[0]["y"] != int32(1) || docs[1]["y"] != int32(1) {
		t.Fatalf("documents %v, %v: each statement must be applied once", docs, err)
	}
}

// Failing the second statement of an insertMany before commit (closing the connection): the
// first document is committed, the driver retries, and the retry inserts only the others.
func TestRetryableWriteFailBeforeCommitMidBatch(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := context.Background()
	coll := cl.Database("fbc").Collection("mid")
	onPrimaryTransactionalWrite(t, cl, bson.D{{Key: "skip", Value: 1}, {Key: "times", Value: 1}}, failBeforeCommit)
	srv.ResetCommands()
	res, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}}})
	if err != nil {
		t.Fatalf("insertMany: %v (the retry must skip the committed first document)", err)
	}
	if len(res.InsertedIDs) != 3 || countDocs(t, cl, "fbc", "mid") != 3 {
		t.Fatalf("result %+v", res)
	}
	if n := len(srv.CommandsNamed("insert")); n != 2 {
		t.Fatalf("%d insert commands, want 2", n)
	}
	// The client bulkWrite command records its operations the same way.
	onPrimaryTransactionalWrite(t, cl, bson.D{{Key: "skip", Value: 1}, {Key: "times", Value: 1}}, failBeforeCommit)
	inc := bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}
	cres, err := cl.BulkWrite(ctx, []mongo.ClientBulkWrite{
		{Database: "fbc", Collection: "mid", Model: mongo.NewClientUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 1}}).SetUpdate(inc)},
		{Database: "fbc", Collection: "mid", Model: mongo.NewClientUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 1}}).SetUpdate(inc)},
	})
	if err != nil {
		t.Fatalf("client bulkWrite: %v", err)
	}
	if cres.ModifiedCount != 2 || retryDocN(t, coll) != 2 {
		t.Fatalf("result %+v, n %d: want each update applied once", cres, retryDocN(t, coll))
	}
}

// closeConnection alone (the fail point's default) commits each statement and closes the
// connection; the retry is answered from the recorded write and does not fire the fail point
// again, so a bulk write of several commands succeeds however many activations are left,
// and a statement that writes nothing does not consume one.
func TestRetryableWriteCloseConnectionInBulk(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := context.Background()
	coll := cl.Database("fbc").Collection("close")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	inc := bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}
	models := func() []mongo.WriteModel {
		return []mongo.WriteModel{
			mongo.NewInsertOneModel().SetDocument(bson.D{}),
			mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 1}}).SetUpdate(inc),
			mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 1}}).SetUpdate(inc),
			mongo.NewDeleteOneModel().SetFilter(bson.D{{Key: "_id", Value: "none"}}),
		}
	}
	for i, mode := range []bson.D{{{Key: "times", Value: 2}}, {{Key: "skip", Value: 2}, {Key: "times", Value: 1}}, {{Key: "times", Value: 10}}} {
		onPrimaryTransactionalWrite(t, cl, mode, nil)
		srv.ResetCommands()
		res, err := coll.BulkWrite(ctx, models())
		if err != nil {
			t.Fatalf("mode %v: %v", mode, err)
		}
		if res.InsertedCount != 1 || res.ModifiedCount != 2 {
			t.Fatalf("mode %v: result %+v", mode, res)
		}
		if got := retryDocN(t, coll); got != int32(2*(i+1)) {
			t.Fatalf("mode %v: n %d, want %d (each update once)", mode, got, 2*(i+1))
		}
		if n := len(srv.CommandsNamed("delete")); n != 1 {
			t.Fatalf("mode %v: %d delete commands: a delete matching nothing must not fire the fail point", mode, n)
		}
		onPrimaryTransactionalWrite(t, cl, "off", nil)
	}
}

// Without closeConnection, findAndModify fails with the fail point's code as a command error,
// labelled RetryableWriteError when the code is retriable, so the driver retries it; the
// failed attempt changed nothing.
func TestRetryableWriteFailBeforeCommitRetriableCode(t *testing.T) {
	srv, _ := startServer(t, Options{})
	var rec cmdRecorder
	cl := connectClient(t, srv, func(o *options.ClientOptions) { o.SetMonitor(rec.Monitor()) })
	ctx := context.Background()
	coll := cl.Database("fbc").Collection("code")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	onPrimaryTransactionalWrite(t, cl, bson.D{{Key: "times", Value: 1}},
		bson.D{{Key: "closeConnection", Value: false}, {Key: "failBeforeCommitExceptionCode", Value: 262}})
	var d bson.M
	if err := coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}},
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&d); err != nil || d["n"] != int32(2) {
		t.Fatalf("findOneAndUpdate: %v, %v, want n 2 after one retry", d, err)
	}
	evs := rec.Named("findAndModify")
	if len(evs) != 2 || evs[0].Code != 262 || !slices.Contains(evs[0].Labels, "RetryableWriteError") || !evs[1].OK {
		t.Fatalf("findAndModify events %+v, want ExceededTimeLimit labelled RetryableWriteError, then success", evs)
	}
}
