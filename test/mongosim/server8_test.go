package mongosim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

// The tests of this file check behaviours a real 8.0 server has, through the unchanged driver,
// asserting what the driver does with each answer where it is visible to the driver.

func setFailPoint(t *testing.T, cl *mongo.Client, cmd bson.D) {
	t.Helper()
	if err := cl.Database("admin").RunCommand(context.Background(), cmd).Err(); err != nil {
		t.Fatalf("configureFailPoint: %v", err)
	}
}

// Item 1: a mode document with several keys, as the driver's own test helpers send it.
func TestServer8FailPointModeTimesAndSkip(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := context.Background()
	setFailPoint(t, cl, bson.D{{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 2}, {Key: "skip", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "errorCode", Value: 2}}}})
	var got []int32
	for range 4 {
		var code int32
		if err := ping(ctx, cl); err != nil {
			code = commandError(t, err).Code
		}
		got = append(got, code)
	}
	if want := []int32{0, 2, 2, 0}; !slices.Equal(got, want) {
		t.Fatalf("ping codes %v, want %v (skip 1, then fail twice, then off)", got, want)
	}
}

// Item 3: a transient commit error makes WithTransaction run the transaction again.
func TestServer8CommitTransientErrorRetriedByWithTransaction(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := context.Background()
	for _, code := range []int32{24, 112, 246, 267} {
		coll := cl.Database("txnlabels").Collection("c")
		setFailPoint(t, cl, bson.D{{Key: "configureFailPoint", Value: "failCommand"},
			{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
			{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"commitTransaction"}}, {Key: "errorCode", Value: code}}}})
		sess, err := cl.StartSession()
		if err != nil {
			t.Fatal(err)
		}
		runs := 0
		_, err = sess.WithTransaction(ctx, func(sc context.Context) (any, error) {
			runs++
			_, err := coll.InsertOne(sc, bson.D{{Key: "code", Value: code}, {Key: "run", Value: runs}})
			return nil, err
		})
		sess.EndSession(ctx)
		if err != nil {
			t.Fatalf("code %d: WithTransaction: %v", code, err)
		}
		if runs != 2 {
			t.Fatalf("code %d: the callback ran %d times, want 2 (TransientTransactionError retries the transaction)", code, runs)
		}
		if n, _ := coll.CountDocuments(ctx, bson.D{{Key: "code", Value: code}}); n != 1 {
			t.Fatalf("code %d: %d documents committed, want 1", code, n)
		}
	}
}

// Item 3: a write-concern error inside a transaction carries no TransientTransactionError.
func TestServer8WriteConcernErrorInTransactionNotTransient(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := context.Background()
	coll := cl.Database("txnwce").Collection("c")
	if err := cl.Database("txnwce").CreateCollection(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	setFailPoint(t, cl, bson.D{{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"insert"}},
			{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 91}, {Key: "errmsg", Value: "shutting down"}}}}}})
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	srv.ResetCommands()
	_, _ = coll.InsertOne(mongo.NewSessionContext(ctx, sess), bson.D{{Key: "x", Value: 1}})
	_ = sess.AbortTransaction(ctx)
	recs := srv.CommandsNamed("insert")
	if len(recs) != 1 {
		t.Fatalf("%d inserts recorded, want 1", len(recs))
	}
	if slices.Contains(recs[0].Labels, "TransientTransactionError") {
		t.Fatalf("labels %v: a server never labels a write-concern error TransientTransactionError", recs[0].Labels)
	}
}

// Item 4: maxTimeMS is enforced; the blocked operation is not applied.
func TestServer8MaxTimeMSExpired(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := context.Background()
	db := cl.Database("maxtime")
	setFailPoint(t, cl, bson.D{{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"insert"}},
			{Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: 2000}}}})
	start := time.Now()
	err := db.RunCommand(ctx, bson.D{{Key: "insert", Value: "c"},
		{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}, {Key: "maxTimeMS", Value: 100}}).Err()
	if ce := commandError(t, err); ce.Code != codeMaxTimeMSExpired || ce.Name != "MaxTimeMSExpired" {
		t.Fatalf("got %v, want MaxTimeMSExpired (50)", err)
	}
	if el := time.Since(start); el > 1500*time.Millisecond {
		t.Fatalf("answered after %v: the block must end at maxTimeMS, as the server's does", el)
	}
	if n, _ := db.Collection("c").CountDocuments(ctx, bson.D{}); n != 0 {
		t.Fatalf("%d documents: an operation past its maxTimeMS must not be applied", n)
	}
	// Within the limit it runs.
	if err := db.RunCommand(ctx, bson.D{{Key: "insert", Value: "c"},
		{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 2}}}}, {Key: "maxTimeMS", Value: 5000}}).Err(); err != nil {
		t.Fatalf("insert within maxTimeMS: %v", err)
	}
	if ce := commandError(t, db.RunCommand(ctx, bson.D{{Key: "find", Value: "c"}, {Key: "maxTimeMS", Value: -1}}).Err()); ce.Code != codeBadValue {
		t.Fatalf("maxTimeMS -1: code %d, want BadValue", ce.Code)
	}
}

// Item 5: a fail point filtered by appName sees the handshake of a new connection.
func TestServer8FailPointAppNameMatchesHandshake(t *testing.T) {
	srv, cl := startServer(t, Options{})
	app := newAppName()
	setFailPoint(t, cl, bson.D{{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"hello", "isMaster"}},
			{Key: "appName", Value: app}, {Key: "closeConnection", Value: true}}}})
	other := connectClient(t, srv, func(o *options.ClientOptions) { o.SetAppName(app) })
	if err := ping(testCtx(t), other); err != nil {
		t.Fatalf("ping after the failed handshake: %v", err)
	}
	var hit bool
	for _, r := range srv.Commands() {
		if r.AppName == app && isHello(r.Name) && errors.Is(r.Err, errCloseConnection) {
			hit = true
		}
	}
	if !hit {
		t.Fatal("the handshake of the appName's first connection was not failed by the fail point")
	}
}

// Item 6: a ShutdownInProgress outside a shutdown carries no topologyVersion, so the driver
// marks the server Unknown and clears its pool.
func TestServer8ShutdownErrorMarksServerUnknown(t *testing.T) {
	srv, _ := startServer(t, Options{})
	var unknown atomic.Int32
	var poolCleared atomic.Int32
	cl := connectClient(t, srv, func(o *options.ClientOptions) {
		o.SetServerMonitor(&event.ServerMonitor{ServerDescriptionChanged: func(e *event.ServerDescriptionChangedEvent) {
			if e.NewDescription.Kind == "Unknown" && e.PreviousDescription.Kind != "Unknown" {
				unknown.Add(1)
			}
		}})
		o.SetPoolMonitor(&event.PoolMonitor{Event: func(e *event.PoolEvent) {
			if e.Type == event.ConnectionPoolCleared {
				poolCleared.Add(1)
			}
		}})
	})
	ctx := context.Background()
	if err := ping(ctx, cl); err != nil {
		t.Fatal(err)
	}
	before := unknown.Load()
	setFailPoint(t, cl, bson.D{{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"find"}}, {Key: "errorCode", Value: 91}}}})
	err := cl.Database("sdam").Collection("c").FindOne(ctx, bson.D{}).Err()
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		// The driver retries a read once on a retryable error; either outcome is fine.
		t.Logf("find: %v", err)
	}
	waitFor(t, 5*time.Second, "the driver marks the server Unknown and clears the pool", func() bool {
		return unknown.Load() > before && poolCleared.Load() > 0
	})
}

// Item 7: 5.0+ field-name rules through the driver.
func TestServer8DollarFieldNames(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := context.Background()
	coll := cl.Database("names").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "$price", Value: 50}}); err != nil {
		t.Fatalf("top-level $price: %v", err)
	}
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$a", Value: 1}}}})
	var we mongo.WriteException
	if !errors.As(err, &we) || len(we.WriteErrors) != 1 || we.WriteErrors[0].Code != codeDollarPrefixedFieldName {
		t.Fatalf("_id {$a: 1}: %v, want a write error 52", err)
	}
}

// Item 8: w greater than the set's one member cannot be satisfied.
func TestServer8UnsatisfiableWriteConcern(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := context.Background()
	coll := cl.Database("wc").Collection("c", options.Collection().SetWriteConcern(&writeconcern.WriteConcern{W: 10}))
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	var we mongo.WriteException
	if !errors.As(err, &we) || we.WriteConcernError == nil || we.WriteConcernError.Code != codeUnsatisfiableWriteConcern ||
		we.WriteConcernError.Name != "UnsatisfiableWriteConcern" {
		t.Fatalf("w:10: %v, want a writeConcernError UnsatisfiableWriteConcern (100)", err)
	}
	tagged := cl.Database("wc").Collection("c", options.Collection().SetWriteConcern(&writeconcern.WriteConcern{W: "dc-east"}))
	_, err = tagged.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}})
	if !errors.As(err, &we) || we.WriteConcernError == nil || we.WriteConcernError.Code != codeUnknownReplWriteConcern {
		t.Fatalf("w: dc-east: %v, want a writeConcernError UnknownReplWriteConcern (79)", err)
	}
	// The writes themselves are applied, as on a server; majority is satisfiable.
	maj := cl.Database("wc").Collection("c", options.Collection().SetWriteConcern(writeconcern.Majority()))
	if n, err := maj.CountDocuments(ctx, bson.D{}); err != nil || n != 2 {
		t.Fatalf("count %d, %v: want the 2 writes applied", n, err)
	}
	if _, err := maj.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}}); err != nil {
		t.Fatalf("w: majority: %v", err)
	}
}

// Item 9: an invalid stage in an update pipeline fails the command.
func TestServer8UpdatePipelineInvalidStageFailsCommand(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := context.Background()
	coll := cl.Database("upipe").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	for _, stage := range []bson.D{
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}}}},
		{{Key: "$bogus", Value: bson.D{}}},
	} {
		_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, mongo.Pipeline{stage})
		var ce mongo.CommandError
		var we mongo.WriteException
		if errors.As(err, &we) || !errors.As(err, &ce) || ce.Code == 0 {
			t.Fatalf("stage %v: %T %v, want a command error (not a write error)", stage, err, err)
		}
	}
}

// Item 10: apiStrict refuses commands outside API version 1.
func TestServer8APIStrict(t *testing.T) {
	srv, _ := startServer(t, Options{})
	cl := connectClient(t, srv, func(o *options.ClientOptions) {
		o.SetServerAPIOptions(options.ServerAPI(options.ServerAPIVersion1).SetStrict(true))
	})
	ctx := context.Background()
	coll := cl.Database("api").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatalf("insert is in API v1: %v", err)
	}
	err := coll.Distinct(ctx, "x", bson.D{}).Err()
	if ce := commandError(t, err); ce.Code != codeAPIStrictError || ce.Name != "APIStrictError" || !strings.Contains(ce.Message, "distinct") {
		t.Fatalf("distinct under apiStrict: %v, want APIStrictError (323) naming distinct", err)
	}
	raw := cl.Database("api").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}, {Key: "apiVersion", Value: "2"}}).Err()
	if ce := commandError(t, raw); ce.Code != codeAPIVersionError {
		t.Fatalf("apiVersion 2: %v, want APIVersionError (322)", raw)
	}
}

// Item 12: the client-level bulkWrite command, through the driver's Client.BulkWrite: results
// per operation across namespaces, the change events of each write, and its errors.
func TestServer8ClientBulkWrite(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := context.Background()
	a, b := cl.Database("bw1").Collection("a"), cl.Database("bw2").Collection("b")
	if _, err := b.InsertOne(ctx, bson.D{{Key: "_id", Value: 10}, {Key: "v", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	cs, err := cl.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	writes := []mongo.ClientBulkWrite{
		{Database: "bw1", Collection: "a", Model: mongo.NewClientInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 1}})},
		{Database: "bw2", Collection: "b", Model: mongo.NewClientUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 10}}).
			SetUpdate(bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}})},
		{Database: "bw2", Collection: "b", Model: mongo.NewClientUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 11}}).
			SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 5}}}}).SetUpsert(true)},
		{Database: "bw2", Collection: "b", Model: mongo.NewClientReplaceOneModel().SetFilter(bson.D{{Key: "_id", Value: 10}}).
			SetReplacement(bson.D{{Key: "v", Value: 100}})},
		{Database: "bw1", Collection: "a", Model: mongo.NewClientDeleteOneModel().SetFilter(bson.D{{Key: "_id", Value: 1}})},
	}
	res, err := cl.BulkWrite(ctx, writes, options.ClientBulkWrite().SetVerboseResults(true))
	if err != nil {
		t.Fatalf("BulkWrite: %v", err)
	}
	if res.InsertedCount != 1 || res.MatchedCount != 2 || res.ModifiedCount != 2 || res.UpsertedCount != 1 || res.DeletedCount != 1 {
		t.Fatalf("totals %+v", res)
	}
	if r := res.UpdateResults[2]; r.UpsertedID != int32(11) || r.MatchedCount != 1 && r.UpsertedID == nil {
		t.Fatalf("upsert result %+v", r)
	}
	if r := res.UpdateResults[1]; r.MatchedCount != 1 || r.ModifiedCount != 1 {
		t.Fatalf("update result %+v", r)
	}
	if r := res.DeleteResults[4]; r.DeletedCount != 1 {
		t.Fatalf("delete result %+v", r)
	}
	var got bson.D
	if err := b.FindOne(ctx, bson.D{{Key: "_id", Value: 10}}).Decode(&got); err != nil || len(got) != 2 || got[1].Value != int32(100) {
		t.Fatalf("replaced document %v, %v", got, err)
	}
	var ops []string
	for range 5 {
		ev := nextEvent(t, cs)
		ops = append(ops, ev.Lookup("operationType").StringValue()+" "+ev.Lookup("ns", "db").StringValue())
	}
	if want := []string{"insert bw1", "update bw2", "insert bw2", "replace bw2", "delete bw1"}; !slices.Equal(ops, want) {
		t.Fatalf("change events %v, want %v", ops, want)
	}

	// Errors: ordered stops at the first; unordered goes on and reports each.
	dup := []mongo.ClientBulkWrite{
		{Database: "bw1", Collection: "a", Model: mongo.NewClientInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 2}})},
		{Database: "bw1", Collection: "a", Model: mongo.NewClientInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 2}})},
		{Database: "bw1", Collection: "a", Model: mongo.NewClientInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 3}})},
	}
	_, err = cl.BulkWrite(ctx, dup)
	var bwe mongo.ClientBulkWriteException
	if !errors.As(err, &bwe) || len(bwe.WriteErrors) != 1 || bwe.WriteErrors[1].Code != 11000 {
		t.Fatalf("ordered duplicate: %v", err)
	}
	if n, _ := a.CountDocuments(ctx, bson.D{}); n != 1 {
		t.Fatalf("%d documents after an ordered bulkWrite stopped at index 1, want 1", n)
	}
	dup[0].Model = mongo.NewClientInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 2}})
	_, err = cl.BulkWrite(ctx, dup, options.ClientBulkWrite().SetOrdered(false))
	if !errors.As(err, &bwe) || len(bwe.WriteErrors) != 2 {
		t.Fatalf("unordered duplicates: %v, want two write errors", err)
	}
	if n, _ := a.CountDocuments(ctx, bson.D{}); n != 2 {
		t.Fatalf("%d documents after the unordered bulkWrite, want 2", n)
	}
	// Only admin runs it.
	if ce := commandError(t, cl.Database("bw1").RunCommand(ctx, bson.D{{Key: "bulkWrite", Value: 1},
		{Key: "ops", Value: bson.A{}}, {Key: "nsInfo", Value: bson.A{}}}).Err()); ce.Code != codeUnauthorized {
		t.Fatalf("bulkWrite on bw1: code %d", ce.Code)
	}
}

// Item 13: onPrimaryTransactionalWrite closes the connection after a retryable write is
// applied; the driver retries and gets the stored reply, so the write happens once.
func TestServer8OnPrimaryTransactionalWrite(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := context.Background()
	coll := cl.Database("otw").Collection("c")
	setFailPoint(t, cl, bson.D{{Key: "configureFailPoint", Value: "onPrimaryTransactionalWrite"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}}})
	srv.ResetCommands()
	res, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}},
		options.UpdateOne().SetUpsert(true))
	if err != nil {
		t.Fatalf("retried update: %v", err)
	}
	if res.UpsertedCount != 1 {
		t.Fatalf("result %+v: the retry must return the first attempt's reply (an upsert)", res)
	}
	if n := len(srv.CommandsNamed("update")); n != 2 {
		t.Fatalf("%d update commands, want 2 (the dropped one and the retry)", n)
	}
	var doc bson.D
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&doc); err != nil || doc[1].Value != int32(1) {
		t.Fatalf("document %v, %v: the write must be applied once", doc, err)
	}
	// failBeforeCommitExceptionCode without closeConnection: the statement fails with that
	// code, as a write error, and is not applied (retrywrite_test.go covers the default).
	setFailPoint(t, cl, bson.D{{Key: "configureFailPoint", Value: "onPrimaryTransactionalWrite"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failBeforeCommitExceptionCode", Value: 2}, {Key: "closeConnection", Value: false}}}})
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}})
	var we mongo.WriteException
	if !errors.As(err, &we) || len(we.WriteErrors) != 1 || we.WriteErrors[0].Code != 2 {
		t.Fatalf("insert: %v, want a write error with code 2", err)
	}
	if n, _ := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: 2}}); n != 0 {
		t.Fatal("a write failed before commit must not be applied")
	}
}

// Item 14: $setField, $unsetField, $rand, $documents and $listLocalSessions.
func TestServer8ExpressionsAndSourceStages(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := context.Background()
	coll := cl.Database("expr").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "$price", Value: 5}, {Key: "a", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	cur, err := coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$replaceWith", Value: bson.D{{Key: "$setField", Value: bson.D{
		{Key: "field", Value: bson.D{{Key: "$literal", Value: "$price"}}},
		{Key: "input", Value: bson.D{{Key: "$unsetField", Value: bson.D{{Key: "field", Value: "a"}, {Key: "input", Value: "$$ROOT"}}}}},
		{Key: "value", Value: 7}}}}}},
		{{Key: "$addFields", Value: bson.D{{Key: "r", Value: bson.D{{Key: "$rand", Value: bson.D{}}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.M
	if err := cur.All(ctx, &docs); err != nil || len(docs) != 1 {
		t.Fatalf("aggregate: %v %v", docs, err)
	}
	d := docs[0]
	if d["$price"] != int32(7) || d["a"] != nil {
		t.Fatalf("$setField/$unsetField result %v", d)
	}
	if r, ok := d["r"].(float64); !ok || r < 0 || r >= 1 {
		t.Fatalf("$rand gave %v", d["r"])
	}

	cur, err = cl.Database("expr").Aggregate(ctx, mongo.Pipeline{
		{{Key: "$documents", Value: bson.A{bson.D{{Key: "x", Value: 1}}, bson.D{{Key: "x", Value: 2}}, bson.D{{Key: "x", Value: 3}}}}},
		{{Key: "$match", Value: bson.D{{Key: "x", Value: bson.D{{Key: "$gte", Value: 2}}}}}}})
	if err != nil {
		t.Fatalf("$documents: %v", err)
	}
	docs = nil
	if err := cur.All(ctx, &docs); err != nil || len(docs) != 2 || docs[0]["x"] != int32(2) {
		t.Fatalf("$documents result %v, %v", docs, err)
	}
	if _, err := coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$documents", Value: bson.A{}}}}); err == nil {
		t.Fatal("$documents on a collection must fail")
	}

	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	sctx := mongo.NewSessionContext(ctx, sess)
	cur, err = cl.Database("admin").Aggregate(sctx, mongo.Pipeline{{{Key: "$listLocalSessions", Value: bson.D{}}}})
	if err != nil {
		t.Fatalf("$listLocalSessions: %v", err)
	}
	var sessions []bson.Raw
	if err := cur.All(sctx, &sessions); err != nil {
		t.Fatal(err)
	}
	_, want := sess.ID().Lookup("id").Binary()
	found := false
	for _, s := range sessions {
		if _, id := s.Lookup("_id", "id").Binary(); string(id) == string(want) {
			found = s.Lookup("lastUse").Type == bson.TypeDateTime && s.Lookup("_id", "uid").Type == bson.TypeBinary
		}
	}
	if !found {
		t.Fatalf("$listLocalSessions %v does not list the running session", sessions)
	}
}

// Item 16: the search-index commands and stages get the error of a server without Atlas
// Search, not "command not found".
func TestServer8SearchIndexesNotEnabled(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := context.Background()
	coll := cl.Database("search").Collection("c")
	_, err := coll.SearchIndexes().CreateOne(ctx, mongo.SearchIndexModel{Definition: bson.D{{Key: "mappings", Value: bson.D{{Key: "dynamic", Value: true}}}}})
	// The driver's search-index helpers return its internal error types unconverted; the code
	// name is in the text of every one.
	notEnabled := func(err error) bool {
		var se mongo.ServerError
		if errors.As(err, &se) && !se.HasErrorCode(codeSearchNotEnabled) {
			return false
		}
		return err != nil && strings.Contains(err.Error(), "(SearchNotEnabled)")
	}
	if !notEnabled(err) {
		t.Fatalf("createSearchIndexes: %v, want SearchNotEnabled (31082)", err)
	}
	if err := coll.SearchIndexes().DropOne(ctx, "x"); !notEnabled(err) {
		t.Fatalf("dropSearchIndex: %v", err)
	}
	_, err = coll.SearchIndexes().List(ctx, nil)
	if !notEnabled(err) {
		t.Fatalf("$listSearchIndexes: %v", err)
	}
	_, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$search", Value: bson.D{}}}})
	if !notEnabled(err) {
		t.Fatalf("$search: %v", err)
	}
}

// The rule for what stays unsupported: one "not supported" code, a message naming the feature.
func TestServer8UnsupportedFeaturesOneCode(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := context.Background()
	db := cl.Database("unsup")
	if _, err := db.Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		run  func() error
		want string // in the message
	}{
		{"collation", func() error {
			return db.Collection("c").FindOne(ctx, bson.D{}, options.FindOne().SetCollation(&options.Collation{Locale: "fr"})).Err()
		}, "collation"},
		{"elections", func() error {
			return cl.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetStepUp", Value: 1}}).Err()
		}, "elections"},
		{"authentication", func() error {
			return cl.Database("admin").RunCommand(ctx, bson.D{{Key: "saslStart", Value: 1}}).Err()
		}, "authentication"},
		{"returnKey, planner's choice", func() error {
			if _, err := db.Collection("c").Indexes().CreateMany(ctx, []mongo.IndexModel{
				{Keys: bson.D{{Key: "a", Value: 1}}}, {Keys: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}}}); err != nil {
				return err
			}
			return db.Collection("c").FindOne(ctx, bson.D{{Key: "a", Value: 1}}, options.FindOne().SetReturnKey(true)).Err()
		}, "returnKey"},
	}
	for _, tc := range cases {
		err := tc.run()
		var se mongo.ServerError
		if !errors.As(err, &se) || !se.HasErrorCode(codeUnsupported) || !strings.Contains(err.Error(), "mongosim does not support") ||
			!strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want code %d naming %q", tc.name, err, codeUnsupported, tc.want)
		}
	}
}

// Item 14: find's returnKey returns the keys of the index the query reads, empty documents for a
// collection scan.
func TestServer8FindReturnKey(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := context.Background()
	coll := cl.Database("rk").Collection("c")
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 5}, {Key: "b", Value: "x"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 7}, {Key: "b", Value: "y"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	find := func(filter bson.D, o *options.FindOptionsBuilder) string {
		t.Helper()
		cur, err := coll.Find(ctx, filter, o.SetReturnKey(true))
		if err != nil {
			t.Fatalf("find %v: %v", filter, err)
		}
		var out []bson.Raw
		if err := cur.All(ctx, &out); err != nil {
			t.Fatal(err)
		}
		parts := make([]string, len(out))
		for i, d := range out {
			parts[i] = d.String()
		}
		return strings.Join(parts, " ")
	}
	if got := find(bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: 0}}}}, options.Find()); got != `{"a": {"$numberInt":"5"}} {"a": {"$numberInt":"7"}}` {
		t.Fatalf("index {a: 1}: %s", got)
	}
	if got := find(bson.D{{Key: "b", Value: "x"}}, options.Find()); got != `{}` {
		t.Fatalf("collection scan: %s, want one empty document", got)
	}
	if got := find(bson.D{}, options.Find().SetHint("_id_")); got != `{"_id": {"$numberInt":"1"}} {"_id": {"$numberInt":"2"}}` {
		t.Fatalf("hint _id_: %s", got)
	}
}

// Item 14: collMod prepareUnique, then the conversion to unique.
func TestServer8CollModPrepareUnique(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := context.Background()
	db := cl.Database("pu")
	coll := db.Collection("c")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "email", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "email", Value: "a@x"}}); err != nil {
			t.Fatal(err)
		}
	}
	collMod := func(index bson.D) (bson.Raw, error) {
		return db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: index}}).Raw()
	}
	if _, err := collMod(bson.D{{Key: "keyPattern", Value: bson.D{{Key: "email", Value: 1}}}, {Key: "unique", Value: true}}); commandError(t, err).Code != codeInvalidOptions {
		t.Fatalf("unique without prepareUnique: %v, want InvalidOptions", err)
	}
	raw, err := collMod(bson.D{{Key: "keyPattern", Value: bson.D{{Key: "email", Value: 1}}}, {Key: "prepareUnique", Value: true}})
	if err != nil || raw.Lookup("prepareUnique_new").Boolean() != true || raw.Lookup("prepareUnique_old").Boolean() != false {
		t.Fatalf("prepareUnique: %s, %v", raw, err)
	}
	var we mongo.WriteException
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}, {Key: "email", Value: "a@x"}}); !errors.As(err, &we) || we.WriteErrors[0].Code != 11000 {
		t.Fatalf("a new duplicate under prepareUnique: %v, want DuplicateKey", err)
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 1}}}}); err != nil {
		t.Fatalf("an update keeping an existing duplicate key: %v", err)
	}
	if _, err := collMod(bson.D{{Key: "name", Value: "email_1"}, {Key: "unique", Value: true}}); commandError(t, err).Code != 359 {
		t.Fatalf("conversion with duplicates: %v, want CannotConvertIndexToUnique (359)", err)
	}
	if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	if raw, err := collMod(bson.D{{Key: "name", Value: "email_1"}, {Key: "unique", Value: true}}); err != nil || !raw.Lookup("unique_new").Boolean() {
		t.Fatalf("conversion: %s, %v", raw, err)
	}
	specs, err := coll.Indexes().ListSpecifications(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range specs {
		if sp.Name == "email_1" && (sp.Unique == nil || !*sp.Unique) {
			t.Fatalf("email_1 after the conversion: %+v", sp)
		}
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 4}, {Key: "email", Value: "a@x"}}); !errors.As(err, &we) || we.WriteErrors[0].Code != 11000 {
		t.Fatalf("duplicate after the conversion: %v", err)
	}
}

// Item 14: create and createIndexes inside a transaction: invisible until commit, then there
// with their options and indexes (the unique index enforced), and with their events; refused on
// an existing collection.
func TestServer8CreateInTransaction(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := context.Background()
	db := cl.Database("txcreate")
	if err := db.CreateCollection(ctx, "existing"); err != nil {
		t.Fatal(err)
	}
	cs, err := db.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetShowExpandedEvents(true))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	_, err = sess.WithTransaction(ctx, func(sc context.Context) (any, error) {
		if err := db.CreateCollection(sc, "fresh", options.CreateCollection().SetChangeStreamPreAndPostImages(bson.D{{Key: "enabled", Value: true}})); err != nil {
			return nil, err
		}
		if _, err := db.Collection("fresh").Indexes().CreateOne(sc, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}, Options: options.Index().SetUnique(true)}); err != nil {
			return nil, err
		}
		if _, err := db.Collection("fresh").InsertOne(sc, bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: "a"}}); err != nil {
			return nil, err
		}
		// Not visible outside before the commit.
		names, err := db.ListCollectionNames(ctx, bson.D{{Key: "name", Value: "fresh"}})
		if err != nil || len(names) != 0 {
			return nil, fmt.Errorf("fresh visible before commit: %v %v", names, err)
		}
		return nil, nil
	})
	if err != nil {
		t.Fatalf("transaction: %v", err)
	}
	specs, err := db.Collection("fresh").Indexes().ListSpecifications(ctx)
	if err != nil || len(specs) != 2 {
		t.Fatalf("indexes after commit: %v, %v", specs, err)
	}
	var we mongo.WriteException
	if _, err := db.Collection("fresh").InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: "a"}}); !errors.As(err, &we) || we.WriteErrors[0].Code != 11000 {
		t.Fatalf("the unique index created in the transaction: %v", err)
	}
	var ops []string
	for range 3 {
		ops = append(ops, nextEvent(t, cs).Lookup("operationType").StringValue())
	}
	if want := []string{"create", "createIndexes", "insert"}; !slices.Equal(ops, want) {
		t.Fatalf("events %v, want %v", ops, want)
	}
	// Refused on an existing collection, as on a server.
	tsess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer tsess.EndSession(ctx)
	if err := tsess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	_, err = db.Collection("existing").Indexes().CreateOne(mongo.NewSessionContext(ctx, tsess), mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}})
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(codeOperationNotSupportedInTransaction) {
		t.Fatalf("createIndexes on an existing collection in a transaction: %v, want 263", err)
	}
	_ = tsess.AbortTransaction(ctx)
}
