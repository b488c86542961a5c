package mongosim

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

// --- helpers -------------------------------------------------------------------------------

// failCommand configures the failCommand fail point over the wire (on admin, as spec tests
// do) and turns it off at cleanup. It returns the count of the reply.
func failCommand(t *testing.T, cl *mongo.Client, mode any, data bson.D) int32 {
	t.Helper()
	res, err := configureFP(t, cl, "failCommand", mode, data)
	if err != nil {
		t.Fatalf("configureFailPoint: %v", err)
	}
	t.Cleanup(func() {
		_, _ = configureFP(t, cl, "failCommand", "off", nil)
	})
	return res
}

// configureFP runs configureFailPoint on admin and returns the count field of the reply,
// which must be an int32.
func configureFP(t *testing.T, cl *mongo.Client, name string, mode any, data bson.D) (int32, error) {
	t.Helper()
	cmd := bson.D{{Key: "configureFailPoint", Value: name}, {Key: "mode", Value: mode}}
	if data != nil {
		cmd = append(cmd, bson.E{Key: "data", Value: data})
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	raw, err := cl.Database("admin").RunCommand(ctx, cmd).Raw()
	if err != nil {
		return 0, err
	}
	v := raw.Lookup("count")
	if v.Type != bson.TypeInt32 {
		t.Fatalf("configureFailPoint reply count has BSON type %s, want int32: %s", v.Type, raw)
	}
	return v.Int32(), nil
}

// ping runs ping on admin.
func ping(ctx context.Context, cl *mongo.Client) error {
	return cl.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err()
}

// commandError unwraps a driver error into its server error, failing the test if it is not one.
func commandError(t *testing.T, err error) mongo.CommandError {
	t.Helper()
	var ce mongo.CommandError
	if !errors.As(err, &ce) {
		t.Fatalf("want a mongo.CommandError, got %T: %v", err, err)
	}
	return ce
}

// countDocs returns the number of documents in db.coll.
func countDocs(t *testing.T, cl *mongo.Client, db, coll string) int64 {
	t.Helper()
	n, err := cl.Database(db).Collection(coll).CountDocuments(testCtx(t), bson.D{})
	if err != nil {
		t.Fatalf("CountDocuments %s.%s: %v", db, coll, err)
	}
	return n
}

// --- failCommand data fields ---------------------------------------------------------------

func TestFaultErrorCodeAndCodeName(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	failCommand(t, cl, bson.D{{Key: "times", Value: 1}}, bson.D{
		{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "errorCode", Value: 112}})
	err := ping(ctx, cl)
	ce := commandError(t, err)
	if ce.Code != 112 || ce.Name != "WriteConflict" {
		t.Fatalf("got code %d codeName %q, want 112 WriteConflict", ce.Code, ce.Name)
	}
	if ce.Message != "Failing command via 'failCommand' failpoint" {
		t.Errorf("errmsg = %q", ce.Message)
	}
	if len(ce.Labels) != 0 {
		t.Errorf("a ping outside a transaction gets no labels, got %v", ce.Labels)
	}
	if ty := ce.Raw.Lookup("code").Type; ty != bson.TypeInt32 {
		t.Errorf("code has BSON type %s, want int32", ty)
	}
	for _, f := range []string{"$clusterTime", "operationTime"} {
		if _, err := ce.Raw.LookupErr(f); err != nil {
			t.Errorf("a failed command must still carry %s: %s", f, ce.Raw)
		}
	}
	if err := ping(ctx, cl); err != nil {
		t.Fatalf("times:1 fires once; the second ping failed: %v", err)
	}
}

func TestFaultErrorCodeRetryableWriteLabelAndRetry(t *testing.T) {
	srv, _ := startServer(t, Options{})
	rec := &cmdRecorder{}
	cl := connectClient(t, srv, func(o *options.ClientOptions) { o.SetMonitor(rec.Monitor()) })
	ctx := testCtx(t)
	failCommand(t, cl, bson.D{{Key: "times", Value: 1}}, bson.D{
		{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "errorCode", Value: 91}})
	if _, err := cl.Database("fault").Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("an insert failing once with 91 + RetryableWriteError must be retried and succeed: %v", err)
	}
	ev := rec.Named("insert")
	if len(ev) != 2 || ev[0].OK || !ev[1].OK {
		t.Fatalf("want a failed insert then a successful retry, got %+v", ev)
	}
	if ev[0].Code != 91 || !slices.Equal(ev[0].Labels, []string{"RetryableWriteError"}) {
		t.Errorf("first insert: code %d labels %v, want 91 [RetryableWriteError]", ev[0].Code, ev[0].Labels)
	}
	rs := srv.CommandsNamed("insert")
	if len(rs) != 2 || rs[0].Code != 91 || !slices.Equal(rs[0].Labels, []string{"RetryableWriteError"}) || rs[1].Err != nil {
		t.Errorf("server log: want 91 [RetryableWriteError] then success, got %d records", len(rs))
	}
	if n := countDocs(t, cl, "fault", "c"); n != 1 {
		t.Errorf("%d documents, want 1", n)
	}
}

func TestFaultErrorCodeRetriedExactlyOnce(t *testing.T) {
	srv, cl := startServer(t, Options{})
	failCommand(t, cl, bson.D{{Key: "times", Value: 2}}, bson.D{
		{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "errorCode", Value: 91}})
	// No deadline: with one, driver v2.10.0 retries without limit until it (CSOT, see
	// x/mongo/driver/operation.go "Timeout context"); without one it retries exactly once.
	_, err := cl.Database("fault").Collection("c").InsertOne(context.Background(), bson.D{{Key: "_id", Value: 1}})
	var we mongo.WriteException
	ce := mongo.CommandError{}
	switch {
	case errors.As(err, &ce):
	case errors.As(err, &we):
		t.Fatalf("want a command error, got a write exception: %v", we)
	default:
		t.Fatalf("two failures must surface the second: got %v", err)
	}
	if ce.Code != 91 || !ce.HasErrorLabel("RetryableWriteError") {
		t.Errorf("got code %d labels %v", ce.Code, ce.Labels)
	}
	if n := len(srv.CommandsNamed("insert")); n != 2 {
		t.Errorf("server saw %d inserts, want exactly 2 (one retry)", n)
	}
}

func TestFaultErrorLabelsReplaceComputed(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("fault").Collection("c")

	// An empty array suppresses the RetryableWriteError label: the driver must not retry.
	failCommand(t, cl, bson.D{{Key: "times", Value: 1}}, bson.D{
		{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "errorCode", Value: 91},
		{Key: "errorLabels", Value: bson.A{}}})
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	ce := commandError(t, err)
	if ce.Code != 91 || len(ce.Labels) != 0 {
		t.Fatalf("errorLabels [] must suppress labels: code %d labels %v", ce.Code, ce.Labels)
	}
	if n := len(srv.CommandsNamed("insert")); n != 1 {
		t.Errorf("without the label the insert is not retried; server saw %d", n)
	}

	// A given list replaces the computed one (and a non-retryable code becomes retryable).
	srv.ResetCommands()
	failCommand(t, cl, bson.D{{Key: "times", Value: 1}}, bson.D{
		{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "errorCode", Value: 112},
		{Key: "errorLabels", Value: bson.A{"RetryableWriteError", "Custom"}}})
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatalf("labelled RetryableWriteError, the insert must be retried: %v", err)
	}
	if n := len(srv.CommandsNamed("insert")); n != 2 {
		t.Errorf("server saw %d inserts, want 2", n)
	}

	// Labels are returned verbatim on a command that is not a write at all.
	failCommand(t, cl, bson.D{{Key: "times", Value: 1}}, bson.D{
		{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "errorCode", Value: 2},
		{Key: "errorLabels", Value: bson.A{"A", "B"}}})
	ce = commandError(t, ping(ctx, cl))
	if !slices.Equal(ce.Labels, []string{"A", "B"}) {
		t.Errorf("labels %v, want [A B]", ce.Labels)
	}
}

func TestFaultCloseConnection(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	failCommand(t, cl, bson.D{{Key: "times", Value: 1}}, bson.D{
		{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "closeConnection", Value: true}})
	err := ping(ctx, cl)
	if !mongo.IsNetworkError(err) {
		t.Fatalf("closeConnection: want a network error, got %v", err)
	}
	rs := srv.CommandsNamed("ping")
	if len(rs) != 1 || !errors.Is(rs[0].Err, errCloseConnection) {
		t.Errorf("the log must record the dropped ping: %+v", rs)
	}
	if err := ping(ctx, cl); err != nil {
		t.Fatalf("the client must reconnect after a closed connection: %v", err)
	}
}

func TestFaultCloseConnectionRetryableInsertRetriedOnce(t *testing.T) {
	srv, _ := startServer(t, Options{})
	rec := &cmdRecorder{}
	cl := connectClient(t, srv, func(o *options.ClientOptions) { o.SetMonitor(rec.Monitor()) })
	ctx := testCtx(t)
	failCommand(t, cl, bson.D{{Key: "times", Value: 1}}, bson.D{
		{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "closeConnection", Value: true}})
	if _, err := cl.Database("fault").Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatalf("a retryable insert must survive one closed connection: %v", err)
	}
	ev := rec.Named("insert")
	if len(ev) != 2 || !ev[0].Network || !ev[1].OK {
		t.Fatalf("want a network failure then a success, got %+v", ev)
	}
	rs := srv.CommandsNamed("insert")
	if len(rs) != 2 || !errors.Is(rs[0].Err, errCloseConnection) || rs[1].Err != nil {
		t.Fatalf("server log: want dropped insert then success, got %d records", len(rs))
	}
	if rs[0].ConnID == rs[1].ConnID {
		t.Errorf("the retry must use a new connection")
	}
	if n := countDocs(t, cl, "fault", "c"); n != 1 {
		t.Errorf("%d documents, want 1 (the dropped attempt did not execute)", n)
	}

	// Two closes in a row: retried exactly once, then the network error surfaces. (No
	// deadline on the context: with one the driver retries until the deadline.)
	srv.ResetCommands()
	failCommand(t, cl, bson.D{{Key: "times", Value: 2}}, bson.D{
		{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "closeConnection", Value: true}})
	_, err := cl.Database("fault").Collection("c").InsertOne(context.Background(), bson.D{{Key: "x", Value: 2}})
	if !mongo.IsNetworkError(err) {
		t.Fatalf("want a network error after the one retry, got %v", err)
	}
	if n := len(srv.CommandsNamed("insert")); n != 2 {
		t.Errorf("server saw %d inserts, want 2", n)
	}
}

func TestFaultBlockConnection(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	const block = 150 * time.Millisecond
	failCommand(t, cl, bson.D{{Key: "times", Value: 1}}, bson.D{
		{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "blockConnection", Value: true},
		{Key: "blockTimeMS", Value: int32(block / time.Millisecond)}})
	start := time.Now()
	if err := ping(ctx, cl); err != nil {
		t.Fatalf("blockConnection alone delays but succeeds: %v", err)
	}
	if d := time.Since(start); d < block {
		t.Fatalf("ping took %s, want >= %s", d, block)
	}

	// block + errorCode: the delay first, then the error.
	failCommand(t, cl, bson.D{{Key: "times", Value: 1}}, bson.D{
		{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "blockConnection", Value: true},
		{Key: "blockTimeMS", Value: int64(block / time.Millisecond)}, {Key: "errorCode", Value: 2}})
	start = time.Now()
	ce := commandError(t, ping(ctx, cl))
	if d := time.Since(start); d < block || ce.Code != 2 {
		t.Fatalf("took %s with code %d, want >= %s and code 2", d, ce.Code, block)
	}

	// A client-side timeout shorter than the block ends the wait.
	failCommand(t, cl, bson.D{{Key: "times", Value: 1}}, bson.D{
		{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "blockConnection", Value: true},
		{Key: "blockTimeMS", Value: 5000}})
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	if err := ping(short, cl); err == nil {
		t.Fatal("a ping blocked 5s must time out after 100ms")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the timeout took %s", d)
	}
	if err := ping(ctx, cl); err != nil {
		t.Fatalf("after the timeout the client works: %v", err)
	}
}

func TestFaultAppNameOnlyThatClient(t *testing.T) {
	srv, other := startServer(t, Options{})
	ctx := testCtx(t)
	app := newAppName()
	target := connectClient(t, srv, func(o *options.ClientOptions) { o.SetAppName(app) })
	failCommand(t, other, "alwaysOn", bson.D{
		{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "errorCode", Value: 2},
		{Key: "appName", Value: app}})
	for i := 0; i < 3; i++ {
		if err := ping(ctx, other); err != nil {
			t.Fatalf("the other client must not fail: %v", err)
		}
		if ce := commandError(t, ping(ctx, target)); ce.Code != 2 {
			t.Fatalf("client %s: code %d, want 2", app, ce.Code)
		}
	}
	var apps []string
	for _, r := range srv.CommandsNamed("ping") {
		apps = append(apps, r.AppName)
		if (r.AppName == app) != (r.Err != nil) {
			t.Errorf("ping from %q: err %v", r.AppName, r.Err)
		}
	}
	if len(apps) != 6 {
		t.Errorf("logged pings from %v, want 6", apps)
	}
}

func TestFaultNamespace(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	failCommand(t, cl, "alwaysOn", bson.D{
		{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "errorCode", Value: 2},
		{Key: "namespace", Value: "fault.bad"}})
	db := cl.Database("fault")
	if _, err := db.Collection("good").InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatalf("another collection must not fail: %v", err)
	}
	if _, err := cl.Database("other").Collection("bad").InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatalf("the same collection name in another database must not fail: %v", err)
	}
	_, err := db.Collection("bad").InsertOne(ctx, bson.D{{Key: "x", Value: 1}})
	if ce := commandError(t, err); ce.Code != 2 {
		t.Fatalf("code %d, want 2", ce.Code)
	}
}

func TestFaultWriteConcernError(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	failCommand(t, cl, bson.D{{Key: "times", Value: 1}}, bson.D{
		{Key: "failCommands", Value: bson.A{"insert"}},
		{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 100},
			{Key: "codeName", Value: "UnsatisfiableWriteConcern"}, {Key: "errmsg", Value: "Not enough data-bearing nodes"}}}})
	_, err := cl.Database("fault").Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	var we mongo.WriteException
	if !errors.As(err, &we) || we.WriteConcernError == nil {
		t.Fatalf("want a WriteException with a writeConcernError, got %T %v", err, err)
	}
	if we.WriteConcernError.Code != 100 || we.WriteConcernError.Name != "UnsatisfiableWriteConcern" {
		t.Errorf("writeConcernError = %+v", we.WriteConcernError)
	}
	if n := countDocs(t, cl, "fault", "c"); n != 1 {
		t.Errorf("the command executes despite the writeConcernError: %d documents, want 1", n)
	}
	if n := len(srv.CommandsNamed("insert")); n != 1 {
		t.Errorf("a non-retryable writeConcernError is not retried; server saw %d inserts", n)
	}
}

func TestFaultWriteConcernErrorRetryableAnsweredFromSession(t *testing.T) {
	srv, _ := startServer(t, Options{})
	// 91 in a writeConcernError (which carries no topologyVersion) marks the server Unknown;
	// the driver finds it again at the next heartbeat, so keep heartbeats short.
	cl := connectClient(t, srv, func(o *options.ClientOptions) { o.SetHeartbeatInterval(500 * time.Millisecond) })
	ctx := context.Background() // a deadline would allow unlimited retries (CSOT)
	// The retry of a write whose writeConcernError is retryable must be answered from the
	// stored (lsid, txnNumber) result: the document is inserted once.
	failCommand(t, cl, bson.D{{Key: "times", Value: 1}}, bson.D{
		{Key: "failCommands", Value: bson.A{"insert"}},
		{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 91},
			{Key: "codeName", Value: "ShutdownInProgress"}, {Key: "errmsg", Value: "shutting down"}}}})
	if _, err := cl.Database("fault").Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatalf("retried insert: %v", err)
	}
	rs := srv.CommandsNamed("insert")
	if len(rs) != 2 {
		t.Fatalf("server saw %d inserts, want 2 (write, retry)", len(rs))
	}
	if rs[0].Err != nil || !slices.Equal(rs[0].Labels, []string{"RetryableWriteError"}) {
		t.Errorf("the first insert succeeds with a writeConcernError labelled RetryableWriteError: err %v labels %v", rs[0].Err, rs[0].Labels)
	}
	if n := countDocs(t, cl, "fault", "c"); n != 1 {
		t.Errorf("%d documents, want 1", n)
	}
}

// --- modes and count -------------------------------------------------------------------------

func TestFaultModes(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	data := bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "errorCode", Value: 2}}
	pattern := func(n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			if ping(ctx, cl) == nil {
				b.WriteByte('.')
			} else {
				b.WriteByte('F')
			}
		}
		return b.String()
	}
	off := func() int32 {
		n, err := configureFP(t, cl, "failCommand", "off", nil)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	failCommand(t, cl, bson.D{{Key: "times", Value: 2}}, data)
	if p := pattern(4); p != "FF.." {
		t.Errorf("times 2: %s, want FF..", p)
	}
	if n := off(); n != 0 {
		// times exhausts and removes the fail point; turning it off then reports nothing.
		t.Errorf("times 2 exhausted then off: count %d, want 0", n)
	}

	failCommand(t, cl, bson.D{{Key: "times", Value: 3}}, data)
	if p := pattern(1); p != "F" {
		t.Errorf("times 3: first ping %s", p)
	}
	if n := off(); n != 1 {
		t.Errorf("times 3 turned off after one activation: count %d, want 1", n)
	}
	if p := pattern(2); p != ".." {
		t.Errorf("after off: %s", p)
	}

	failCommand(t, cl, bson.D{{Key: "skip", Value: 2}}, data)
	if p := pattern(5); p != "..FFF" {
		t.Errorf("skip 2: %s, want ..FFF", p)
	}
	if n := off(); n != 3 {
		t.Errorf("skip 2 off: count %d, want 3", n)
	}

	failCommand(t, cl, "alwaysOn", data)
	if p := pattern(4); p != "FFFF" {
		t.Errorf("alwaysOn: %s", p)
	}
	// Reconfiguring reports the previous configuration's count and starts a new one.
	if n := failCommand(t, cl, "alwaysOn", data); n != 4 {
		t.Errorf("reconfigure: count %d, want 4", n)
	}
	if p := pattern(1); p != "F" {
		t.Errorf("alwaysOn again: %s", p)
	}
	if n := off(); n != 1 {
		t.Errorf("off: count %d, want 1", n)
	}
	if p := pattern(2); p != ".." {
		t.Errorf("after off: %s", p)
	}

	// {times: 0} is the same as off.
	failCommand(t, cl, bson.D{{Key: "times", Value: 0}}, data)
	if p := pattern(1); p != "." {
		t.Errorf("times 0: %s", p)
	}

	// Non-matching commands do not consume activations.
	failCommand(t, cl, bson.D{{Key: "times", Value: 1}}, bson.D{
		{Key: "failCommands", Value: bson.A{"buildInfo"}}, {Key: "errorCode", Value: 2}})
	if p := pattern(3); p != "..." {
		t.Errorf("other command: %s", p)
	}
	if err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Err(); err == nil {
		t.Error("buildInfo must fail once")
	}
}

func TestFaultGoAPIConfigureFailPoint(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	if err := srv.ConfigureFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "errorCode", Value: 6}}}}); err != nil {
		t.Fatal(err)
	}
	if ce := commandError(t, ping(ctx, cl)); ce.Code != 6 || ce.Name != "HostUnreachable" {
		t.Fatalf("got %d %s", ce.Code, ce.Name)
	}
	err := srv.ConfigureFailPoint(bson.D{{Key: "configureFailPoint", Value: "noSuchFailPoint"}, {Key: "mode", Value: "alwaysOn"}})
	if err == nil || !strings.Contains(err.Error(), "noSuchFailPoint") {
		t.Fatalf("unknown fail point: %v", err)
	}
}

func TestFaultFailGetMoreAfterCursorCheckout(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("fault").Collection("cur")
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := configureFP(t, cl, "failGetMoreAfterCursorCheckout", bson.D{{Key: "times", Value: 1}},
		bson.D{{Key: "errorCode", Value: 6}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = configureFP(t, cl, "failGetMoreAfterCursorCheckout", "off", nil) })
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(ctx)
	if !cur.Next(ctx) {
		t.Fatalf("first batch: %v", cur.Err())
	}
	if cur.Next(ctx) {
		t.Fatal("the getMore must fail")
	}
	ce := commandError(t, cur.Err())
	if ce.Code != 6 {
		t.Fatalf("code %d, want 6", ce.Code)
	}
	if ce.HasErrorLabel("ResumableChangeStreamError") {
		t.Errorf("a find cursor's getMore is not a change stream: labels %v", ce.Labels)
	}
	gm := srv.CommandsNamed("getMore")
	if len(gm) != 1 || gm[0].Err == nil {
		t.Fatalf("log: %+v", gm)
	}
	// failCommand on getMore is evaluated before checkout, failGetMore… after: a getMore of a
	// cursor that does not exist is CursorNotFound, not the injected error.
	if _, err := configureFP(t, cl, "failGetMoreAfterCursorCheckout", bson.D{{Key: "times", Value: 1}},
		bson.D{{Key: "errorCode", Value: 6}}); err != nil {
		t.Fatal(err)
	}
	err = cl.Database("fault").RunCommand(ctx, bson.D{{Key: "getMore", Value: int64(987654321)}, {Key: "collection", Value: "cur"}}).Err()
	if ce := commandError(t, err); ce.Code != codeCursorNotFound {
		t.Errorf("getMore of an unknown cursor: %d, want 43", ce.Code)
	}
	if n := failPointEntered(srv, fpFailGetMoreAfterCheckout); n != 0 {
		t.Errorf("the fail point fired %d times for an unknown cursor", n)
	}
}

// --- validation --------------------------------------------------------------------------------

func TestFaultConfigureFailPointOnlyOnAdmin(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	err := cl.Database("test").RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: "alwaysOn"},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "errorCode", Value: 2}}}}).Err()
	if ce := commandError(t, err); ce.Code != codeUnauthorized {
		t.Fatalf("code %d, want 13 Unauthorized", ce.Code)
	}
	if err := ping(ctx, cl); err != nil {
		t.Fatalf("the rejected fail point must not be active: %v", err)
	}
}

func TestFaultConfigureFailPointCannotBeFailed(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	failCommand(t, cl, "alwaysOn", bson.D{{Key: "failCommands", Value: bson.A{"configureFailPoint", "ping"}},
		{Key: "errorCode", Value: 2}})
	if err := ping(ctx, cl); err == nil {
		t.Fatal("ping must fail")
	}
	if _, err := configureFP(t, cl, "failCommand", "off", nil); err != nil {
		t.Fatalf("configureFailPoint itself must never be failed: %v", err)
	}
	if err := ping(ctx, cl); err != nil {
		t.Fatal(err)
	}
}

func TestFaultInvalidFailPointDocuments(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	fc := bson.A{"ping"}
	cases := []struct {
		name string
		cmd  bson.D
		want string // substring of errmsg
	}{
		{"unknown fail point", bson.D{{Key: "configureFailPoint", Value: "nope"}, {Key: "mode", Value: "alwaysOn"}}, "nope"},
		{"missing mode", bson.D{{Key: "configureFailPoint", Value: "failCommand"}}, "mode"},
		{"unknown mode", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "sometimes"}}, "sometimes"},
		{"mode wrong type", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: 3}}, "mode"},
		{"negative times", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: -1}}}}, "times"},
		{"unknown mode field", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "often", Value: 1}}}}, "often"},
		{"empty mode document", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{}}}, "mode"},
		{"negative skip beside times", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}, {Key: "skip", Value: -1}}}}, "skip"},
		{"data not an object", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"}, {Key: "data", Value: "x"}}, "data"},
		{"missing failCommands", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"}, {Key: "data", Value: bson.D{{Key: "errorCode", Value: 2}}}}, "failCommands"},
		{"failCommands not array", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"}, {Key: "data", Value: bson.D{{Key: "failCommands", Value: "ping"}}}}, "failCommands"},
		{"failCommands not strings", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"}, {Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{1}}}}}, "failCommands"},
		{"errorCode string", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"}, {Key: "data", Value: bson.D{{Key: "failCommands", Value: fc}, {Key: "errorCode", Value: "2"}}}}, "errorCode"},
		{"errorLabels not array", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"}, {Key: "data", Value: bson.D{{Key: "failCommands", Value: fc}, {Key: "errorLabels", Value: "x"}}}}, "errorLabels"},
		{"blockConnection without blockTimeMS", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"}, {Key: "data", Value: bson.D{{Key: "failCommands", Value: fc}, {Key: "blockConnection", Value: true}}}}, "blockTimeMS"},
		{"negative blockTimeMS", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"}, {Key: "data", Value: bson.D{{Key: "failCommands", Value: fc}, {Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: -5}}}}, "blockTimeMS"},
		{"writeConcernError not object", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"}, {Key: "data", Value: bson.D{{Key: "failCommands", Value: fc}, {Key: "writeConcernError", Value: 1}}}}, "writeConcernError"},
		{"unknown data field", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"}, {Key: "data", Value: bson.D{{Key: "failCommands", Value: fc}, {Key: "explode", Value: true}}}}, "explode"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := cl.Database("admin").RunCommand(ctx, tc.cmd).Err()
			ce := commandError(t, err)
			if ce.Code == 0 || !strings.Contains(ce.Message, tc.want) {
				t.Fatalf("code %d errmsg %q: want a clear error naming %q", ce.Code, ce.Message, tc.want)
			}
			if perr := ping(ctx, cl); perr != nil {
				t.Fatalf("a rejected fail point must leave no fail point behind: %v", perr)
			}
		})
	}
}

// --- Go hooks ------------------------------------------------------------------------------------

func TestFaultKillAllConnections(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("fault").Collection("kill")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "kept"}}); err != nil {
		t.Fatal(err)
	}
	if srv.ConnectionCount() == 0 {
		t.Fatal("the client must hold connections")
	}
	// Hold a ping inside the server (a blocking fail point) so the kill hits a command in
	// flight: the driver then certainly sees the network error.
	failCommand(t, cl, bson.D{{Key: "times", Value: 1}}, bson.D{
		{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: 20000}})
	done := make(chan error, 1)
	go func() { done <- ping(ctx, cl) }()
	waitFor(t, 5*time.Second, "the ping to reach the fail point", func() bool { return failPointEntered(srv, fpFailCommand) == 1 || failPointGone(srv) })
	srv.KillAllConnections()
	err := <-done
	if !mongo.IsNetworkError(err) {
		t.Fatalf("a command in flight during KillAllConnections must see a network error, got %v", err)
	}
	if err := ping(ctx, cl); err != nil {
		t.Fatalf("the client reconnects: %v", err)
	}
	var got bson.D
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "kept"}}).Decode(&got); err != nil {
		t.Fatalf("data must be kept across KillAllConnections: %v", err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "after"}}); err != nil {
		t.Fatalf("writes work after reconnecting: %v", err)
	}
}

func TestFaultKillAllConnectionsUnderLoad(t *testing.T) {
	// Writers and a change stream keep working while every connection is cut again and
	// again: each insert lands exactly once (retryable-write dedupe plus _id idempotence) and
	// the stream delivers each exactly once, each writer's in order.
	const writers, perW, killEvery = 4, 60, 15
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("chaos").Collection("c")
	wcl := connectClient(t, srv, nil)
	cs, err := wcl.Database("chaos").Collection("c").Watch(ctx, mongo.Pipeline{},
		options.ChangeStream().SetMaxAwaitTime(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.Close(context.Background()) }()

	insert := func(doc bson.D) error {
		var err error
		for attempt := 0; attempt < 10; attempt++ {
			_, err = coll.InsertOne(context.Background(), doc)
			if err == nil || mongo.IsDuplicateKeyError(err) {
				return nil
			}
			// Retry what the cut connections cause (network errors, a cleared pool), never a
			// server's rejection unless it is labelled retryable.
			if serverRejected(err) {
				return err
			}
		}
		return err
	}
	errs := make(chan error, writers+1)
	rctx, writerFailed := context.WithCancel(ctx) // a failed writer ends the reader at once
	defer writerFailed()
	kills := 0

	for w := 0; w < writers; w++ {
		go func() {
			for i := 0; i < perW; i++ {
				if w == 0 && i%killEvery == killEvery-1 {
					srv.KillAllConnections()
					kills++
				}
				if err := insert(bson.D{{Key: "_id", Value: fmt.Sprintf("%d-%03d", w, i)}, {Key: "w", Value: int32(w)}, {Key: "i", Value: int32(i)}}); err != nil {
					errs <- fmt.Errorf("writer %d insert %d: %w", w, i, err)
					writerFailed()
					return
				}
			}
			errs <- nil
		}()
	}
	next := make([]int32, writers)
	reopened := 0
	for n := 0; n < writers*perW; n++ {
		for !cs.Next(rctx) {
			// The driver resumes once per error; when the resume itself meets the next kill
			// (pool cleared) the error surfaces, and the application resumes from the last
			// token, as watchtree's runtime does.
			if rctx.Err() != nil {
				t.Fatal(<-errs)
			}
			if reopened++; reopened > 50 {
				t.Fatalf("stream ended after %d events: %v", n, cs.Err())
			}
			tok := cs.ResumeToken()
			_ = cs.Close(ctx)
			if cs, err = wcl.Database("chaos").Collection("c").Watch(ctx, mongo.Pipeline{},
				options.ChangeStream().SetMaxAwaitTime(200*time.Millisecond).SetResumeAfter(tok)); err != nil {
				if serverRejected(err) {
					t.Fatal(err)
				}
				continue
			}
		}
		var ev concEvent
		if err := cs.Decode(&ev); err != nil {
			t.Fatal(err)
		}
		w, i := ev.FullDocument.W, ev.FullDocument.I
		if i != next[w] {
			t.Fatalf("writer %d: event i=%d, want %d (skipped or duplicated)", w, i, next[w])
		}
		next[w]++
	}
	for w := 0; w < writers; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if kills != perW/killEvery {
		t.Fatalf("%d kills", kills)
	}
	if n := countDocs(t, cl, "chaos", "c"); n != writers*perW {
		t.Errorf("%d documents, want %d", n, writers*perW)
	}
}

// serverRejected reports whether err is a server's answer (an error code, or write errors)
// that is not labelled retryable, rather than a lost connection or a cleared pool.
func serverRejected(err error) bool {
	var ce mongo.CommandError
	if errors.As(err, &ce) && ce.Code != 0 {
		return !ce.HasErrorLabel("RetryableWriteError")
	}
	var we mongo.WriteException
	return errors.As(err, &we) && len(we.WriteErrors) > 0
}

// failPointGone reports whether the failCommand fail point was consumed (times exhausted).
func failPointGone(s *Server) bool {
	s.fp.mu.Lock()
	defer s.fp.mu.Unlock()
	return s.fp.points[fpFailCommand] == nil
}

func TestFaultPauseResume(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	if err := ping(ctx, cl); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	resumed := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		err := ping(ctx, cl)
		select {
		case <-resumed:
		default:
			err = errors.New("ping completed while the server was paused")
		}
		done <- err
	}()
	// Held, not lost: the ping cannot finish until Resume (the select above makes a reply
	// before Resume an error, whatever the timing); a bounded look here catches it early.
	select {
	case err := <-done:
		t.Fatalf("ping returned during Pause: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(resumed)
	srv.Resume()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	srv.Resume() // idempotent
	if err := ping(ctx, cl); err != nil {
		t.Fatal(err)
	}
}

func TestFaultCommandLog(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	if err := ping(ctx, cl); err != nil {
		t.Fatal(err)
	}
	srv.ResetCommands()
	for _, r := range srv.Commands() {
		if r.Name != "hello" && r.Name != "isMaster" {
			t.Fatalf("ResetCommands left %s", r.Name)
		}
	}
	before := time.Now()
	for i := 0; i < 2; i++ {
		if err := ping(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	_ = cl.Database("logdb").RunCommand(ctx, bson.D{{Key: "noSuchCommand", Value: 1}}).Err()
	pings := srv.CommandsNamed("ping")
	if len(pings) != 2 {
		t.Fatalf("%d pings logged, want 2", len(pings))
	}
	for _, r := range pings {
		if r.DB != "admin" || r.Err != nil || r.ConnID <= 0 || r.Time.Before(before) || r.Duration < 0 ||
			!strings.HasPrefix(r.AppName, "mongosim-test-") || len(r.Body) == 0 || r.Body[0].Key != "ping" {
			t.Errorf("bad record %+v", r)
		}
	}
	all := srv.Commands()
	var names []string
	for _, r := range all {
		if r.Name != "hello" && r.Name != "isMaster" {
			names = append(names, r.Name)
		}
	}
	if !slices.Equal(names, []string{"ping", "ping", "noSuchCommand"}) {
		t.Errorf("Commands() order: %v", names)
	}
	bad := srv.CommandsNamed("noSuchCommand")
	if len(bad) != 1 || bad[0].DB != "logdb" {
		t.Fatalf("unknown command record: %+v", bad)
	}
	var ce *cmdError
	if !errors.As(bad[0].Err, &ce) || ce.Code != codeCommandNotFound {
		t.Errorf("a failed command is logged with its error, got %v", bad[0].Err)
	}
	srv.ResetCommands()
	if n := len(srv.CommandsNamed("ping")); n != 0 {
		t.Errorf("after ResetCommands: %d pings", n)
	}
}

func TestFaultCommandLogBounded(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	srv.ResetCommands()
	const n = commandLogSize + 50
	for i := 0; i < n; i++ {
		if err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}, {Key: "i", Value: int32(i)}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	all := srv.Commands()
	if len(all) != commandLogSize {
		t.Fatalf("log holds %d records, want %d", len(all), commandLogSize)
	}
	last := srv.CommandsNamed("ping")
	if v, _ := lookupD(last[len(last)-1].Body, "i"); v != int32(n-1) {
		t.Errorf("newest record i=%v, want %d", v, n-1)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Time.Before(all[i-1].Time) && all[i].Name == "ping" && all[i-1].Name == "ping" {
			t.Fatalf("records out of order at %d", i)
		}
	}
}

// --- raw wire ------------------------------------------------------------------------------------

// rawConn is a bare TCP connection speaking the wire protocol by hand.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, srv *Server) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", srv.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(testTimeout))
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func mustMarshal(t *testing.T, d bson.D) []byte {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func frame(reqID, opCode int32, payload []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(16+len(payload)))
	b = binary.LittleEndian.AppendUint32(b, uint32(reqID))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(opCode))
	return append(b, payload...)
}

// opMsgBytes frames an OP_MSG with a kind-0 body and optional kind-1 sequences.
func opMsgBytes(t *testing.T, reqID int32, flags uint32, body bson.D, seqs map[string][]bson.D) []byte {
	p := binary.LittleEndian.AppendUint32(nil, flags)
	p = append(p, 0)
	p = append(p, mustMarshal(t, body)...)
	for ident, docs := range seqs {
		var sec []byte
		sec = append(sec, ident...)
		sec = append(sec, 0)
		for _, d := range docs {
			sec = append(sec, mustMarshal(t, d)...)
		}
		p = append(p, 1)
		p = binary.LittleEndian.AppendUint32(p, uint32(4+len(sec)))
		p = append(p, sec...)
	}
	return frame(reqID, opMsg, p)
}

func opQueryBytes(t *testing.T, reqID int32, ns string, q bson.D) []byte {
	p := binary.LittleEndian.AppendUint32(nil, 4) // SecondaryOK, as the driver sends
	p = append(p, ns...)
	p = append(p, 0)
	p = binary.LittleEndian.AppendUint32(p, 0)
	p = binary.LittleEndian.AppendUint32(p, 0xffffffff) // numberToReturn -1
	p = append(p, mustMarshal(t, q)...)
	return frame(reqID, opQuery, p)
}

func (r *rawConn) send(b []byte) {
	r.t.Helper()
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

// reply is a decoded reply frame.
type reply struct {
	hdr      msgHeader
	flags    uint32
	cursorID int64 // OP_REPLY only
	number   int32 // OP_REPLY numberReturned
	doc      bson.Raw
}

// read reads one reply frame and decodes OP_MSG or OP_REPLY.
func (r *rawConn) read() reply {
	r.t.Helper()
	h, b, err := readMessage(r.br, nil)
	if err != nil {
		r.t.Fatalf("read reply: %v", err)
	}
	rp := reply{hdr: h}
	switch h.opCode {
	case opMsg:
		rp.flags = binary.LittleEndian.Uint32(b)
		// moreToCome appears on streamed hello replies only (exhaust_test.go checks where).
		if rp.flags&^msgMoreToCome != 0 {
			r.t.Errorf("reply flagBits %#x, want 0 or moreToCome (never a checksum)", rp.flags)
		}
		if b[4] != 0 {
			r.t.Fatalf("reply section kind %d, want 0", b[4])
		}
		rp.doc = bson.Raw(b[5:])
		if n := int(binary.LittleEndian.Uint32(b[5:])); n != len(b)-5 {
			r.t.Fatalf("reply carries %d bytes after its one document", len(b)-5-n)
		}
	case opReply:
		rp.flags = binary.LittleEndian.Uint32(b)
		rp.cursorID = int64(binary.LittleEndian.Uint64(b[4:]))
		rp.number = int32(binary.LittleEndian.Uint32(b[16:]))
		rp.doc = bson.Raw(b[20:])
	default:
		r.t.Fatalf("reply opcode %d", h.opCode)
	}
	if err := rp.doc.Validate(); err != nil {
		r.t.Fatalf("reply document: %v", err)
	}
	return rp
}

// expectClosed asserts that the server closes the connection without replying.
func (r *rawConn) expectClosed() {
	r.t.Helper()
	_ = r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := r.br.ReadByte()
	if err == nil {
		r.t.Fatalf("want the connection closed, read byte %#x", b)
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		r.t.Fatalf("want EOF, got %v", err)
	}
}

func wantType(t *testing.T, doc bson.Raw, path string, want bson.Type) bson.RawValue {
	t.Helper()
	v, err := doc.LookupErr(strings.Split(path, ".")...)
	if err != nil {
		t.Fatalf("reply lacks %s: %s", path, doc)
	}
	if v.Type != want {
		t.Errorf("%s has BSON type %s, want %s", path, v.Type, want)
	}
	return v
}

func TestFaultLegacyOpQueryIsMaster(t *testing.T) {
	srv, _ := startServer(t, Options{})
	rc := dialRaw(t, srv)
	rc.send(opQueryBytes(t, 77, "admin.$cmd", bson.D{{Key: "isMaster", Value: 1}, {Key: "helloOk", Value: true},
		{Key: "client", Value: bson.D{{Key: "application", Value: bson.D{{Key: "name", Value: "raw"}}}}}}))
	rp := rc.read()
	if rp.hdr.opCode != opReply || rp.hdr.responseTo != 77 {
		t.Fatalf("want OP_REPLY to 77, got opcode %d responseTo %d", rp.hdr.opCode, rp.hdr.responseTo)
	}
	if rp.flags&3 != 0 || rp.cursorID != 0 || rp.number != 1 {
		t.Errorf("OP_REPLY flags %#x cursorID %d numberReturned %d", rp.flags, rp.cursorID, rp.number)
	}
	if !wantType(t, rp.doc, "ismaster", bson.TypeBoolean).Boolean() {
		t.Error("ismaster must be true")
	}
	wantType(t, rp.doc, "ok", bson.TypeDouble)
	wantType(t, rp.doc, "maxWireVersion", bson.TypeInt32)
	wantType(t, rp.doc, "topologyVersion.counter", bson.TypeInt64)
	if me := wantType(t, rp.doc, "me", bson.TypeString).StringValue(); me != srv.Addr() {
		t.Errorf("me = %s", me)
	}
	// After the handshake the same connection speaks OP_MSG.
	rc.send(opMsgBytes(t, 78, 0, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}, nil))
	if rp := rc.read(); rp.hdr.opCode != opMsg || rp.hdr.responseTo != 78 {
		t.Fatalf("ping: opcode %d responseTo %d", rp.hdr.opCode, rp.hdr.responseTo)
	}
	waitFor(t, 5*time.Second, "the log to show the raw client's appName", func() bool {
		rs := srv.CommandsNamed("ping")
		return len(rs) == 1 && rs[0].AppName == "raw"
	})
}

func TestFaultLegacyOpQueryOtherCommand352(t *testing.T) {
	srv, _ := startServer(t, Options{})
	rc := dialRaw(t, srv)
	rc.send(opQueryBytes(t, 5, "test.$cmd", bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{}}}))
	rp := rc.read()
	if rp.hdr.opCode != opReply || rp.hdr.responseTo != 5 {
		t.Fatalf("opcode %d responseTo %d", rp.hdr.opCode, rp.hdr.responseTo)
	}
	if code := wantType(t, rp.doc, "code", bson.TypeInt32).Int32(); code != codeUnsupportedOpQueryCommand {
		t.Errorf("code %d, want 352", code)
	}
	if ok := wantType(t, rp.doc, "ok", bson.TypeDouble).Double(); ok != 0 {
		t.Errorf("ok %v", ok)
	}
	if name := rp.doc.Lookup("codeName").StringValue(); name != "UnsupportedOpQueryCommand" {
		t.Errorf("codeName %q", name)
	}
	// {$query: …} wrapped form, as very old drivers send it, is unwrapped.
	rc.send(opQueryBytes(t, 6, "admin.$cmd", bson.D{{Key: "$query", Value: bson.D{{Key: "ismaster", Value: 1}}}}))
	if rp := rc.read(); !rp.doc.Lookup("ismaster").Boolean() {
		t.Errorf("wrapped ismaster: %s", rp.doc)
	}
}

func TestFaultMoreToComeGetsNoReply(t *testing.T) {
	srv, _ := startServer(t, Options{})
	rc := dialRaw(t, srv)
	rc.send(opMsgBytes(t, 10, msgMoreToCome, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}, nil))
	rc.send(opMsgBytes(t, 11, 0, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}, nil))
	if rp := rc.read(); rp.hdr.responseTo != 11 {
		t.Fatalf("the first reply answers request %d: a moreToCome request must get no reply", rp.hdr.responseTo)
	}
	if n := len(srv.CommandsNamed("ping")); n != 2 {
		t.Errorf("both pings execute: %d logged", n)
	}
}

func TestFaultUnacknowledgedInsertViaDriver(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	w0 := cl.Database("fault").Collection("w0", options.Collection().SetWriteConcern(writeconcern.Unacknowledged()))
	res, err := w0.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Acknowledged {
		t.Error("a w:0 insert is not acknowledged")
	}
	waitFor(t, 5*time.Second, "the w:0 insert to be applied", func() bool {
		return len(srv.CommandsNamed("insert")) == 1
	})
	if n := countDocs(t, cl, "fault", "w0"); n != 1 {
		t.Fatalf("%d documents", n)
	}
	// The connection stays in sync: many w:0 writes followed by acknowledged commands.
	for i := 2; i < 50; i++ {
		if _, err := w0.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, "49 w:0 inserts", func() bool { return len(srv.CommandsNamed("insert")) == 49 })
	if n := countDocs(t, cl, "fault", "w0"); n != 49 {
		t.Fatalf("%d documents, want 49", n)
	}
}

func TestFaultMalformedFramesCloseConnection(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	ping0 := bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}
	badBSON := []byte{0x0c, 0, 0, 0, 0x10, 'a', 0, 1, 0, 0, 0, 7} // length right, no terminating NUL
	cases := map[string][]byte{
		"length below header": func() []byte {
			b := frame(1, opMsg, nil)
			binary.LittleEndian.PutUint32(b, 8)
			return b
		}(),
		"length above limit": func() []byte {
			b := frame(1, opMsg, nil)
			binary.LittleEndian.PutUint32(b, maxMessageSize+1)
			return b
		}(),
		"unknown opcode":         frame(1, 2010, []byte{0, 0, 0, 0}),
		"legacy OP_INSERT":       frame(1, 2002, []byte{0, 0, 0, 0, 'a', '.', 'b', 0}),
		"OP_MSG without body":    frame(1, opMsg, []byte{0, 0, 0, 0}),
		"OP_MSG flags only":      frame(1, opMsg, []byte{0, 0}),
		"OP_MSG bad section":     frame(1, opMsg, []byte{0, 0, 0, 0, 7, 5, 0, 0, 0, 0}),
		"OP_MSG invalid BSON":    frame(1, opMsg, append([]byte{0, 0, 0, 0, 0}, badBSON...)),
		"OP_MSG BSON too long":   frame(1, opMsg, []byte{0, 0, 0, 0, 0, 0xff, 0, 0, 0, 0}),
		"OP_MSG two bodies":      opMsgTwoBodies(t, ping0),
		"OP_MSG checksum only":   frame(1, opMsg, []byte{1, 0, 0, 0}),
		"OP_MSG bad kind-1 size": frame(1, opMsg, append(append([]byte{0, 0, 0, 0, 0}, mustMarshal(t, ping0)...), 1, 0xff, 0, 0, 0)),
		"OP_QUERY no namespace":  frame(1, opQuery, []byte{0, 0, 0, 0, 'a', 'd'}),
		"OP_QUERY no document":   frame(1, opQuery, []byte{0, 0, 0, 0, 'a', 0, 0, 0, 0, 0, 0, 0, 0, 0}),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			rc := dialRaw(t, srv)
			rc.send(b)
			rc.expectClosed()
		})
	}
	// A frame cut short by the client hanging up.
	nc, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = nc.Write(frame(1, opMsg, []byte{0, 0, 0, 0, 0})[:10])
	_ = nc.Close()

	waitFor(t, 5*time.Second, "malformed connections to be closed", func() bool { return srv.ConnectionCount() <= 3 })
	if err := ping(ctx, cl); err != nil {
		t.Fatalf("the server keeps serving after malformed frames: %v", err)
	}
	rc := dialRaw(t, srv)
	rc.send(opMsgBytes(t, 9, 0, ping0, nil))
	if rp := rc.read(); rp.doc.Lookup("ok").Double() != 1 {
		t.Fatalf("raw ping after malformed frames: %s", rp.doc)
	}
}

func opMsgTwoBodies(t *testing.T, d bson.D) []byte {
	p := []byte{0, 0, 0, 0, 0}
	p = append(p, mustMarshal(t, d)...)
	p = append(p, 0)
	p = append(p, mustMarshal(t, d)...)
	return frame(1, opMsg, p)
}

func TestFaultReplyFieldTypes(t *testing.T) {
	srv, _ := startServer(t, Options{})
	rc := dialRaw(t, srv)
	var id int32
	cmd := func(body bson.D, seqs map[string][]bson.D) bson.Raw {
		t.Helper()
		id++
		rc.send(opMsgBytes(t, id, 0, body, seqs))
		rp := rc.read()
		if rp.hdr.opCode != opMsg || rp.hdr.responseTo != id {
			t.Fatalf("reply opcode %d responseTo %d, want OP_MSG to %d", rp.hdr.opCode, rp.hdr.responseTo, id)
		}
		wantType(t, rp.doc, "ok", bson.TypeDouble)
		wantType(t, rp.doc, "$clusterTime.clusterTime", bson.TypeTimestamp)
		wantType(t, rp.doc, "$clusterTime.signature.hash", bson.TypeBinary)
		wantType(t, rp.doc, "$clusterTime.signature.keyId", bson.TypeInt64)
		wantType(t, rp.doc, "operationTime", bson.TypeTimestamp)
		return rp.doc
	}
	// Errors: int32 code, string codeName, ok 0.0.
	doc := cmd(bson.D{{Key: "noSuchCommand", Value: 1}, {Key: "$db", Value: "admin"}}, nil)
	if doc.Lookup("ok").Double() != 0 || wantType(t, doc, "code", bson.TypeInt32).Int32() != codeCommandNotFound {
		t.Errorf("unknown command: %s", doc)
	}
	wantType(t, doc, "codeName", bson.TypeString)
	wantType(t, doc, "errmsg", bson.TypeString)

	// Writes through a kind-1 sequence: n is int32.
	docs := []bson.D{{{Key: "_id", Value: int32(1)}}, {{Key: "_id", Value: int32(2)}}, {{Key: "_id", Value: int32(3)}}}
	doc = cmd(bson.D{{Key: "insert", Value: "types"}, {Key: "$db", Value: "raw"}}, map[string][]bson.D{"documents": docs})
	if wantType(t, doc, "n", bson.TypeInt32).Int32() != 3 || doc.Lookup("ok").Double() != 1 {
		t.Fatalf("insert: %s", doc)
	}
	// Cursors: int64 ids, in the first batch and after getMore.
	doc = cmd(bson.D{{Key: "find", Value: "types"}, {Key: "batchSize", Value: int32(1)}, {Key: "$db", Value: "raw"}}, nil)
	cid := wantType(t, doc, "cursor.id", bson.TypeInt64).Int64()
	if cid == 0 {
		t.Fatalf("find with batchSize 1 over 3 documents must leave a cursor open: %s", doc)
	}
	wantType(t, doc, "cursor.ns", bson.TypeString)
	wantType(t, doc, "cursor.firstBatch", bson.TypeArray)
	doc = cmd(bson.D{{Key: "getMore", Value: cid}, {Key: "collection", Value: "types"}, {Key: "$db", Value: "raw"}}, nil)
	if got := wantType(t, doc, "cursor.id", bson.TypeInt64).Int64(); got != 0 {
		t.Errorf("exhausted cursor id %d, want 0", got)
	}
	wantType(t, doc, "cursor.nextBatch", bson.TypeArray)
	// A getMore with an int32 id is a type error (the driver always sends int64).
	doc = cmd(bson.D{{Key: "getMore", Value: int32(5)}, {Key: "collection", Value: "types"}, {Key: "$db", Value: "raw"}}, nil)
	if wantType(t, doc, "code", bson.TypeInt32).Int32() != codeTypeMismatch {
		t.Errorf("int32 getMore id: %s", doc)
	}
	// hello: strict types the driver checks.
	doc = cmd(bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}}, nil)
	wantType(t, doc, "isWritablePrimary", bson.TypeBoolean)
	wantType(t, doc, "electionId", bson.TypeObjectID)
	wantType(t, doc, "topologyVersion.processId", bson.TypeObjectID)
	wantType(t, doc, "topologyVersion.counter", bson.TypeInt64)
	wantType(t, doc, "lastWrite.lastWriteDate", bson.TypeDateTime)
	wantType(t, doc, "logicalSessionTimeoutMinutes", bson.TypeInt32)
	wantType(t, doc, "maxMessageSizeBytes", bson.TypeInt32)
	wantType(t, doc, "connectionId", bson.TypeInt32)
}
