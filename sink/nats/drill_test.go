package natssink_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/sink"
	natssink "github.com/watchtree/watchtree/sink/nats"
	"github.com/watchtree/watchtree/test/mongosim"
)

// drillEnv carries "<mongodb uri> <nats url> <database and JetStream stream name> <acks file>"
// to a drill worker process.
const drillEnv = "WATCHTREE_SINK_DRILL_WORKER"

// drillWorker is the consuming process of TestSIGKILLDrill: a runtime whose stream "relay"
// (4 lanes, default checkpoint policy: every 1,000 settlements or 1 s) publishes every change of
// the collection docs to JetStream through the sink. It runs until killed (or SIGTERM).
func drillWorker() int {
	var uri, url, root, acks string
	if _, err := fmt.Sscan(os.Getenv(drillEnv), &uri, &url, &root, &acks); err != nil {
		fmt.Fprintln(os.Stderr, "drill worker:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "drill worker: %s: %v\n", what, err)
		return 1
	}
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		return fail("mongo", err)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		return fail("nats", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fail("jetstream", err)
	}
	p, err := natssink.New(js)
	if err != nil {
		return fail("natssink", err)
	}
	f, err := os.OpenFile(acks, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fail("acks file", err)
	}
	defer f.Close()
	h, err := sink.Handler[bson.Raw](countingPublisher{p, f}, sink.Options{})
	if err != nil {
		return fail("handler", err)
	}
	rt, err := watchtree.New(watchtree.Config{Client: client, Database: root, Logger: zap.NewNop()})
	if err != nil {
		return fail("runtime", err)
	}
	if err := rt.Start(ctx); err != nil {
		return fail("start", err)
	}
	defer rt.Stop(context.Background())
	if _, err := rt.Spawn(ctx, watchtree.Stream[bson.Raw]{Name: "relay", Collection: "docs", Lanes: 4, OnChange: h}); err != nil {
		return fail("spawn", err)
	}
	<-ctx.Done()
	return 0
}

// countingPublisher appends a line to f for every acknowledged publish (a duplicate's ack
// included). A worker killed between an ack and its line leaves that one uncounted.
type countingPublisher struct {
	sink.Publisher
	f *os.File
}

func (c countingPublisher) Publish(ctx context.Context, m *sink.Message) error {
	if err := c.Publisher.Publish(ctx, m); err != nil {
		return err
	}
	_, _ = c.f.Write([]byte("a\n")) // O_APPEND: each line lands whole
	return nil
}

// TestSIGKILLDrill kills the consuming process with SIGKILL under load 3 times. Writers keep
// updating 30 documents (each write a new version v of its document) on mongosim while a worker
// process relays the changes to JetStream; each worker is killed once the stream has grown by
// 100 messages since it started, and a new one resumes from the checkpoint, republishing what
// was published after it. After the third kill the writers stop and a last worker drains. Then,
// on the broker side: every committed write is in the stream, each document's versions in
// order, and there are no duplicates although events were republished (the workers' acks,
// counted, outnumber the messages: the stream dropped the repeats within its duplicate window).
func TestSIGKILLDrill(t *testing.T) {
	if testing.Short() {
		t.Skip("the SIGKILL drill runs worker processes; skipped with -short")
	}
	const keys, writers, kills = 30, 6, 3
	nc, js := connect(t)
	root := fmt.Sprintf("wtnatsdrill%d", time.Now().UnixNano()%1e9)
	stream := newStream(t, js, root, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, err := mongosim.Start(ctx, mongosim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	db := client.Database(root)
	acks := t.TempDir() + "/acks"

	msgs := func() uint64 {
		info, err := stream.Info(ctx)
		if err != nil {
			t.Fatalf("stream info: %v", err)
		}
		return info.State.Msgs
	}
	waitFor := func(what string, limit time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out after %v waiting for %s", limit, what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	type worker struct {
		cmd    *exec.Cmd
		stderr *bytes.Buffer
	}
	start := func() worker {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), drillEnv+"="+srv.URI()+" "+nc.ConnectedUrl()+" "+root+" "+acks)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return worker{cmd, &stderr}
	}
	kill := func(w worker) {
		_ = w.cmd.Process.Kill() // SIGKILL
		err := w.cmd.Wait()
		if ws, ok := w.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("the worker ended with %v before the SIGKILL: %s", err, w.stderr)
		}
	}

	// The first worker: the stream's position is captured and saved before it consumes, so
	// writes start once its checkpoint exists.
	w := start()
	defer func() {
		if w.cmd.ProcessState == nil {
			_ = w.cmd.Process.Kill()
			_ = w.cmd.Wait()
		}
	}()
	waitFor("the first worker's checkpoint", time.Minute, func() bool {
		n, err := db.Collection("_wt_checkpoints").CountDocuments(ctx, bson.D{})
		return err == nil && n > 0
	})

	// The writers: writer i owns the documents i, i+writers, ...; each round writes the next
	// version of each, until stop. lastV is each document's last committed version.
	lastV := make([]int64, keys)
	wctx, stopWriters := context.WithCancel(ctx)
	defer stopWriters()
	var wg sync.WaitGroup
	werr := make(chan error, writers)
	coll := db.Collection("docs")
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pace := time.NewTicker(5 * time.Millisecond) // load, not a wait: a write per tick
			defer pace.Stop()
			for v := int64(1); ; v++ {
				for d := i; d < keys; d += writers {
					select {
					case <-wctx.Done():
						return
					case <-pace.C:
					}
					var err error
					if v == 1 {
						_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: d}, {Key: "v", Value: v}})
					} else {
						_, err = coll.UpdateByID(ctx, d, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: v}}}})
					}
					if err != nil {
						werr <- fmt.Errorf("doc %d v %d: %w", d, v, err)
						return
					}
					lastV[d] = v // d is this writer's alone; read after wg.Wait
				}
			}
		}()
	}

	for k := 1; k <= kills; k++ {
		from := msgs()
		waitFor(fmt.Sprintf("worker %d to publish 100 messages", k), time.Minute, func() bool { return msgs() >= from+100 })
		kill(w)
		t.Logf("kill %d: SIGKILL after %d messages in the stream", k, msgs())
		w = start()
	}
	stopWriters()
	wg.Wait()
	close(werr)
	for err := range werr {
		t.Fatal(err)
	}
	total := uint64(0)
	for _, v := range lastV {
		total += uint64(v)
	}
	waitFor(fmt.Sprintf("all %d committed writes in the stream", total), time.Minute, func() bool { return msgs() >= total })
	kill(w)

	got := readAll(t, stream)
	seen := map[string]bool{}
	last := map[string]int64{}
	for i, r := range got {
		if seen[r.ID] {
			t.Fatalf("message %d: event %s stored twice", i, r.ID)
		}
		seen[r.ID] = true
		v, err := payloadVersion(r.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if v != last[r.Key]+1 {
			t.Fatalf("message %d: key %s v %d after v %d: a lost write or per-key order broken", i, r.Key, v, last[r.Key])
		}
		last[r.Key] = v
	}
	for d, v := range lastV {
		key := fmt.Sprintf(`{"_id":{"$numberInt":"%d"}}`, d)
		if last[key] != v {
			t.Errorf("document %d: the stream ends at v %d, the last committed write is v %d", d, last[key], v)
		}
	}
	if uint64(len(got)) != total {
		t.Fatalf("the stream holds %d messages for %d committed writes: %d duplicates", len(got), total, len(got)-int(total))
	}
	raw, err := os.ReadFile(acks)
	if err != nil {
		t.Fatal(err)
	}
	acked := bytes.Count(raw, []byte("\n"))
	t.Logf("%d committed writes, %d messages, 0 duplicates, %d kills; the workers counted %d acks: at least %d republished events absorbed by the duplicate window",
		total, len(got), kills, acked, acked-len(got))
	if acked <= len(got) {
		t.Fatalf("the workers counted %d acks for %d messages: no event was republished after a kill, so the drill did not exercise deduplication", acked, len(got))
	}
}
