package kafkasink_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/sink"
	kafkasink "github.com/watchtree/watchtree/sink/kafka"
	"github.com/watchtree/watchtree/test/mongosim"
)

// drillEnv carries "<mongodb uri> <comma-separated brokers> <database name>" to a drill worker
// process; the topic is "<database>.docs".
const drillEnv = "WATCHTREE_KAFKA_SINK_DRILL_WORKER"

// drillWorker is the consuming process of TestSIGKILLDrill: a runtime whose stream "relay"
// (4 lanes, default checkpoint policy: every 1,000 settlements or 1 s) produces every change of
// the collection docs to the topic "<database>.docs" through the sink. It runs until killed (or
// SIGTERM).
func drillWorker() int {
	var uri, brokers, root string
	if _, err := fmt.Sscan(os.Getenv(drillEnv), &uri, &brokers, &root); err != nil {
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
	p, err := kafkasink.New(kafkasink.Options{Brokers: strings.Split(brokers, ",")})
	if err != nil {
		return fail("kafkasink", err)
	}
	defer p.Close()
	h, err := sink.Handler[bson.Raw](p, sink.Options{Subject: "{db}.{coll}"})
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

// TestSIGKILLDrill kills the consuming process with SIGKILL under load 3 times. Writers keep
// updating 30 documents (each write a new version v of its document) on mongosim while a worker
// process relays the changes into a topic of 6 partitions (kfake in this process, or
// WATCHTREE_KAFKA_BROKERS); each worker is killed once the topic has grown by 100 records since
// it started, and a new one resumes from the checkpoint, republishing what was published after
// it. After the third kill the writers stop and a last worker drains. Then, on the broker side:
// every committed write is in the topic, and each document's first records of its versions
// are in order in one partition. Kafka deduplicates only within one producer session (one
// worker's client), so a republished event after a kill is stored again: such duplicates are
// counted, and each must repeat an event stored before it, of the same key.
func TestSIGKILLDrill(t *testing.T) {
	if testing.Short() {
		t.Skip("the SIGKILL drill runs worker processes; skipped with -short")
	}
	const keys, writers, kills, partitions = 30, 6, 3, 6
	brokers := cluster(t)
	adm := admin(t, brokers)
	root := fmt.Sprintf("wtkafkadrill%d", time.Now().UnixNano()%1e9)
	topic := root + ".docs"
	createTopic(t, adm, topic, partitions)
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

	records := func() int64 {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			t.Fatalf("end offsets: %v", err)
		}
		var n int64
		ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
		return n
	}
	waitFor := func(what string, limit time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out after %v waiting for %s", limit, what)
			}
			time.Sleep(10 * time.Millisecond) // a poll interval, bounded by the deadline
		}
	}
	type worker struct {
		cmd    *exec.Cmd
		stderr *bytes.Buffer
	}
	start := func() worker {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), drillEnv+"="+srv.URI()+" "+strings.Join(brokers, ",")+" "+root)
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

	bound := int64(0) // a restarted worker republishes at most what the topic held at its kill
	for k := 1; k <= kills; k++ {
		from := records()
		waitFor(fmt.Sprintf("worker %d to produce 100 records", k), time.Minute, func() bool { return records() >= from+100 })
		kill(w)
		at := records()
		bound += at
		t.Logf("kill %d: SIGKILL after %d records in the topic", k, at)
		w = start()
	}
	stopWriters()
	wg.Wait()
	close(werr)
	for err := range werr {
		t.Fatal(err)
	}
	total := int64(0)
	for _, v := range lastV {
		total += v
	}
	// Every committed write is in: each document's last version has a record (duplicates make
	// the record count a poor signal, so the condition reads the topic).
	complete := func() bool {
		last := map[string]int64{}
		for _, r := range readTopic(t, brokers, adm, topic) {
			v, err := payloadVersion(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			last[string(r.Key)] = max(last[string(r.Key)], v)
		}
		for d, v := range lastV {
			if last[fmt.Sprintf(`{"_id":{"$numberInt":"%d"}}`, d)] < v {
				return false
			}
		}
		return true
	}
	waitFor(fmt.Sprintf("all %d committed writes in the topic", total), time.Minute, func() bool { return records() >= total && complete() })
	kill(w)

	got := readTopic(t, brokers, adm, topic)
	ids := map[string]int64{} // event ID → its version
	last := map[string]int64{}
	keyPart := map[string]int32{}
	dups := 0
	for _, r := range got {
		key, id := string(r.Key), header(r, kafkasink.EventIDHeader)
		v, err := payloadVersion(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := keyPart[key]; ok && p != r.Partition {
			t.Fatalf("key %s in partitions %d and %d", key, p, r.Partition)
		}
		keyPart[key] = r.Partition
		if prev, seen := ids[id]; seen {
			if prev != v || v > last[key] {
				t.Fatalf("%s[%d]@%d: event %s (key %s v %d) repeats v %d, with v %d stored last: not a republish of an earlier record", topic, r.Partition, r.Offset, id, key, v, prev, last[key])
			}
			dups++
			continue
		}
		ids[id] = v
		if v != last[key]+1 {
			t.Fatalf("%s[%d]@%d: key %s v %d after v %d: a lost write or per-key order broken", topic, r.Partition, r.Offset, key, v, last[key])
		}
		last[key] = v
	}
	for d, v := range lastV {
		key := fmt.Sprintf(`{"_id":{"$numberInt":"%d"}}`, d)
		if last[key] != v {
			t.Errorf("document %d: the topic ends at v %d, the last committed write is v %d", d, last[key], v)
		}
	}
	if int64(len(ids)) != total {
		t.Fatalf("the topic holds %d distinct events for %d committed writes", len(ids), total)
	}
	if int64(dups) > bound {
		t.Fatalf("%d duplicates, more than the %d records the topic held at the kills: republishes beyond the uncheckpointed tail", dups, bound)
	}
	t.Logf("%d committed writes, %d records, %d distinct events, %d kills: %d duplicates (republished after kills: Kafka's idempotent producer deduplicates within one producer session only; consumers deduplicate by %s)",
		total, len(got), len(ids), kills, dups, kafkasink.EventIDHeader)
}
