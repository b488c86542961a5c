package consoleserver_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/console"
	"github.com/watchtree/watchtree/internal/consoleserver"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/test/mongosim"
)

// The tests share one runtime with its console: protoactor remote starts once per process.

const wait = 20 * time.Second

var live struct {
	rt   *watchtree.Runtime
	addr string
	logs *observer.ObservedLogs // the runtime's logs (the console's audit lines among them)
}

// remoteClientEnv makes the test binary a protoactor remote peer (see TestReachableOverRemote).
const remoteClientEnv = "WT_CONSOLE_REMOTE_CLIENT"

func TestMain(m *testing.M) {
	if dir := os.Getenv(tlsServeEnv); dir != "" {
		os.Exit(tlsServe(dir))
	}
	if os.Getenv(consoleserver.FeedServeEnv) != "" {
		os.Exit(consoleserver.FeedServe())
	}
	if addr := os.Getenv(consoleserver.FeedPeerEnv); addr != "" {
		os.Exit(consoleserver.FeedPeer(addr))
	}
	if addr := os.Getenv(remoteClientEnv); addr != "" {
		os.Exit(remotePeer(addr, os.Getenv(remoteClientEnv+"_ADVERTISE")))
	}
	before := goleak.IgnoreCurrent()
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "setup:", err)
		os.Exit(1)
	}
	if code == 0 {
		// protoactor's EndpointWriter leaks a gRPC client connection per failed dial (it
		// overwrites its conn without closing it): TestReachableOverRemote's unreachable peer
		// makes it dial one. Those connections are not the console's.
		if err := goleak.Find(before,
			goleak.IgnoreAnyFunction("google.golang.org/grpc.(*addrConn).resetTransportAndUnlock"),
			goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run")); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left:", err)
			os.Exit(1)
		}
	}
	os.Exit(code)
}

type Doc struct {
	ID int64 `bson:"_id"`
}

func setup(m *testing.M) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	uri := os.Getenv("WATCHTREE_MONGODB_URI")
	if uri == "" {
		srv, err := mongosim.Start(ctx, mongosim.Options{})
		if err != nil {
			return 0, err
		}
		defer srv.Close()
		uri = srv.URI()
	}
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		return 0, err
	}
	defer client.Disconnect(context.Background())
	db := client.Database(fmt.Sprintf("wt_console_%d", time.Now().UnixNano()%1e9))
	defer db.Drop(context.Background())
	core, logs := observer.New(zap.InfoLevel)
	live.logs = logs
	rt, err := watchtree.New(watchtree.Config{Client: client, Database: db.Name(), InstanceID: "console-test", Logger: zap.New(core),
		Console: watchtree.ConsoleConfig{Addr: "127.0.0.1:0", Token: "t0ken"}})
	if err != nil {
		return 0, err
	}
	if err := rt.Start(ctx); err != nil {
		return 0, err
	}
	live.rt, live.addr = rt, rt.ConsoleAddr()
	if _, err := rt.Spawn(ctx, watchtree.Stream[Doc]{Name: "docs", Collection: "docs",
		OnInsert: func(context.Context, *watchtree.Event[Doc]) error { return nil }}); err != nil {
		return 0, err
	}
	code := m.Run()
	sctx, scancel := context.WithTimeout(context.Background(), wait)
	defer scancel()
	if err := rt.Stop(sctx); err != nil {
		return 0, err
	}
	return code, nil
}

// serving fails t unless the console still answers a snapshot with the stream running.
func serving(t testing.TB) {
	t.Helper()
	c, err := console.Dial(live.addr, console.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	snap, err := c.Snapshot(ctx, &messages.SnapshotRequest{})
	if err != nil {
		t.Fatalf("the console stopped serving: %v", err)
	}
	if len(snap.GetStreams()) != 1 || snap.GetStreams()[0].GetState() != "running" {
		t.Fatalf("snapshot = %v", snap.GetStreams())
	}
}

func dialRemoting(t testing.TB) (*grpc.ClientConn, remote.RemotingClient) {
	t.Helper()
	conn, err := grpc.NewClient(live.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	return conn, remote.NewRemotingClient(conn)
}

// sendBatch opens protoactor's Receive stream as a peer would, sends b, and returns the
// status the stream ended with (nil when it stayed open).
func sendBatch(t testing.TB, b *remote.MessageBatch) error {
	t.Helper()
	conn, rc := dialRemoting(t)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := rc.Receive(ctx)
	if err != nil {
		return err
	}
	if err := s.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{
		ConnectionType: &remote.ConnectRequest_ServerConnection{ServerConnection: &remote.ServerConnection{SystemId: "fuzz", Address: "127.0.0.1:1"}},
	}}}); err != nil {
		return err
	}
	if _, err := s.Recv(); err != nil { // the ConnectResponse
		return err
	}
	if err := s.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}}); err != nil {
		return err
	}
	// A refused batch ends the stream at once; an accepted one leaves it open.
	rctx, rcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer rcancel()
	errc := make(chan error, 1)
	go func() { _, err := s.Recv(); errc <- err }()
	select {
	case err = <-errc:
		return err
	case <-rctx.Done():
		return nil
	}
}

func consoleTarget() *actor.PID { return actor.NewPID(live.addr, "console") }

func TestGuardRefusesWhatWouldCrashProtoactor(t *testing.T) {
	conn, rc := dialRemoting(t)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := rc.ListProcesses(ctx, &remote.ListProcessesRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("ListProcesses: %v, want Unimplemented", err)
	}
	if _, err := rc.GetProcessDiagnostics(ctx, &remote.GetProcessDiagnosticsRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("GetProcessDiagnostics: %v, want Unimplemented", err)
	}
	snapshot, _ := proto.Marshal(&messages.SnapshotRequest{})
	stop, _ := proto.Marshal(&actor.Stop{})
	cases := []struct {
		name string
		b    *remote.MessageBatch
		want string
	}{
		{"unknown type", &remote.MessageBatch{TypeNames: []string{"does.not.Exist"}, Targets: []*actor.PID{consoleTarget()},
			Envelopes: []*remote.MessageEnvelope{{TypeId: 0, Target: 0, MessageData: snapshot}}}, "not a registered protobuf message"},
		{"type index out of range", &remote.MessageBatch{TypeNames: []string{"watchtree.v1.SnapshotRequest"}, Targets: []*actor.PID{consoleTarget()},
			Envelopes: []*remote.MessageEnvelope{{TypeId: 3, Target: 0, MessageData: snapshot}}}, "type_id 3 out of range"},
		{"target index out of range", &remote.MessageBatch{TypeNames: []string{"watchtree.v1.SnapshotRequest"}, Targets: []*actor.PID{consoleTarget()},
			Envelopes: []*remote.MessageEnvelope{{TypeId: 0, Target: 5, MessageData: snapshot}}}, "target 5 out of range"},
		{"sender index out of range", &remote.MessageBatch{TypeNames: []string{"watchtree.v1.SnapshotRequest"}, Targets: []*actor.PID{consoleTarget()},
			Envelopes: []*remote.MessageEnvelope{{TypeId: 0, Target: 0, Sender: 2, MessageData: snapshot}}}, "sender 2 out of range"},
		{"a supervisor as target", &remote.MessageBatch{TypeNames: []string{"actor.Stop"}, Targets: []*actor.PID{actor.NewPID(live.addr, "watchtree-1/docs")},
			Envelopes: []*remote.MessageEnvelope{{TypeId: 0, Target: 0, MessageData: stop}}}, "is not the console actor"},
		{"stop the console", &remote.MessageBatch{TypeNames: []string{"actor.Stop"}, Targets: []*actor.PID{consoleTarget()},
			Envelopes: []*remote.MessageEnvelope{{TypeId: 0, Target: 0, MessageData: stop}}}, `system message "actor.Stop" refused`},
		{"a tree's private message", &remote.MessageBatch{TypeNames: []string{"watchtree.internal.v1.Flush"}, Targets: []*actor.PID{consoleTarget()},
			Envelopes: []*remote.MessageEnvelope{{TypeId: 0, Target: 0, MessageData: nil}}}, "private message"},
		{"json serializer", &remote.MessageBatch{TypeNames: []string{"watchtree.v1.SnapshotRequest"}, Targets: []*actor.PID{consoleTarget()},
			Envelopes: []*remote.MessageEnvelope{{TypeId: 0, Target: 0, SerializerId: 1, MessageData: snapshot}}}, "serializer_id 1"},
	}
	for _, c := range cases {
		err := sendBatch(t, c.b)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want InvalidArgument %q", c.name, err, c.want)
		}
	}
	// Random bytes on the port: the connection is dropped, the process goes on.
	nc, err := net.Dial("tcp", live.addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = nc.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x04\x08\x00\x00\x00\x00\x00garbage"))
	_ = nc.Close()
	serving(t)
}

func TestFacadeUnknownMethodAndGarbage(t *testing.T) {
	conn, _ := dialRemoting(t)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := conn.Invoke(ctx, "/watchtree.v1.Console/Nope", &messages.TreeRequest{}, &messages.TreeReply{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("unknown method: %v", err)
	}
	err = conn.Invoke(ctx, "/other.Service/Call", &messages.TreeRequest{}, &messages.TreeReply{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("unknown service: %v", err)
	}
	// A reply type that is not what the method answers is refused by the decoder, not a crash.
	err = conn.Invoke(ctx, "/watchtree.v1.Console/Snapshot", &messages.ControlRequest{Action: 7, Stream: strings.Repeat("x", 100)}, &messages.SnapshotReply{})
	if err != nil && status.Code(err) == codes.Internal {
		t.Errorf("Snapshot with a ControlRequest body: %v", err)
	}
	serving(t)
}

func TestControlNeedsTheToken(t *testing.T) {
	for _, tok := range []string{"", "wrong"} {
		c, err := console.Dial(live.addr, console.ClientOptions{Token: tok, RequestedBy: "tester"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Control(context.Background(), messages.ControlAction_CONTROL_ACTION_RESTART, "docs", "", time.Second)
		c.Close()
		if err == nil || !strings.Contains(err.Error(), "token") {
			t.Errorf("token %q: %v", tok, err)
		}
	}
	c, _ := console.Dial(live.addr, console.ClientOptions{Token: "t0ken", RequestedBy: "tester"})
	defer c.Close()
	r, err := c.Control(context.Background(), messages.ControlAction_CONTROL_ACTION_RESTART, "docs", "", 10*time.Second)
	if err != nil || !r.GetOk() {
		t.Fatalf("restart with the token: %v %v", r, err)
	}
	// Every command is logged with who asked, refused or done.
	audit := func(msg string) []string {
		var who []string
		for _, e := range live.logs.FilterMessage(msg).All() {
			if f := e.ContextMap(); f["command"] == "restart" && f["stream"] == "docs" {
				who = append(who, fmt.Sprint(f["requested_by"]))
			}
		}
		return who
	}
	if refused := audit("console: command refused: wrong or missing token"); len(refused) < 2 || !strings.HasPrefix(refused[0], "tester via 127.0.0.1:") {
		t.Errorf("refusals logged: %v", refused)
	}
	if done := audit("console: command done"); len(done) == 0 || !strings.HasPrefix(done[len(done)-1], "tester via 127.0.0.1:") {
		t.Errorf("done logged: %v", done)
	}
}

func TestSubscribeFeedsLiveEvents(t *testing.T) {
	c, _ := console.Dial(live.addr, console.ClientOptions{Token: "t0ken", RequestedBy: "tester"})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	got := make(chan *messages.LifecycleEvent, 64)
	done := make(chan error, 1)
	go func() {
		done <- c.Subscribe(ctx, "docs", 0, func(ev *messages.LifecycleEvent) { got <- ev })
	}()
	// The backlog marker says the subscription is live; then a restart's events arrive.
	for ev := range got {
		if ev.GetKind() == console.BacklogEnd {
			break
		}
	}
	if _, err := c.Control(ctx, messages.ControlAction_CONTROL_ACTION_RESTART, "docs", "", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for seen := false; !seen; {
		select {
		case ev := <-got:
			if ev.GetSeq() <= last {
				t.Errorf("seq %d after %d", ev.GetSeq(), last)
			}
			last = ev.GetSeq()
			seen = ev.GetKind() == "command" && strings.Contains(ev.GetMessage(), "restart docs by tester")
		case <-ctx.Done():
			t.Fatal("no command event on the live feed")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Subscribe: %v", err)
	}
}

// TestReachableOverRemote checks the two transports behind one port. A protoactor peer that the
// console can dial back gets its reply over remote; one that advertises an address the console
// cannot reach (a CLI behind a port-forward) does not: protoactor delivers a reply on a
// connection of its own to the requester. That is why the CLI uses the facade, whose reply comes
// back on the caller's connection (every other test here). Each peer runs in its own process
// (one protoactor remote per process).
func TestReachableOverRemote(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	peer := func(advertise string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), remoteClientEnv+"="+live.addr, remoteClientEnv+"_ADVERTISE="+advertise)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := peer("")
	if err != nil || !strings.Contains(out, "instance console-test") {
		t.Fatalf("reachable peer: %v\n%s", err, out)
	}
	out, err = peer("127.0.0.1:1")
	if err == nil || !strings.Contains(out, "no reply") {
		t.Fatalf("peer behind a port-forward: %v\n%s", err, out)
	}
}

// remotePeer is the child process: it starts protoactor remote, asks the console for a
// snapshot over remote and prints the instance id.
func remotePeer(addr, advertise string) int {
	sys := actor.NewActorSystem()
	var opts []remote.ConfigOption
	if advertise != "" {
		opts = append(opts, remote.WithAdvertisedHost(advertise))
	}
	r := remote.NewRemote(sys, remote.Configure("127.0.0.1", 0, opts...))
	r.Start()
	defer r.Shutdown(false)
	wait := 3 * time.Second
	if w, err := time.ParseDuration(os.Getenv(remoteClientEnv + "_WAIT")); err == nil {
		wait = w
	}
	res, err := sys.Root.RequestFuture(actor.NewPID(addr, "console"), &messages.SnapshotRequest{}, wait).Result()
	if err != nil {
		fmt.Println("no reply:", err)
		return 1
	}
	snap, ok := res.(*messages.SnapshotReply)
	if !ok {
		fmt.Printf("unexpected reply %T\n", res)
		return 1
	}
	fmt.Println("instance", snap.GetInstance().GetId())
	return 0
}

// TestFacadeFeedGoesPastItsWindow: the facade acknowledges what it sends its client, so a feed
// delivers more than one window of events: a backlog of over 64 arrives whole, in order, with
// nothing dropped.
func TestFacadeFeedGoesPastItsWindow(t *testing.T) {
	c, _ := console.Dial(live.addr, console.ClientOptions{Token: "t0ken", RequestedBy: "tester"})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	backlog := func() []*messages.LifecycleEvent {
		var got []*messages.LifecycleEvent
		sctx, scancel := context.WithCancel(ctx)
		defer scancel()
		ended := false
		err := c.Subscribe(sctx, "", 1024, func(ev *messages.LifecycleEvent) {
			// Live events may follow the marker before the cancel ends the subscription (a
			// restart's events come after Control returns): they are not the backlog.
			if ended || ev.GetKind() == console.BacklogEnd {
				ended = true
				scancel()
				return
			}
			got = append(got, ev)
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := backlog()
	for len(got) <= 64 && ctx.Err() == nil { // each restart adds events: a command, a stop, a start
		for i := 0; i < 10; i++ {
			if _, err := c.Control(ctx, messages.ControlAction_CONTROL_ACTION_RESTART, "docs", "", 10*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		got = backlog()
	}
	if len(got) <= 64 {
		t.Fatalf("the backlog brought %d events, want more than one window (64)", len(got))
	}
	for i, ev := range got {
		if ev.GetDropped() != 0 || ev.GetDelivered() != uint64(i+1) || (i > 0 && ev.GetSeq() <= got[i-1].GetSeq()) {
			t.Fatalf("event %d: seq %d delivered %d dropped %d", i, ev.GetSeq(), ev.GetDelivered(), ev.GetDropped())
		}
	}
}
