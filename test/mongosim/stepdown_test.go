package mongosim

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// helloState is what a raw hello says about the node's role.
type helloState struct {
	writable   bool
	secondary  bool
	hasPrimary bool
	electionID bson.ObjectID
	counter    int64
	processID  bson.ObjectID
}

func rawHello(t *testing.T, rc *rawConn, id int32) helloState {
	t.Helper()
	rc.send(opMsgBytes(t, id, 0, bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}}, nil))
	doc := rc.read().doc
	_, perr := doc.LookupErr("primary")
	return helloState{
		writable:   wantType(t, doc, "isWritablePrimary", bson.TypeBoolean).Boolean(),
		secondary:  wantType(t, doc, "secondary", bson.TypeBoolean).Boolean(),
		hasPrimary: perr == nil,
		electionID: wantType(t, doc, "electionId", bson.TypeObjectID).ObjectID(),
		counter:    wantType(t, doc, "topologyVersion.counter", bson.TypeInt64).Int64(),
		processID:  wantType(t, doc, "topologyVersion.processId", bson.TypeObjectID).ObjectID(),
	}
}

func TestStepDownHelloAndElection(t *testing.T) {
	srv, _ := startServer(t, Options{})
	rc := dialRaw(t, srv)
	before := rawHello(t, rc, 1)
	if !before.writable || before.secondary || !before.hasPrimary {
		t.Fatalf("before: %+v", before)
	}
	if err := srv.StepDown(400 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	down := rawHello(t, rc, 2)
	if down.writable || !down.secondary || down.hasPrimary {
		t.Fatalf("stepped down, hello must report a secondary without a primary: %+v", down)
	}
	if down.counter <= before.counter || down.processID != before.processID {
		t.Errorf("topologyVersion must advance within the process: %d -> %d", before.counter, down.counter)
	}

	// Writes fail with NotWritablePrimary, labelled only when they are retryable writes; reads
	// with NotPrimaryNoSecondaryOk. State-change errors carry the topologyVersion.
	lsid := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: bytes.Repeat([]byte{7}, 16)}}}
	rc.send(opMsgBytes(t, 3, 0, bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "sd"},
		{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(1)}}, map[string][]bson.D{"documents": {{{Key: "_id", Value: 1}}}}))
	doc := rc.read().doc
	if code := wantType(t, doc, "code", bson.TypeInt32).Int32(); code != codeNotWritablePrimary {
		t.Fatalf("retryable insert on a secondary: %s", doc)
	}
	if labels := stringArray(doc.Lookup("errorLabels")); !slices.Equal(labels, []string{"RetryableWriteError"}) {
		t.Errorf("retryable insert labels %v, want [RetryableWriteError]", labels)
	}
	if c := wantType(t, doc, "topologyVersion.counter", bson.TypeInt64).Int64(); c != down.counter {
		t.Errorf("error topologyVersion counter %d, want %d", c, down.counter)
	}
	rc.send(opMsgBytes(t, 4, 0, bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "sd"}},
		map[string][]bson.D{"documents": {{{Key: "_id", Value: 2}}}}))
	doc = rc.read().doc
	if doc.Lookup("code").Int32() != codeNotWritablePrimary || len(stringArray(doc.Lookup("errorLabels"))) != 0 {
		t.Errorf("a write without txnNumber gets 10107 and no label: %s", doc)
	}
	rc.send(opMsgBytes(t, 5, 0, bson.D{{Key: "find", Value: "c"}, {Key: "$db", Value: "sd"}}, nil))
	if code := rc.read().doc.Lookup("code").Int32(); code != codeNotPrimaryNoSecondaryOk {
		t.Errorf("find on a secondary: code %d, want 13435", code)
	}
	rc.send(opMsgBytes(t, 6, 0, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}, nil))
	if ok := rc.read().doc.Lookup("ok").Double(); ok != 1 {
		t.Errorf("ping works on a secondary")
	}

	var up helloState
	id := int32(10)
	waitFor(t, 5*time.Second, "re-election", func() bool {
		id++
		up = rawHello(t, rc, id)
		return up.writable
	})
	if up.secondary || !up.hasPrimary {
		t.Errorf("re-elected: %+v", up)
	}
	if bytes.Compare(up.electionID[:], before.electionID[:]) <= 0 {
		t.Errorf("electionId must increase: %s -> %s", before.electionID.Hex(), up.electionID.Hex())
	}
	if up.counter <= down.counter {
		t.Errorf("topologyVersion must advance on re-election: %d -> %d", down.counter, up.counter)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.StepDown(time.Second); !errors.Is(err, ErrClosed) {
		t.Errorf("StepDown after Close: %v, want ErrClosed", err)
	}
}

// stringArray decodes a BSON array of strings (nil when absent).
func stringArray(v bson.RawValue) []string {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil
	}
	vals, _ := arr.Values()
	out := make([]string, 0, len(vals))
	for _, x := range vals {
		out = append(out, x.StringValue())
	}
	return out
}

func TestStepDownStreamingClientNotices(t *testing.T) {
	// The default client streams hello: the topologyVersion bump wakes its awaitable hello,
	// so it learns of the stepdown and the election without waiting for a heartbeat.
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	if err := ping(ctx, cl); err != nil {
		t.Fatal(err)
	}
	srv.ResetCommands()
	if err := srv.StepDown(300 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "two hello replies after the two topology changes", func() bool {
		n := 0
		for _, r := range srv.Commands() {
			if r.Name == "hello" && r.Err == nil {
				n++
			}
		}
		return n >= 2
	})
	start := time.Now()
	if _, err := cl.Database("sd").Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("insert after re-election took %s", d)
	}
}

func TestStepDownWriteRetriedAfterReelection(t *testing.T) {
	srv, _ := startServer(t, Options{})
	rec := &cmdRecorder{}
	// Polling monitoring with a long heartbeat: the client does not learn of the stepdown
	// before it sends the insert, so the insert certainly meets the secondary.
	cl := connectClient(t, srv, func(o *options.ClientOptions) {
		o.SetMonitor(rec.Monitor()).SetServerMonitoringMode(options.ServerMonitoringModePoll).
			SetHeartbeatInterval(time.Minute)
	})
	coll := cl.Database("sd").Collection("retry")
	if _, err := coll.InsertOne(testCtx(t), bson.D{{Key: "_id", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	srv.ResetCommands()
	if err := srv.StepDown(time.Second); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// No deadline: the driver retries exactly once (a deadline makes it retry until then).
	if _, err := coll.InsertOne(context.Background(), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("the write during the stepdown must be retried after re-election: %v", err)
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("the retry succeeded after %s, before the 1s stepdown ended", d)
	}
	ev := rec.Named("insert")
	if len(ev) != 3 || ev[1].OK || !ev[2].OK {
		t.Fatalf("driver saw %+v, want ok, failed, ok", ev)
	}
	if ev[1].Code != codeNotWritablePrimary || !slices.Equal(ev[1].Labels, []string{"RetryableWriteError"}) {
		t.Errorf("the failed attempt: code %d labels %v, want 10107 [RetryableWriteError]", ev[1].Code, ev[1].Labels)
	}
	rs := srv.CommandsNamed("insert")
	if len(rs) != 2 {
		t.Fatalf("server log has %d inserts, want 2", len(rs))
	}
	if rs[0].Code != codeNotWritablePrimary || !slices.Equal(rs[0].Labels, []string{"RetryableWriteError"}) {
		t.Errorf("server log: first insert code %d labels %v (%v), want 10107 [RetryableWriteError]", rs[0].Code, rs[0].Labels, rs[0].Err)
	}
	if rs[1].Err != nil {
		t.Errorf("server log: the retry failed: %v", rs[1].Err)
	}
	if a, b := rs[0].Body, rs[1].Body; !sameTxn(a, b) {
		t.Errorf("the retry must reuse lsid and txnNumber")
	}
	if n := countDocs(t, cl, "sd", "retry"); n != 2 {
		t.Errorf("%d documents, want 2", n)
	}
}

// sameTxn reports whether two commands carry the same lsid and txnNumber.
func sameTxn(a, b bson.D) bool {
	la, _ := lookupD(a, "lsid")
	lb, _ := lookupD(b, "lsid")
	ta, _ := lookupD(a, "txnNumber")
	tb, _ := lookupD(b, "txnNumber")
	ra, _ := bson.Marshal(bson.D{{Key: "l", Value: la}, {Key: "t", Value: ta}})
	rb, _ := bson.Marshal(bson.D{{Key: "l", Value: lb}, {Key: "t", Value: tb}})
	return ta != nil && bytes.Equal(ra, rb)
}

func TestStepDownChangeStreamResumes(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("sd").Collection("cs")
	cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())

	const total = 200
	const stepAt = 60
	writerErr := make(chan error, 1)
	stepped := make(chan struct{})
	go func() {
		for i := 0; i < total; i++ {
			if i == stepAt {
				if err := srv.StepDown(300 * time.Millisecond); err != nil {
					writerErr <- err
					return
				}
				close(stepped)
			}
			// Writes during the stepdown fail with 10107 + RetryableWriteError and are retried
			// once the node is primary again (no deadline: exactly one retry).
			if _, err := coll.InsertOne(context.Background(), bson.D{{Key: "_id", Value: i}}); err != nil {
				writerErr <- err
				return
			}
		}
		writerErr <- nil
	}()

	var got []int32
	seen := map[string]bool{}
	for len(got) < total && cs.Next(ctx) {
		var ev struct {
			ID            bson.Raw `bson:"_id"`
			OperationType string   `bson:"operationType"`
			DocumentKey   struct {
				ID int32 `bson:"_id"`
			} `bson:"documentKey"`
		}
		if err := cs.Decode(&ev); err != nil {
			t.Fatal(err)
		}
		if ev.OperationType != "insert" {
			t.Fatalf("unexpected %s event", ev.OperationType)
		}
		tok := ev.ID.String()
		if seen[tok] {
			t.Fatalf("duplicate event token %s", tok)
		}
		seen[tok] = true
		got = append(got, ev.DocumentKey.ID)
	}
	if err := cs.Err(); err != nil {
		t.Fatalf("change stream: %v", err)
	}
	if err := <-writerErr; err != nil {
		t.Fatalf("writer: %v", err)
	}
	<-stepped
	for i, id := range got {
		if id != int32(i) {
			t.Fatalf("event %d has _id %d: events were skipped, duplicated or reordered (%v)", i, id, got)
		}
	}
	// The stream was really interrupted and resumed: a failed getMore, then a new aggregate
	// that resumes from a token.
	var failedGetMore, resumed bool
	for _, r := range srv.Commands() {
		switch {
		case r.Name == "getMore" && r.Err != nil:
			failedGetMore = true
		case r.Name == "aggregate" && failedGetMore:
			if p, ok := lookupD(r.Body, "pipeline"); ok {
				st, _ := p.(bson.A)[0].(bson.D)
				cs, _ := st[0].Value.(bson.D)
				_, ra := lookupD(cs, "resumeAfter")
				_, sa := lookupD(cs, "startAfter")
				_, so := lookupD(cs, "startAtOperationTime")
				resumed = resumed || ra || sa || so
			}
		}
	}
	if !failedGetMore || !resumed {
		t.Errorf("want an interrupted getMore followed by a resuming aggregate (failed getMore %v, resumed %v)", failedGetMore, resumed)
	}
}

func TestStepDownRepeatedIsSafe(t *testing.T) {
	// StepDown while stepped down extends the window; concurrent StepDowns and Close race
	// cleanly (run under -race).
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = srv.StepDown(50 * time.Millisecond)
		}()
	}
	wg.Wait()
	waitFor(t, 5*time.Second, "re-election", func() bool { p, _ := srv.state.roleInfo(); return p })
	if _, err := cl.Database("sd").Collection("rep").InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	_ = srv.StepDown(time.Hour) // Close must stop the pending re-election timer
}

// TestReplSetStepDownCommand: the wire command steps the member down for the seconds given (a
// client outside the process, such as a chaos test, has no Server.StepDown), and refuses a bad
// argument or a second step-down while it is secondary.
func TestReplSetStepDownCommand(t *testing.T) {
	srv, client := startServer(t, Options{})
	ctx := context.Background()
	admin := client.Database("admin")
	var ce mongo.CommandError
	if err := admin.RunCommand(ctx, bson.D{{Key: "replSetStepDown", Value: "soon"}}).Err(); !errors.As(err, &ce) || ce.Code != 2 {
		t.Fatalf("replSetStepDown with a string = %v, want BadValue 2", err)
	}
	if err := client.Database("db").RunCommand(ctx, bson.D{{Key: "replSetStepDown", Value: 1}}).Err(); !errors.As(err, &ce) || ce.Code != 13 {
		t.Fatalf("replSetStepDown outside admin = %v, want Unauthorized 13", err)
	}
	rc := dialRaw(t, srv)
	if err := admin.RunCommand(ctx, bson.D{{Key: "replSetStepDown", Value: 0.5}, {Key: "force", Value: true}}).Err(); err != nil {
		t.Fatalf("replSetStepDown: %v", err)
	}
	if h := rawHello(t, rc, 1); h.writable || !h.secondary {
		t.Fatalf("after replSetStepDown hello = %+v, want a secondary", h)
	}
	// On the raw connection: the driver would wait for the re-election before sending it.
	rc.send(opMsgBytes(t, 2, 0, bson.D{{Key: "replSetStepDown", Value: 1}, {Key: "$db", Value: "admin"}}, nil))
	if code, _ := rc.read().doc.Lookup("code").AsInt64OK(); code != 10107 {
		t.Fatalf("second replSetStepDown while secondary: code %d, want NotWritablePrimary 10107", code)
	}
	deadline := time.Now().Add(20 * time.Second)
	for id := int32(3); ; id++ {
		if h := rawHello(t, rc, id); h.writable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not re-elected 20s after a 0.5s step-down")
		}
		time.Sleep(20 * time.Millisecond) // polling the role, not waiting a fixed time
	}
}
