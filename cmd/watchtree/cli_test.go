package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/test/mongosim"
)

func TestStreamsJSON(t *testing.T) {
	insert(t, "orders", Order{ID: 1})
	waitFor(t, "order 1", func() bool { return delivered("orders", 1) == 1 })
	var snap messages.SnapshotReply
	waitFor(t, "orders' settlement reported", func() bool {
		cliJSON(t, &snap, "streams")
		for _, r := range snap.GetStreams() {
			if r.GetName() == "orders" && r.GetSettled() >= 1 && r.GetCheckpointAt() != nil {
				return true
			}
		}
		return false
	})
	if snap.GetInstance().GetId() != "cli-test-instance" || snap.GetInstance().GetAddress() != live.addr ||
		!snap.GetInstance().GetTokenRequired() || snap.GetInstance().GetUptime() == nil {
		t.Errorf("instance = %v", snap.GetInstance())
	}
	if snap.GetTotal() != 3 || len(snap.GetStreams()) != 3 {
		t.Fatalf("streams = %d (total %d), want 3", len(snap.GetStreams()), snap.GetTotal())
	}
	var orders *messages.StreamRow
	for _, r := range snap.GetStreams() {
		if r.GetName() == "orders" {
			orders = r
		}
	}
	if orders.GetState() != "running" || orders.GetMode() != "AllInstances" || orders.GetRole() != "" ||
		orders.GetNamespace() != live.db.Name()+".orders" || orders.GetIncarnation() != 1 {
		t.Errorf("orders row = %v", orders)
	}
	if orders.GetLastEventAt() == nil || orders.GetLag() == nil || orders.GetCheckpointToken() == "" {
		t.Errorf("orders row has no lag, last event time or checkpoint token: %v", orders)
	}
	// filter, sort and limit
	cliJSON(t, &snap, "streams", "--filter", "o", "--sort", "name", "--desc", "--limit", "1")
	if snap.GetTotal() != 1 || len(snap.GetStreams()) != 1 || snap.GetStreams()[0].GetName() != "orders" {
		t.Errorf("--filter o: %v", snap.GetStreams())
	}
	cliJSON(t, &snap, "streams", "--sort", "name", "--desc", "--limit", "2")
	if snap.GetTotal() != 3 || len(snap.GetStreams()) != 2 || snap.GetStreams()[0].GetName() != "spare" {
		t.Errorf("--desc --limit 2: total %d, %v", snap.GetTotal(), snap.GetStreams())
	}
	// the table names every stream
	code, out, _ := cli(t, "streams")
	if code != 0 || !strings.Contains(out, "orders") || !strings.Contains(out, "running") || !strings.Contains(out, "cli-test-instance") {
		t.Errorf("streams table (exit %d):\n%s", code, out)
	}
}

func TestDescribeJSON(t *testing.T) {
	var d messages.DescribeReply
	cliJSON(t, &d, "describe", "spare")
	if d.GetStream().GetName() != "spare" || d.GetStatus().GetStream() != "spare" {
		t.Fatalf("describe spare = %v", &d)
	}
	var started bool
	for _, ev := range d.GetEvents() {
		started = started || (ev.GetKind() == "started" && ev.GetStream() == "spare")
	}
	if !started {
		t.Errorf("describe spare: no started event in %v", d.GetEvents())
	}
	code, _, errs := cli(t, "describe", "nope")
	if code != 1 || !strings.Contains(errs, `unknown stream "nope"`) {
		t.Errorf("describe nope: exit %d, stderr %q", code, errs)
	}
}

func TestTreeJSON(t *testing.T) {
	var tree messages.TreeReply
	cliJSON(t, &tree, "tree")
	var find func(ns []*messages.ActorNode) *messages.ActorNode
	find = func(ns []*messages.ActorNode) *messages.ActorNode {
		for _, n := range ns {
			if n.GetName() == "orders" {
				return n
			}
			if f := find(n.GetChildren()); f != nil {
				return f
			}
		}
		return nil
	}
	sup := find(tree.GetRoots())
	if sup == nil {
		t.Fatalf("no supervisor \"orders\" in the tree: %v", &tree)
	}
	kids := map[string]bool{}
	for _, c := range sup.GetChildren() {
		kids[c.GetName()] = true
	}
	if !kids["checkpointer"] || !kids["dispatcher"] || !kids["stream"] {
		t.Errorf("orders' children = %v", kids)
	}
}

func TestEventsJSONAndFollow(t *testing.T) {
	code, out, errs := cli(t, "events", "--stream", "spare", "-o", "json")
	if code != 0 || !strings.Contains(out, `"kind":"started"`) || !strings.Contains(out, `"stream":"spare"`) {
		t.Fatalf("events: exit %d, %s\n%s", code, errs, out)
	}
	if strings.Contains(out, "backlog-end") {
		t.Errorf("events printed the backlog marker:\n%s", out)
	}
}

func TestControlTokenEnforced(t *testing.T) {
	before := status(t, "spare").Incarnation
	for _, args := range [][]string{{"restart", "spare"}, {"restart", "spare", "--token", "wrong"}, {"replay", "spare", "--token", ""}} {
		code, out, errs := cli(t, args...)
		if code != 1 || !strings.Contains(errs, "token") || strings.Contains(errs, "goroutine") || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
	if got := status(t, "spare").Incarnation; got != before {
		t.Errorf("a refused restart restarted the stream: incarnation %d → %d", before, got)
	}
}

func TestRestartTakesEffect(t *testing.T) {
	before := status(t, "spare").Incarnation
	var r messages.ControlReply
	cliJSON(t, &r, "restart", "spare", "--token", testToken)
	if !r.GetOk() || r.GetStatus().GetState() != messages.SupervisorState_SUPERVISOR_STATE_RUNNING {
		t.Fatalf("restart reply = %v", &r)
	}
	st := status(t, "spare")
	if st.Incarnation != before+1 || st.State != "running" {
		t.Errorf("after restart: incarnation %d (was %d), state %s", st.Incarnation, before, st.State)
	}
	var d messages.DescribeReply
	waitFor(t, "the command event", func() bool {
		cliJSON(t, &d, "describe", "spare")
		for _, ev := range d.GetEvents() {
			if ev.GetKind() == "command" && strings.Contains(ev.GetMessage(), "restart spare by ") {
				return true
			}
		}
		return false
	})
}

func TestStopDrainsAndFlushesThenStart(t *testing.T) {
	insert(t, "orders", Order{ID: 101}, Order{ID: 102}, Order{ID: 103})
	waitFor(t, "orders 101..103", func() bool { return delivered("orders", 103) == 1 })
	var r messages.ControlReply
	cliJSON(t, &r, "stop", "orders", "--token", testToken)
	ls := r.GetStatus().GetLastStop()
	if !r.GetOk() || r.GetStatus().GetState() != messages.SupervisorState_SUPERVISOR_STATE_STOPPED ||
		!ls.GetDrained() || !ls.GetFlushed() || ls.GetUnsettled() != 0 {
		t.Fatalf("stop reply = %v", &r)
	}
	if st := status(t, "orders"); st.State != "stopped" || st.LastStop == nil || !st.LastStop.Flushed {
		t.Fatalf("runtime sees %s, last stop %+v", st.State, st.LastStop)
	}
	insert(t, "orders", Order{ID: 104})
	cliJSON(t, &r, "start", "orders", "--token", testToken)
	if !r.GetOk() || r.GetStatus().GetState() != messages.SupervisorState_SUPERVISOR_STATE_RUNNING {
		t.Fatalf("start reply = %v", &r)
	}
	waitFor(t, "order 104 after the start", func() bool { return delivered("orders", 104) == 1 })
	// Nothing settled before the stop is redelivered after it: a marker written after 104 is
	// delivered, and by then 101..103 were still seen once.
	insert(t, "orders", Order{ID: 105})
	waitFor(t, "order 105", func() bool { return delivered("orders", 105) == 1 })
	for id := int64(101); id <= 104; id++ {
		if n := delivered("orders", id); n != 1 {
			t.Errorf("order %d delivered %d times", id, n)
		}
	}
}

func TestDeadLettersReplayAndPurge(t *testing.T) {
	live.healthy.Store(false)
	insert(t, "flaky", Order{ID: 201, Fail: true}, Order{ID: 202, Fail: true})
	var dl messages.DeadLettersReply
	waitFor(t, "two dead letters", func() bool {
		cliJSON(t, &dl, "deadletters", "flaky")
		return len(dl.GetDeadLetters()) == 2
	})
	first := dl.GetDeadLetters()[0]
	if first.GetOperationType() != "insert" || !strings.Contains(first.GetError(), "order refused") ||
		first.GetAttempts() != 2 || !first.GetReplayable() || !strings.Contains(first.GetDocumentKey(), "201") {
		t.Errorf("dead letter = %v", first)
	}
	var snap messages.SnapshotReply
	waitFor(t, "the snapshot's dead-letter count", func() bool {
		cliJSON(t, &snap, "streams", "--filter", "flaky")
		return len(snap.GetStreams()) == 1 && snap.GetStreams()[0].GetDeadLetters() == 2 && snap.GetStreams()[0].GetDeadLettered() == 2
	})

	live.healthy.Store(true)
	var r messages.ControlReply
	cliJSON(t, &r, "replay", "flaky", "--id", first.GetId(), "--token", testToken)
	if !r.GetOk() || r.GetDone() != 1 || r.GetFailed() != 0 {
		t.Fatalf("replay reply = %v", &r)
	}
	if delivered("flaky", 201) != 1 {
		t.Errorf("the replayed order 201 was handled %d times", delivered("flaky", 201))
	}
	cliJSON(t, &dl, "deadletters", "flaky")
	if len(dl.GetDeadLetters()) != 1 || dl.GetDeadLetters()[0].GetId() == first.GetId() {
		t.Fatalf("after the replay: %v", dl.GetDeadLetters())
	}
	cliJSON(t, &r, "purge", "flaky", "--token", testToken)
	if !r.GetOk() || r.GetDone() != 1 {
		t.Fatalf("purge reply = %v", &r)
	}
	if delivered("flaky", 202) != 0 {
		t.Errorf("a purged dead letter was handled")
	}
	cliJSON(t, &dl, "deadletters", "flaky")
	if len(dl.GetDeadLetters()) != 0 {
		t.Errorf("after the purge: %v", dl.GetDeadLetters())
	}
	code, _, errs := cli(t, "replay", "flaky", "--id", "nope", "--token", testToken)
	if code != 1 || !strings.Contains(errs, "not found") {
		t.Errorf("replay of an unknown id: exit %d, %q", code, errs)
	}
}

func TestLeaseReleaseNotSingleLeader(t *testing.T) {
	code, _, errs := cli(t, "lease", "release", "orders", "--token", testToken)
	if code != 1 || !strings.Contains(errs, "not a SingleLeader stream") {
		t.Errorf("lease release: exit %d, %q", code, errs)
	}
}

func TestUnreachableAndUsage(t *testing.T) {
	start := time.Now()
	var errb strings.Builder
	code := run(t.Context(), []string{"--addr", "127.0.0.1:1", "streams"}, &strings.Builder{}, &errb)
	if code != 1 || !strings.Contains(errb.String(), "console unreachable at 127.0.0.1:1") || strings.Contains(errb.String(), "goroutine") {
		t.Errorf("unreachable: exit %d, %q", code, errb.String())
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("unreachable took %v", took)
	}
	for _, args := range [][]string{{"describe"}, {"streams", "-o", "yaml"}, {"streams", "--bogus"}, {"frobnicate"},
		{"lease"}, {"lease", "grab", "orders"}, {"streams", "--tls-cert", "c.pem"}} {
		code, _, errs := cli(t, args...)
		if code != 2 || errs == "" {
			t.Errorf("%v: exit %d, %q", args, code, errs)
		}
	}
}

// TestNewUserMistakes: what a new user gets wrong gives one clear line on stderr and exit 1, at
// once: an address where something else listens, a wrong token, a stream name that does not
// exist (for every verb that takes one, naming the streams there are).
func TestNewUserMistakes(t *testing.T) {
	notConsole := httptest.NewServer(http.NotFoundHandler())
	defer notConsole.Close()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--addr", strings.TrimPrefix(notConsole.URL, "http://"), "streams"}, "not a watchtree console"},
		{[]string{"restart", "orders", "--token", "wrong"}, "the token is missing or wrong: restart needs the console's token (give it with --token or $WATCHTREE_TOKEN)"},
		{[]string{"describe", "nope"}, `unknown stream "nope": this instance runs `},
		{[]string{"deadletters", "nope"}, `unknown stream "nope": this instance runs `},
		{[]string{"events", "-f", "--stream", "nope"}, `unknown stream "nope": this instance runs `},
		{[]string{"restart", "nope", "--token", testToken}, `unknown stream "nope": this instance runs `},
		{[]string{"lease", "release", "nope", "--token", testToken}, `unknown stream "nope": this instance runs `},
		{[]string{"replay", "orders", "--id", "nope", "--token", testToken}, `dead letter "nope"`},
	}
	for _, c := range cases {
		var code int
		var out, errs string
		if c.args[0] == "--addr" {
			var o, e strings.Builder
			code = run(t.Context(), c.args, &o, &e)
			out, errs = o.String(), e.String()
		} else {
			code, out, errs = cli(t, c.args...)
		}
		if code != 1 || !strings.Contains(errs, c.want) || strings.Count(errs, "\n") != 1 ||
			strings.Contains(errs, "goroutine") || strings.Contains(errs, "watchtree: watchtree:") || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and %q", c.args, code, out, errs, c.want)
		}
	}
	// A typo does not take a place among the streams the console remembers events of.
	var d messages.DescribeReply
	cliJSON(t, &d, "describe", "orders")
	for _, ev := range d.GetEvents() {
		if strings.Contains(ev.GetMessage(), "nope") {
			t.Errorf("a command on an unknown stream is filed under orders: %v", ev)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a concurrent reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestEventsFollow: `events -f` keeps printing live events, one JSON line each, until it is
// interrupted, and then exits 0: a restart made while it follows shows up in its output.
func TestEventsFollow(t *testing.T) {
	var out, errb syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--addr", live.addr, "events", "-f", "--stream", "spare", "--backlog", "0", "-o", "json"}, &out, &errb)
	}()
	// The restart is issued until the follower has printed it: the subscription may start after
	// the first one.
	waitFor(t, "the followed feed to show a restart made after it started", func() bool {
		if code, _, errs := cli(t, "restart", "spare", "--token", testToken); code != 0 {
			t.Fatalf("restart: exit %d: %s", code, errs)
		}
		return strings.Contains(out.String(), "restart spare by ")
	})
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var ev messages.LifecycleEvent
		if err := protojson.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("events -f printed a line that is not a LifecycleEvent: %v\n%s", err, line)
		}
		if ev.GetStream() != "spare" && ev.GetStream() != "" {
			t.Fatalf("events -f --stream spare printed an event of %q", ev.GetStream())
		}
	}
	cancel() // Ctrl-C
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("events -f exited %d after the interrupt: %s", code, errb.String())
		}
	case <-time.After(wait):
		t.Fatal("events -f did not end after its context was cancelled")
	}
}

// TestSnapshotVerb: `snapshot S --filter JSON` starts an on-demand snapshot of the matching
// documents of a running stream; a filter that is not JSON is refused, naming it.
func TestSnapshotVerb(t *testing.T) {
	insert(t, "spare", Order{ID: 900}, Order{ID: 901}, Order{ID: 902})
	if code, _, errs := cli(t, "snapshot", "spare", "--filter", "{nope", "--token", testToken); code == 0 || !strings.Contains(errs, "{nope") {
		t.Fatalf("a bad filter: exit %d, stderr %q; want a failure naming the filter", code, errs)
	}
	var r messages.ControlReply
	cliJSON(t, &r, "snapshot", "spare", "--filter", `{"_id": {"$gte": 900}}`, "--token", testToken)
	if !r.GetOk() || !strings.Contains(r.GetDetail(), "started") {
		t.Fatalf("snapshot reply = %v", &r)
	}
	id := strings.TrimSuffix(strings.TrimPrefix(r.GetDetail(), "on-demand snapshot "), " started")
	waitFor(t, "the on-demand snapshot done", func() bool {
		od := status(t, "spare").OnDemand
		return od != nil && od.ID == id && od.Phase == "done"
	})
	if od := status(t, "spare").OnDemand; od.Documents != 3 {
		t.Errorf("on-demand snapshot %+v: want the 3 documents with _id >= 900", od)
	}
}

// TestAddrPointsAtMongoDB: --addr at a MongoDB server (a mongosim here) is told that it is a
// MongoDB server, not a watchtree console, without a hint at TLS.
func TestAddrPointsAtMongoDB(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	srv, err := mongosim.Start(ctx, mongosim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var o, e strings.Builder
	code := run(t.Context(), []string{"--addr", srv.Addr(), "streams"}, &o, &e)
	errs := e.String()
	if code != 1 || !strings.Contains(errs, "this is a MongoDB server, not a watchtree console") ||
		strings.Contains(errs, "TLS") || strings.Count(errs, "\n") != 1 {
		t.Errorf("--addr %s (MongoDB): exit %d, stderr %q; want exit 1 naming MongoDB, no TLS hint", srv.Addr(), code, errs)
	}
}

// TestAddrBarePort: --addr 8090 means 127.0.0.1:8090; an address that is neither host:port nor
// a port is a usage error naming the flag and the form it wants.
func TestAddrBarePort(t *testing.T) {
	_, port, err := net.SplitHostPort(live.addr)
	if err != nil {
		t.Fatal(err)
	}
	var o, e strings.Builder
	if code := run(t.Context(), []string{"--addr", port, "streams", "-o", "json"}, &o, &e); code != 0 || !strings.Contains(o.String(), "orders") {
		t.Errorf("--addr %s: exit %d, stdout %q, stderr %q; want the console at 127.0.0.1:%s", port, code, o.String(), e.String(), port)
	}
	o.Reset()
	e.Reset()
	code := run(t.Context(), []string{"--addr", "consolehost", "streams"}, &o, &e)
	if code != 2 || !strings.Contains(e.String(), "--addr") || !strings.Contains(e.String(), "host:port") ||
		strings.Contains(e.String(), "zero addresses") {
		t.Errorf("--addr consolehost: exit %d, stderr %q; want a usage error naming --addr and host:port", code, e.String())
	}
}
