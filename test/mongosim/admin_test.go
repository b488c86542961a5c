package mongosim

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func admRun(t *testing.T, cl *mongo.Client, cmd bson.D) bson.Raw {
	t.Helper()
	out, err := cl.Database("admin").RunCommand(testCtx(t), cmd).Raw()
	if err != nil {
		t.Fatalf("%v: %v", cmd, err)
	}
	return out
}

func admHasSession(s *Server, id bson.Binary) bool {
	s.eng.mu.Lock()
	defer s.eng.mu.Unlock()
	_, ok := s.eng.sessions.m[sessionKey(id)]
	return ok
}

// admSessionID returns the lsid.id of a driver session.
func admSessionID(t *testing.T, sess *mongo.Session) bson.Binary {
	t.Helper()
	var id bson.Binary
	if err := bson.Raw(sess.ID()).Lookup("id").Unmarshal(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestAdminEndSessionsOnDisconnect checks that Client.Disconnect's endSessions makes the
// server forget the client's sessions and their retryable-write history.
func TestAdminEndSessionsOnDisconnect(t *testing.T) {
	srv, _ := startServer(t, Options{})
	ctx := testCtx(t)
	cl, err := mongo.Connect(options.Client().ApplyURI(srv.URI()).SetAppName(newAppName()))
	if err != nil {
		t.Fatal(err)
	}
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	id := admSessionID(t, sess)
	if _, err := sessRun(ctx, cl.Database("test"), sess, bson.D{{Key: sessTestWriteCmd, Value: 1}, {Key: "txnNumber", Value: int64(1)}}); err != nil {
		t.Fatal(err)
	}
	if !admHasSession(srv, id) {
		t.Fatal("the session of a retryable write is not in the table")
	}
	sess.EndSession(ctx) // back to the driver's pool; Disconnect ends pooled sessions
	if err := cl.Disconnect(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.CommandsNamed("endSessions")); n != 1 {
		t.Fatalf("endSessions commands = %d, want 1", n)
	}
	if admHasSession(srv, id) {
		t.Fatal("the session survived endSessions")
	}
}

// TestAdminEndSessionsCommand sends endSessions, killSessions, refreshSessions and
// killAllSessions directly and checks their effect on the session table.
func TestAdminEndSessionsCommand(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	var ids []bson.Binary
	var sessions []*mongo.Session
	for i := 0; i < 3; i++ { // all open at once: the driver's pool reuses ended sessions
		sess, err := cl.StartSession()
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, sess)
		ids = append(ids, admSessionID(t, sess))
		if _, err := sessRun(ctx, cl.Database("test"), sess, bson.D{{Key: sessTestWriteCmd, Value: 1}, {Key: "txnNumber", Value: int64(1)}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, sess := range sessions {
		sess.EndSession(ctx)
	}
	admRun(t, cl, bson.D{{Key: "refreshSessions", Value: bson.A{bson.D{{Key: "id", Value: ids[0]}}}}})
	admRun(t, cl, bson.D{{Key: "endSessions", Value: bson.A{bson.D{{Key: "id", Value: ids[0]}}}}})
	if admHasSession(srv, ids[0]) || !admHasSession(srv, ids[1]) {
		t.Fatal("endSessions did not end exactly the listed session")
	}
	admRun(t, cl, bson.D{{Key: "killSessions", Value: bson.A{bson.D{{Key: "id", Value: ids[1]}}}}})
	if admHasSession(srv, ids[1]) || !admHasSession(srv, ids[2]) {
		t.Fatal("killSessions did not kill exactly the listed session")
	}
	admRun(t, cl, bson.D{{Key: "killAllSessions", Value: bson.A{}}})
	if admHasSession(srv, ids[2]) {
		t.Fatal("killAllSessions left a session")
	}
	err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "endSessions", Value: bson.A{bson.D{{Key: "id", Value: "x"}}}}}).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != codeTypeMismatch {
		t.Fatalf("endSessions with a bad id: %v, want TypeMismatch", err)
	}
}

func TestAdminStartSession(t *testing.T) {
	srv, cl := startServer(t, Options{})
	out := admRun(t, cl, bson.D{{Key: "startSession", Value: 1}})
	st, data, ok := out.Lookup("id", "id").BinaryOK()
	if !ok || st != 4 || len(data) != 16 {
		t.Fatalf("startSession reply %v: id.id is not a UUID", out)
	}
	id := bson.Binary{Subtype: st, Data: data}
	if n, ok := out.Lookup("timeoutMinutes").Int32OK(); !ok || n != 30 {
		t.Fatalf("timeoutMinutes = %v, want int32 30", out.Lookup("timeoutMinutes"))
	}
	if !admHasSession(srv, id) {
		t.Fatal("startSession's session is not in the table")
	}
}

func TestAdminServerStatus(t *testing.T) {
	srv, cl := startServer(t, Options{})
	// The driver opens and closes its monitoring and RTT connections on its own schedule, so
	// the count is only pinned between the server's own counts before and after the command.
	before := srv.ConnectionCount()
	out := admRun(t, cl, bson.D{{Key: "serverStatus", Value: 1}})
	after := srv.ConnectionCount()
	if host, _ := out.Lookup("host").StringValueOK(); host != srv.Addr() {
		t.Fatalf("host = %v, want %s", out.Lookup("host"), srv.Addr())
	}
	bi := admRun(t, cl, bson.D{{Key: "buildInfo", Value: 1}})
	if v, _ := out.Lookup("version").StringValueOK(); v == "" || v != bi.Lookup("version").StringValue() {
		t.Fatalf("version %v differs from buildInfo's %v", out.Lookup("version"), bi.Lookup("version"))
	}
	if up, ok := out.Lookup("uptime").DoubleOK(); !ok || up < 0 {
		t.Fatalf("uptime = %v", out.Lookup("uptime"))
	}
	cur, ok := out.Lookup("connections", "current").Int32OK()
	lo, hi := min(before, after), max(before, after)
	if !ok || cur < 1 || int(cur) < lo || int(cur) > hi {
		t.Fatalf("connections.current = %v, server had %d then %d connections", out.Lookup("connections", "current"), before, after)
	}
}

func TestAdminMiscCommands(t *testing.T) {
	_, cl := startServer(t, Options{})
	out := admRun(t, cl, bson.D{{Key: "whatsmyuri", Value: 1}})
	if you, _ := out.Lookup("you").StringValueOK(); !strings.HasPrefix(you, "127.0.0.1:") {
		t.Fatalf("whatsmyuri = %v", out)
	}
	out = admRun(t, cl, bson.D{{Key: "connectionStatus", Value: 1}})
	if users, ok := out.Lookup("authInfo", "authenticatedUsers").ArrayOK(); !ok || len(users) != 5 {
		t.Fatalf("connectionStatus = %v, want authInfo.authenticatedUsers []", out)
	}
	out = admRun(t, cl, bson.D{{Key: "hostInfo", Value: 1}})
	if n, ok := out.Lookup("system", "numCores").Int32OK(); !ok || n < 1 {
		t.Fatalf("hostInfo = %v", out)
	}
	out = admRun(t, cl, bson.D{{Key: "listCommands", Value: 1}})
	for _, name := range []string{"find", "aggregate", "endSessions", "serverStatus", "hello", "listCommands"} {
		if _, err := out.LookupErr("commands", name); err != nil {
			t.Errorf("listCommands lacks %s", name)
		}
	}
	out = admRun(t, cl, bson.D{{Key: "getLog", Value: "*"}})
	if names, ok := out.Lookup("names").ArrayOK(); !ok || len(names) <= 5 {
		t.Fatalf("getLog * = %v", out)
	}
	out = admRun(t, cl, bson.D{{Key: "getLog", Value: "global"}})
	if lines, ok := out.Lookup("log").ArrayOK(); !ok || len(lines) != 5 {
		t.Fatalf("getLog global = %v", out)
	}
	// Anything not implemented stays CommandNotFound.
	err := cl.Database("admin").RunCommand(testCtx(t), bson.D{{Key: "replSetGetStatusX", Value: 1}}).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != codeCommandNotFound {
		t.Fatalf("unknown command: %v, want CommandNotFound (59)", err)
	}
}

func TestAdminStats(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	db := cl.Database("stats")
	docs := []any{bson.D{{Key: "_id", Value: 1}, {Key: "s", Value: "abc"}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}}}
	if _, err := db.Collection("a").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("b").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	var size int64
	for _, d := range docs {
		b, _ := bson.Marshal(d)
		size += int64(len(b))
	}
	cs, err := db.RunCommand(ctx, bson.D{{Key: "collStats", Value: "a"}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := cs.Lookup("count").AsInt64OK(); n != 3 {
		t.Fatalf("collStats count = %v, want 3", cs.Lookup("count"))
	}
	if sz, _ := cs.Lookup("size").AsInt64OK(); sz != size {
		t.Fatalf("collStats size = %v, want %d", cs.Lookup("size"), size)
	}
	if _, err := cs.LookupErr("indexSizes", "_id_"); err != nil {
		t.Fatalf("collStats indexSizes lacks _id_: %v", cs)
	}
	err = db.RunCommand(ctx, bson.D{{Key: "collStats", Value: "nothere"}}).Err()
	rdWantCode(t, "collStats of a missing collection", err, codeNamespaceNotFound)

	ds, err := db.RunCommand(ctx, bson.D{{Key: "dbStats", Value: 1}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := ds.Lookup("collections").AsInt64OK(); n != 2 {
		t.Fatalf("dbStats collections = %v, want 2", ds.Lookup("collections"))
	}
	if n, _ := ds.Lookup("objects").AsInt64OK(); n != 4 {
		t.Fatalf("dbStats objects = %v, want 4", ds.Lookup("objects"))
	}
	ds, err = cl.Database("nodb").RunCommand(ctx, bson.D{{Key: "dbStats", Value: 1}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := ds.Lookup("objects").AsInt64OK(); n != 0 {
		t.Fatalf("dbStats of a missing database: objects = %v", ds.Lookup("objects"))
	}
}

// TestAdminEndSessionsKillsCursorsAndAbortsTransactions: ending sessions kills their open
// cursors (getMore then fails with CursorNotFound) and aborts their open transactions (the
// commit then fails with NoSuchTransaction and the writes never appear). killAllSessions does
// the same for every session.
func TestAdminEndSessionsKillsCursorsAndAbortsTransactions(t *testing.T) {
	for _, kill := range []string{"endSessions", "killAllSessions"} {
		t.Run(kill, func(t *testing.T) {
			_, cl := startServer(t, Options{})
			ctx := testCtx(t)
			c := rdSeed(t, cl, "es", 10)
			curSess, err := cl.StartSession()
			if err != nil {
				t.Fatal(err)
			}
			defer curSess.EndSession(ctx)
			txnSess, err := cl.StartSession()
			if err != nil {
				t.Fatal(err)
			}
			defer txnSess.EndSession(ctx)

			var cur *mongo.Cursor
			err = mongo.WithSession(ctx, curSess, func(sc context.Context) error {
				var err error
				cur, err = c.Find(sc, bson.D{}, options.Find().SetBatchSize(2))
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			id := cur.ID()
			if err := txnSess.StartTransaction(); err != nil {
				t.Fatal(err)
			}
			err = mongo.WithSession(ctx, txnSess, func(sc context.Context) error {
				_, err := c.InsertOne(sc, bson.D{{Key: "_id", Value: 100}})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}

			cmd := bson.D{{Key: "killAllSessions", Value: bson.A{}}}
			if kill == "endSessions" {
				cmd = bson.D{{Key: "endSessions", Value: bson.A{
					bson.D{{Key: "id", Value: admSessionID(t, curSess)}}, bson.D{{Key: "id", Value: admSessionID(t, txnSess)}}}}}
			}
			admRun(t, cl, cmd)

			err = cl.Database("test").RunCommand(ctx, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "es"}}).Err()
			rdWantCode(t, "getMore of an ended session's cursor", err, codeCursorNotFound)
			_ = cur.Close(ctx)
			err = txnSess.CommitTransaction(ctx)
			rdWantCode(t, "commit of an ended session's transaction", err, codeNoSuchTransaction)
			if n, err := c.CountDocuments(ctx, bson.D{{Key: "_id", Value: 100}}); err != nil || n != 0 {
				t.Fatalf("the aborted transaction's insert is visible: %d, %v", n, err)
			}
		})
	}
}
