package consoleserver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/watchtree/watchtree/messages"
)

// The raw-remote feed test runs the console and its subscriber in two processes of the test
// binary (protoactor remote sets gRPC's global logger when it starts, so one process runs one
// remote). Each child reads commands from stdin and answers one line each on stdout.

// Env variables that make the test binary a child (see the external TestMain).
const (
	FeedServeEnv = "WT_CONSOLE_FEED_SERVE"
	FeedPeerEnv  = "WT_CONSOLE_FEED_PEER"
)

// FeedServe is the console child: a console with no streams on 127.0.0.1:0. It prints
// "console ADDR", then answers "publish N" (N events), "info ID" (the subscription's
// SubscriberInfo as JSON) and "stop".
func FeedServe() int {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	srv, err := Start(sys, emptyBackend{}, Config{Addr: "127.0.0.1:0"})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("console", srv.Addr())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var n uint64
		switch cmd := in.Text(); {
		case strings.HasPrefix(cmd, "publish "):
			_, _ = fmt.Sscan(strings.TrimPrefix(cmd, "publish "), &n)
			for i := uint64(0); i < n; i++ {
				srv.publish(&messages.LifecycleEvent{Stream: "s", Kind: "checkpointed", Message: fmt.Sprint(i)})
			}
			fmt.Println("published")
		case strings.HasPrefix(cmd, "info "):
			_, _ = fmt.Sscan(strings.TrimPrefix(cmd, "info "), &n)
			var info *messages.SubscriberInfo
			if res, err := sys.Root.RequestFuture(srv.actorPID(), &messages.SnapshotRequest{}, 5*time.Second).Result(); err == nil {
				for _, s := range res.(*messages.SnapshotReply).GetInstance().GetSubscribers() {
					if s.GetId() == n {
						info = s
					}
				}
			}
			b, _ := protojson.Marshal(info)
			fmt.Println(string(b))
		case cmd == "stop":
			if err := srv.Stop(context.Background()); err != nil {
				fmt.Println("error", err)
				return 1
			}
			fmt.Println("stopped")
			return 0
		}
	}
	return 0
}

// ackingInbox is a subscriber over protoactor remote: it records its events and, once ack is
// set, acknowledges each one to the console.
type ackingInbox struct {
	inbox
	console *actor.PID
	ack     atomic.Bool
}

func (b *ackingInbox) Receive(ctx actor.Context) {
	b.inbox.Receive(ctx)
	if ev, ok := ctx.Message().(*messages.LifecycleEvent); ok && b.ack.Load() {
		ctx.Send(b.console, &messages.SubscriptionAck{Id: ev.GetSubscription(), Received: ev.GetDelivered()})
	}
}

// FeedPeer is the subscriber child: it subscribes to the console at addr over protoactor
// remote with a window of 8 and prints "subscribed ID". It answers "count" with "N SEQS_IN_ORDER
// LAST_DROPPED LAST_DELIVERED" and "ack" (it acknowledges what it holds, then every event) with
// "acking".
func FeedPeer(addr string) int {
	sys := actor.NewActorSystem()
	r := remote.NewRemote(sys, remote.Configure("127.0.0.1", 0))
	r.Start()
	console := actor.NewPID(addr, "console")
	box := &ackingInbox{console: console}
	feed, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return box }), "feed")
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	res, err := sys.Root.RequestFuture(console, &messages.SubscribeRequest{SubscriberAddress: feed.Address, SubscriberId: feed.Id, Window: 8}, 5*time.Second).Result()
	reply, ok := res.(*messages.SubscribeReply)
	if err != nil || !ok {
		fmt.Println("error", res, err)
		return 1
	}
	fmt.Println("subscribed", reply.GetId())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "count":
			got := box.all()
			ordered := true
			for i, ev := range got[1:] {
				ordered = ordered && ev.GetSeq() == uint64(i+1)
			}
			last := got[len(got)-1]
			fmt.Println(len(got), ordered, last.GetDropped(), last.GetDelivered())
		case "ack":
			box.ack.Store(true)
			sys.Root.Send(console, &messages.SubscriptionAck{Id: reply.GetId(), Received: uint64(len(box.all()))})
			fmt.Println("acking")
		}
	}
	return 0
}

// Child is the test binary run as a child process with env (see the external TestMain): its
// stdin, its stdout line by line, its stderr kept and shown when the test fails. It is killed
// when the test ends unless Close stopped it.
type Child struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	stderr bytes.Buffer
	closed bool
	err    error // of Wait
}

// StartChild starts the child.
func StartChild(t *testing.T, env ...string) *Child {
	t.Helper()
	c := &Child{t: t, cmd: exec.Command(os.Args[0], "-test.run=^$")}
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stderr = &c.stderr
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.out = bufio.NewReader(stdout)
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !c.closed {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
		if t.Failed() && c.stderr.Len() > 0 {
			t.Logf("child %v stderr:\n%s", env, c.stderr.String())
		}
	})
	return c
}

// Line reads the child's next line of output.
func (c *Child) Line() string {
	c.t.Helper()
	l, err := c.out.ReadString('\n')
	if err != nil {
		c.t.Fatalf("child: %v (read %q)", err, l)
	}
	return strings.TrimSpace(l)
}

// Ask sends the child one command and returns its answer line.
func (c *Child) Ask(cmd string) string {
	c.t.Helper()
	if _, err := fmt.Fprintln(c.stdin, cmd); err != nil {
		c.t.Fatal(err)
	}
	return c.Line()
}

// CloseStdin tells a child that runs until its stdin closes to stop.
func (c *Child) CloseStdin() { _ = c.stdin.Close() }

// Wait waits for the child to exit after CloseStdin, and returns how it exited (again when
// called again).
func (c *Child) Wait() error {
	if !c.closed {
		c.closed = true
		c.err = c.cmd.Wait()
	}
	return c.err
}

// TestSlowSubscriberOverRemote: a subscriber in another process, reached over protoactor
// remote, that reads nothing gets its window of events and no more; the console queues a
// bounded number, drops and counts the rest, and shows them in its snapshot; once the
// subscriber acknowledges over remote it gets the queue in order, each event with the drop count.
func TestSlowSubscriberOverRemote(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	srvChild := StartChild(t, FeedServeEnv+"=1")
	first := srvChild.Line()
	addr, ok := strings.CutPrefix(first, "console ")
	if !ok {
		t.Fatalf("console child: %q", first)
	}
	server := srvChild.Ask
	peerChild := StartChild(t, FeedPeerEnv+"="+addr)
	peer := peerChild.Ask
	var id uint64
	line := peerChild.Line()
	if _, err := fmt.Sscanf(line, "subscribed %d", &id); err != nil {
		t.Fatalf("peer child: %q", line)
	}
	info := func() *messages.SubscriberInfo {
		i := &messages.SubscriberInfo{}
		if err := protojson.Unmarshal([]byte(server("info "+fmt.Sprint(id))), i); err != nil {
			t.Fatal(err)
		}
		return i
	}

	const published = feedQueue + 200
	server(fmt.Sprint("publish ", published))
	const dropped = published - 7 - feedQueue // the backlog marker and 7 events fill the window
	poll(t, "the drops to be counted", func() bool { return info().GetDropped() == dropped })
	poll(t, "the window to arrive over remote", func() bool { return peer("count") == "8 true 0 8" })
	if i := info(); i.GetDelivered() != 8 || i.GetQueued() != feedQueue || !strings.HasSuffix(i.GetSubscriber(), "/feed") {
		t.Fatalf("subscriber = %v", i)
	}
	peer("ack")
	want := fmt.Sprintf("%d true %d %d", 8+feedQueue, dropped, 8+feedQueue)
	poll(t, "the queue to drain over remote, in order", func() bool { return peer("count") == want })
	poll(t, "every event acknowledged", func() bool {
		i := info()
		return i.GetAcknowledged() == 8+feedQueue && i.GetQueued() == 0 && i.GetDropped() == dropped
	})
	if got := server("stop"); got != "stopped" {
		t.Fatalf("stop: %q", got)
	}
}
