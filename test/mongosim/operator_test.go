package mongosim

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
)

// The commands operators and mongosh use: rs.status(), rs.conf(), getCmdLineOpts, the system
// databases, local.oplog.rs, explain, currentOp, $collStats and validate.

func TestOperatorReplSetStatusAndConfig(t *testing.T) {
	srv, cl := startServer(t, Options{ReplicaSet: "rsop"})
	admin := cl.Database("admin")
	if _, err := cl.Database("op").Collection("c").InsertOne(testCtx(t), bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	st := wRun(t, admin, bson.D{{Key: "replSetGetStatus", Value: 1}})
	m := st.Lookup("members").Array().Index(0).Document()
	if st.Lookup("set").StringValue() != "rsop" || st.Lookup("myState").Int32() != 1 ||
		m.Lookup("stateStr").StringValue() != "PRIMARY" || !m.Lookup("self").Boolean() || m.Lookup("name").StringValue() != srv.Addr() {
		t.Fatalf("replSetGetStatus = %s", st)
	}
	if ts := st.Lookup("optimes", "appliedOpTime", "ts"); !ts.Equal(bson.RawValue{}) {
		tt, ti := ts.Timestamp()
		if (bson.Timestamp{T: tt, I: ti}) != srv.ClusterTime() {
			t.Fatalf("appliedOpTime %d,%d, want the cluster time %v", tt, ti, srv.ClusterTime())
		}
	}
	conf := wRun(t, admin, bson.D{{Key: "replSetGetConfig", Value: 1}}).Lookup("config").Document()
	if conf.Lookup("_id").StringValue() != "rsop" || conf.Lookup("members", "0", "host").StringValue() != srv.Addr() {
		t.Fatalf("replSetGetConfig = %s", conf)
	}
	stored, err := cl.Database("local").Collection("system.replset").FindOne(testCtx(t), bson.D{}).Raw()
	if err != nil || stored.Lookup("_id").StringValue() != "rsop" || stored.Lookup("members", "0", "host").StringValue() != srv.Addr() {
		t.Fatalf("local.system.replset = %s, %v", stored, err)
	}
	opts := wRun(t, admin, bson.D{{Key: "getCmdLineOpts", Value: 1}})
	if !strings.HasSuffix(srv.Addr(), ":"+itoa(int64(opts.Lookup("parsed", "net", "port").Int32()))) ||
		opts.Lookup("parsed", "replication", "replSet").StringValue() != "rsop" {
		t.Fatalf("getCmdLineOpts = %s", opts)
	}
	for _, name := range []string{"replSetGetStatus", "replSetGetConfig", "getCmdLineOpts", "currentOp"} {
		if ce := wRunErr(t, cl.Database("op"), bson.D{{Key: name, Value: 1}}); ce.Code != codeUnauthorized {
			t.Errorf("%s on a user database = %v, want Unauthorized", name, ce)
		}
	}
	if err := srv.StepDown(time.Hour); err != nil {
		t.Fatal(err)
	}
	// RunCommand reads from the primary unless told otherwise: there is none now.
	st, err = admin.RunCommand(testCtx(t), bson.D{{Key: "replSetGetStatus", Value: 1}},
		options.RunCmd().SetReadPreference(readpref.PrimaryPreferred())).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if st.Lookup("myState").Int32() != 2 || st.Lookup("members", "0", "stateStr").StringValue() != "SECONDARY" {
		t.Fatalf("replSetGetStatus while stepped down = %s", st)
	}
}

func TestOperatorSystemDatabasesExistFromTheStart(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	names, err := cl.ListDatabaseNames(ctx, bson.D{})
	if err != nil || strings.Join(names, ",") != "admin,config,local" {
		t.Fatalf("a fresh server's databases = %v, %v", names, err)
	}
	colls, err := cl.Database("local").ListCollectionNames(ctx, bson.D{})
	if err != nil || strings.Join(colls, ",") != "oplog.rs,startup_log,system.replset" {
		t.Fatalf("local's collections = %v, %v", colls, err)
	}
	specs, err := cl.Database("local").ListCollectionSpecifications(ctx, bson.D{{Key: "name", Value: "oplog.rs"}})
	if err != nil || len(specs) != 1 || !specs[0].Options.Lookup("capped").Boolean() {
		t.Fatalf("local.oplog.rs spec = %+v, %v", specs, err)
	}
	fcv, err := cl.Database("admin").Collection("system.version").FindOne(ctx, bson.D{{Key: "_id", Value: "featureCompatibilityVersion"}}).Raw()
	if err != nil || fcv.Lookup("version").StringValue() != "8.0" {
		t.Fatalf("admin.system.version = %s, %v", fcv, err)
	}
	// None of it is a change: a cluster-wide change stream from the start of the history sees
	// only the user's write.
	srv.eng.mu.Lock()
	floor := srv.eng.oplog.historyFloor()
	srv.eng.mu.Unlock()
	cs, err := cl.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetStartAtOperationTime(&floor))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	if _, err := cl.Database("u").Collection("c").InsertOne(ctx, bson.D{}); err != nil {
		t.Fatal(err)
	}
	if !cs.Next(ctx) || cs.Current.Lookup("ns", "db").StringValue() != "u" {
		t.Fatalf("first change event = %s, %v", cs.Current, cs.Err())
	}
}

// oplogEntries reads local.oplog.rs in natural order.
func oplogEntries(t *testing.T, cl *mongo.Client, opts *options.FindOptionsBuilder) []bson.Raw {
	t.Helper()
	ctx := testCtx(t)
	cur, err := cl.Database("local").Collection("oplog.rs").Find(ctx, bson.D{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	var out []bson.Raw
	for cur.Next(ctx) {
		out = append(out, append(bson.Raw(nil), cur.Current...))
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestOperatorOplogIsReadable(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("op").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 2}}}}); err != nil {
		t.Fatal(err)
	}
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	if _, err := sess.WithTransaction(ctx, func(sctx context.Context) (any, error) {
		if _, err := coll.InsertOne(sctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
			return nil, err
		}
		_, err := coll.DeleteOne(sctx, bson.D{{Key: "_id", Value: 1}})
		return nil, err
	}); err != nil {
		t.Fatal(err)
	}
	all := oplogEntries(t, cl, nil)
	var ops []string
	for _, e := range all {
		op := e.Lookup("op").StringValue()
		if op == "c" {
			o := e.Lookup("o").Document()
			op += ":" + o.Index(0).Key()
		}
		ops = append(ops, op)
		if _, err := e.LookupErr("wall"); err != nil {
			t.Fatalf("entry without wall: %s", e)
		}
	}
	if got := strings.Join(ops, " "); got != "n c:create i u c:applyOps" {
		t.Fatalf("oplog ops = %s", got)
	}
	if all[0].Lookup("o", "msg").StringValue() != "initiating set" || all[2].Lookup("o", "a").Int32() != 1 ||
		all[3].Lookup("o", "diff", "u", "a").Int32() != 2 || all[4].Lookup("o", "applyOps").Array().Index(1).Document().Lookup("op").StringValue() != "d" {
		t.Fatalf("oplog entries = %v", all)
	}
	// rs.printReplicationInfo's reads: the first and the last entry by $natural.
	first := oplogEntries(t, cl, options.Find().SetSort(bson.D{{Key: "$natural", Value: 1}}).SetLimit(1))
	last := oplogEntries(t, cl, options.Find().SetSort(bson.D{{Key: "$natural", Value: -1}}).SetLimit(1))
	if len(first) != 1 || len(last) != 1 || !first[0].Lookup("ts").Equal(all[0].Lookup("ts")) {
		t.Fatalf("first = %v", first)
	}
	lt, li := last[0].Lookup("ts").Timestamp()
	if (bson.Timestamp{T: lt, I: li}) != srv.ClusterTime() || last[0].Lookup("txnNumber").Int64() < 1 {
		t.Fatalf("last = %s, cluster time %v", last[0], srv.ClusterTime())
	}
	if n, err := cl.Database("local").Collection("oplog.rs").CountDocuments(ctx, bson.D{{Key: "op", Value: "i"}}); err != nil || n != 1 {
		t.Fatalf("count of inserts = %d, %v", n, err)
	}
	if _, err := cl.Database("local").Collection("oplog.rs").InsertOne(ctx, bson.D{}); err == nil {
		t.Fatal("a write to local.oplog.rs succeeded")
	}
	// After the history is truncated the first entry is the oldest retained change.
	srv.TruncateOplog(srv.ClusterTime())
	first = oplogEntries(t, cl, options.Find().SetSort(bson.D{{Key: "$natural", Value: 1}}).SetLimit(1))
	if len(first) != 1 || first[0].Lookup("o").Document().Index(0).Key() != "applyOps" {
		t.Fatalf("first after truncation = %v", first)
	}
	stats := collStats(t, cl.Database("local"), "oplog.rs")
	if !stats.Lookup("capped").Boolean() || stats.Lookup("maxSize").AsInt64() <= 0 || stats.Lookup("count").AsInt64() != 1 {
		t.Fatalf("oplog storageStats = %s", stats)
	}
}

// collStats runs $collStats with storageStats and returns the storageStats document.
func collStats(t *testing.T, db *mongo.Database, coll string) bson.Raw {
	t.Helper()
	ctx := testCtx(t)
	cur, err := db.Collection(coll).Aggregate(ctx, mongo.Pipeline{{{Key: "$collStats", Value: bson.D{
		{Key: "storageStats", Value: bson.D{}}, {Key: "count", Value: bson.D{}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(ctx)
	if !cur.Next(ctx) {
		t.Fatalf("$collStats returned nothing: %v", cur.Err())
	}
	if cur.Current.Lookup("ns").StringValue() != db.Name()+"."+coll {
		t.Fatalf("$collStats ns = %s", cur.Current)
	}
	return append(bson.Raw(nil), cur.Current.Lookup("storageStats").Document()...)
}

func TestOperatorCollStatsAndValidate(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	db := cl.Database("op")
	docs := []any{bson.D{{Key: "_id", Value: 1}, {Key: "u", Value: "a"}}, bson.D{{Key: "_id", Value: 2}, {Key: "u", Value: "b"}}}
	if _, err := db.Collection("c").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("c").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "u", Value: 1}}, Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	st := collStats(t, db, "c")
	var size int64
	for _, d := range docs {
		b, _ := bson.Marshal(d)
		size += int64(len(b))
	}
	if st.Lookup("count").AsInt64() != 2 || st.Lookup("size").AsInt64() != size || st.Lookup("nindexes").AsInt64() != 2 || st.Lookup("capped").Boolean() {
		t.Fatalf("storageStats = %s, want count 2 size %d", st, size)
	}
	cur, err := db.Collection("nope").Aggregate(ctx, mongo.Pipeline{{{Key: "$collStats", Value: bson.D{{Key: "storageStats", Value: bson.D{}}}}}})
	if err == nil {
		cur.Close(ctx)
		t.Fatal("$collStats on a missing collection succeeded")
	}

	v := wRun(t, db, bson.D{{Key: "validate", Value: "c"}})
	if !v.Lookup("valid").Boolean() || v.Lookup("nrecords").Int64() != 2 || v.Lookup("keysPerIndex", "u_1").Int64() != 2 {
		t.Fatalf("validate = %s", v)
	}
	if ce := wRunErr(t, db, bson.D{{Key: "validate", Value: "nope"}}); ce.Code != codeNamespaceNotFound {
		t.Fatalf("validate missing = %v", ce)
	}
	// A lost unique-index entry is found.
	srv.eng.mu.Lock()
	for k := range srv.eng.collLocked("op", "c").indexByName("u_1").entries {
		delete(srv.eng.collLocked("op", "c").indexByName("u_1").entries, k)
		break
	}
	srv.eng.mu.Unlock()
	v = wRun(t, db, bson.D{{Key: "validate", Value: "c"}, {Key: "full", Value: true}})
	if v.Lookup("valid").Boolean() || len(v.Lookup("errors").Array().String()) < 5 {
		t.Fatalf("validate of a damaged index = %s", v)
	}
}

func TestOperatorExplain(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	db := cl.Database("op")
	for i := 0; i < 5; i++ {
		if _, err := db.Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "a", Value: i % 2}}); err != nil {
			t.Fatal(err)
		}
	}
	find := bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: 1}}},
		{Key: "sort", Value: bson.D{{Key: "_id", Value: -1}}}, {Key: "limit", Value: 1}}
	ex := wRun(t, db, bson.D{{Key: "explain", Value: find}, {Key: "verbosity", Value: "queryPlanner"}})
	wp := ex.Lookup("queryPlanner", "winningPlan").Document()
	if wp.Lookup("stage").StringValue() != "SORT" || wp.Lookup("limitAmount").Int64() != 1 ||
		wp.Lookup("inputStage", "stage").StringValue() != "COLLSCAN" || ex.Lookup("queryPlanner", "namespace").StringValue() != "op.c" {
		t.Fatalf("find explain = %s", ex)
	}
	if _, err := ex.LookupErr("executionStats"); err == nil {
		t.Fatal("queryPlanner verbosity carries executionStats")
	}
	ex = wRun(t, db, bson.D{{Key: "explain", Value: find}, {Key: "verbosity", Value: "executionStats"}})
	if ex.Lookup("executionStats", "nReturned").Int64() != 1 || ex.Lookup("executionStats", "totalDocsExamined").Int64() != 5 {
		t.Fatalf("executionStats = %s", ex.Lookup("executionStats"))
	}
	ex = wRun(t, db, bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: 3}}}}}})
	if st := ex.Lookup("queryPlanner", "winningPlan", "stage").StringValue(); st != "EXPRESS_IXSCAN" || ex.Lookup("executionStats", "totalDocsExamined").Int64() != 1 {
		t.Fatalf("_id explain = %s", ex)
	}
	// _id beside another condition: the _id index's one key, fetched, the rest as its filter.
	ex = wRun(t, db, bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: 3}, {Key: "a", Value: 1}}}}}})
	if st := ex.Lookup("queryPlanner", "winningPlan", "stage").StringValue(); st != "FETCH" ||
		ex.Lookup("queryPlanner", "winningPlan", "inputStage", "indexName").StringValue() != "_id_" ||
		ex.Lookup("executionStats", "totalDocsExamined").Int64() > 1 {
		t.Fatalf("_id and a explain = %s", ex)
	}
	ex = wRun(t, db, bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{
		bson.D{{Key: "$match", Value: bson.D{{Key: "a", Value: 0}}}},
		bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$a"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}}}},
		{Key: "explain", Value: true}})
	stages := ex.Lookup("stages").Array()
	if stages.Index(0).Document().Lookup("$cursor", "queryPlanner", "parsedQuery", "a").Int32() != 0 ||
		stages.Index(1).Document().Index(0).Key() != "$group" {
		t.Fatalf("aggregate explain = %s", ex)
	}
	ex = wRun(t, db, bson.D{{Key: "explain", Value: bson.D{{Key: "count", Value: "c"}, {Key: "query", Value: bson.D{{Key: "a", Value: 1}}}}}})
	if ex.Lookup("queryPlanner", "winningPlan", "stage").StringValue() != "COUNT" || ex.Lookup("executionStats", "nReturned").Int64() != 2 {
		t.Fatalf("count explain = %s", ex)
	}
	ex = wRun(t, db, bson.D{{Key: "explain", Value: bson.D{{Key: "distinct", Value: "c"}, {Key: "key", Value: "a"}}}})
	if ex.Lookup("executionStats", "nReturned").Int64() != 2 {
		t.Fatalf("distinct explain = %s", ex)
	}
	for _, w := range []bson.D{
		{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}}}}}}},
		{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{}}, {Key: "remove", Value: true}},
	} {
		if ce := wRunErr(t, db, bson.D{{Key: "explain", Value: w}}); ce.Code != codeUnsupported {
			t.Errorf("explain of %s = %v, want not supported", w[0].Key, ce)
		}
	}
	if ce := wRunErr(t, db, bson.D{{Key: "explain", Value: find}, {Key: "verbosity", Value: "loud"}}); ce.Code != codeBadValue {
		t.Errorf("bad verbosity = %v", ce)
	}
	if n, _ := db.Collection("c").CountDocuments(ctx, bson.D{{Key: "b", Value: 1}}); n != 0 {
		t.Fatal("an explained write was applied")
	}
}

// A change stream's cursor is found by its comment, as the README tells operators: while its
// getMore waits (an active operation) and, with idleCursors, between getMores.
func TestOperatorCurrentOpFindsCursorsByComment(t *testing.T) {
	_, cl := startServer(t, Options{DefaultAwaitTime: 5 * time.Second})
	ctx := testCtx(t)
	coll := cl.Database("op").Collection("c")
	cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetComment("watchtree:orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for cs.Next(wctx) {
		}
	}()
	defer func() { stop(); <-done }()
	admin := cl.Database("admin")
	var found bson.Raw
	waitFor(t, 10*time.Second, "currentOp to show the stream's waiting getMore", func() bool {
		raw, err := admin.RunCommand(ctx, bson.D{{Key: "currentOp", Value: 1}, {Key: "command.comment", Value: "watchtree:orders"}}).Raw()
		if err != nil {
			t.Fatal(err)
		}
		ops, _ := raw.Lookup("inprog").Array().Values()
		if len(ops) == 1 {
			found = ops[0].Document()
		}
		return found != nil
	})
	if found.Lookup("op").StringValue() != "getmore" || found.Lookup("ns").StringValue() != "op.c" || !found.Lookup("active").Boolean() ||
		found.Lookup("cursor", "originatingCommand", "comment").StringValue() != "watchtree:orders" || !found.Lookup("cursor", "tailable").Boolean() {
		t.Fatalf("currentOp entry = %s", found)
	}
	// $currentOp, as mongosh's db.currentOp() runs it, with a $match on the comment.
	cur, err := admin.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$currentOp", Value: bson.D{{Key: "allUsers", Value: true}, {Key: "idleCursors", Value: true}}}},
		{{Key: "$match", Value: bson.D{{Key: "cursor.originatingCommand.comment", Value: "watchtree:orders"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var ops []bson.Raw
	for cur.Next(ctx) {
		ops = append(ops, append(bson.Raw(nil), cur.Current...))
	}
	if len(ops) != 1 || ops[0].Lookup("cursor", "cursorId").Int64() != found.Lookup("cursor", "cursorId").Int64() {
		t.Fatalf("$currentOp = %v", ops)
	}
	// An idle find cursor shows up only with idleCursors.
	if _, err := coll.InsertMany(ctx, []any{bson.D{}, bson.D{}, bson.D{}}); err != nil {
		t.Fatal(err)
	}
	fc, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(1).SetComment("idle-find"))
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close(ctx)
	for _, idle := range []bool{false, true} {
		cur, err := admin.Aggregate(ctx, mongo.Pipeline{
			{{Key: "$currentOp", Value: bson.D{{Key: "idleCursors", Value: idle}}}},
			{{Key: "$match", Value: bson.D{{Key: "cursor.originatingCommand.comment", Value: "idle-find"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for cur.Next(ctx) {
			n++
		}
		if want := map[bool]int{false: 0, true: 1}[idle]; n != want {
			t.Fatalf("idleCursors %v: %d entries for the idle find cursor, want %d", idle, n, want)
		}
	}
	if ce := wRunErr(t, cl.Database("op"), bson.D{{Key: "aggregate", Value: 1}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$currentOp", Value: bson.D{}}}}}, {Key: "cursor", Value: bson.D{}}}); ce.Code != codeInvalidNamespace {
		t.Fatalf("$currentOp outside admin = %v", ce)
	}
}
