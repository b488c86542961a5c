package rabbitmqsink_test

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

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/sink"
	rabbitmqsink "github.com/watchtree/watchtree/sink/rabbitmq"
	"github.com/watchtree/watchtree/test/mongosim"
)

// drillEnv carries "<mongodb uri> <amqp url> <database and exchange name> <acks file>" to a
// drill worker process.
const drillEnv = "WATCHTREE_SINK_DRILL_WORKER"

// drillWorker is the consuming process of TestSIGKILLDrill: a runtime whose stream "relay"
// (4 lanes, default checkpoint policy: every 1,000 settlements or 1 s) publishes every change of
// the collection docs to RabbitMQ through the sink. It runs until killed (or SIGTERM).
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
	p, err := rabbitmqsink.New(ctx, rabbitmqsink.Options{URL: url, Exchange: root})
	if err != nil {
		return fail("rabbitmqsink", err)
	}
	defer p.Close()
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

// countingPublisher appends a line to f for every confirmed publish. A worker killed between a
// confirm and its line leaves that one uncounted.
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
// process relays the changes to a durable queue behind a topic exchange; each worker is killed
// once the queue has grown by 100 messages since it started, and a new one resumes from the
// checkpoint, republishing what was published after it. After the third kill the writers stop
// and a last worker drains. Then, reading the queue as a consumer that deduplicates by
// message-id: every committed write is there, each document's versions in order; the
// duplicates (RabbitMQ keeps republished messages) are counted and bounded by what the workers
// republished: no more than the confirms they counted beyond the committed writes, plus what a
// killed worker had in flight (4 lanes per kill, for a confirm not yet counted or a publish not
// yet confirmed).
func TestSIGKILLDrill(t *testing.T) {
	if testing.Short() {
		t.Skip("the SIGKILL drill runs worker processes; skipped with -short")
	}
	const keys, writers, kills, lanes = 30, 6, 3, 4
	url := brokerURL(t)
	ach := admin(t, url)
	root := uniqueRoot("wtrmqdrill")
	q := destination(t, ach, root)
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

	msgs := func() int {
		st, err := ach.QueueDeclarePassive(q, true, false, false, false, nil)
		if err != nil {
			t.Fatalf("queue %s: %v", q, err)
		}
		return st.Messages
	}
	waitFor := func(what string, limit time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out after %v waiting for %s", limit, what)
			}
			time.Sleep(10 * time.Millisecond) // a poll interval under a deadline
		}
	}
	type worker struct {
		cmd    *exec.Cmd
		stderr *bytes.Buffer
	}
	start := func() worker {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), drillEnv+"="+srv.URI()+" "+url+" "+root+" "+acks)
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
		t.Logf("kill %d: SIGKILL after %d messages in the queue", k, msgs())
		w = start()
	}
	stopWriters()
	wg.Wait()
	close(werr)
	for err := range werr {
		t.Fatal(err)
	}
	total := 0
	for _, v := range lastV {
		total += int(v)
	}
	// Every committed write, once deduplicated: the queue holds at least total messages. Poll
	// the consumer's view until each document reached its last version.
	var got []struct {
		id, key string
		v       int64
	}
	last := map[string]int64{}
	seen := map[string]bool{}
	dups := 0
	complete := func() bool {
		for _, r := range readAll(t, ach, q) {
			v, err := payloadVersion(r.Payload)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, struct {
				id, key string
				v       int64
			}{r.ID, r.Key, v})
			if seen[r.ID] { // the consumer's deduplication by message-id
				dups++
				continue
			}
			seen[r.ID] = true
			if v != last[r.Key]+1 {
				t.Fatalf("message %d: key %s v %d after v %d: a lost write or per-key order broken", len(got)-1, r.Key, v, last[r.Key])
			}
			last[r.Key] = v
		}
		for d, v := range lastV {
			if last[fmt.Sprintf(`{"_id":{"$numberInt":"%d"}}`, d)] != v {
				return false
			}
		}
		return true
	}
	waitFor(fmt.Sprintf("all %d committed writes in the queue", total), time.Minute, complete)
	kill(w)
	if len(seen) != total {
		t.Fatalf("%d distinct events for %d committed writes", len(seen), total)
	}
	raw, err := os.ReadFile(acks)
	if err != nil {
		t.Fatal(err)
	}
	acked := bytes.Count(raw, []byte("\n"))
	bound := acked - total + kills*lanes
	t.Logf("%d committed writes, %d messages, %d duplicates by message-id (bound %d), %d kills; the workers counted %d confirms",
		total, len(got), dups, bound, kills, acked)
	if dups > bound {
		t.Fatalf("%d duplicates, more than the %d republished events the workers could have sent", dups, bound)
	}
	if acked <= total {
		t.Fatalf("the workers counted %d confirms for %d writes: no event was republished after a kill, so the drill did not exercise redelivery", acked, total)
	}
}
