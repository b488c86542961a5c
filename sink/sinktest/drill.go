package sinktest

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

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/sink"
)

// drillEnv carries "<mongodb uri> <broker> <root> <acks file>" from Drill.Run to a worker
// process; its presence is what makes DrillWorker run the worker.
const drillEnv = "WATCHTREE_SINK_DRILL_WORKER"

// The drill's shape: writers keep updating drillKeys documents; each worker's stream has
// drillLanes lanes (so at most drillLanes publishes are in flight when it is killed); a worker is
// killed once the broker side grew by drillStep messages since the previous kill.
const (
	drillKeys    = 30
	drillWriters = 6
	drillKills   = 3
	drillLanes   = 4
	drillStep    = 100
)

// drillWait bounds each of the drill's waits (the first checkpoint, each kill's 100 messages,
// the final drain); drillTimeout bounds the whole drill.
const (
	drillWait    = time.Minute
	drillTimeout = 3 * time.Minute
)

// Drill is the SIGKILL drill of a sink: the consuming process is killed under load 3 times,
// and then, on the broker side, every committed write appears, each document's versions in
// order, and duplicates are 0 where the broker deduplicates, counted and bounded where it does
// not.
//
// The consuming processes are the test binary itself, started again with an environment
// variable that DrillWorker (called first in the sink's TestMain) recognises. Each runs a
// runtime on the replica set Start started, with one stream "relay" (4 lanes, the default checkpoint policy: every
// 1,000 settlements or 1 s) that publishes every change of the collection Root.docs through
// sink.Handler.
type Drill struct {
	// Start starts the replica set the writers and the workers use, stopped when the drill
	// ends (mongosim.Start in the sink modules' tests). Required.
	Start func(ctx context.Context) (ReplicaSet, error)
	// Root names the database (the runtime's and the documents') and so, through the subject
	// template, the broker-side destination. Required; no spaces.
	Root string
	// Broker is handed as is to the worker's open function (DrillWorker): a URL or a
	// comma-separated broker list. Required; no spaces.
	Broker string
	// Count returns how many messages the broker side holds now; it paces the kills. Required.
	Count func(t *testing.T) int64
	// Read returns the messages the broker side received since Read's previous call (all of
	// them on the first call), each partition's in the broker's order. It is polled until every
	// committed write is in, and once more after the last worker is killed. Required.
	Read func(t *testing.T) []Received
	// Dedups says the broker drops a republished message within its deduplication window
	// (JetStream): the drill then requires 0 duplicates, and more acknowledgements counted by
	// the workers than messages stored (republishes happened and were absorbed). Without it
	// (RabbitMQ, Kafka across producer sessions) each duplicate must repeat an earlier message of
	// its key, and they are counted and bounded (see Run).
	Dedups bool
}

// DrillWorker runs the drill's worker, and exits the process, when the test binary was started
// as one by Drill.Run; otherwise it returns at once. Call it first in the sink module's
// TestMain. open makes the worker's Publisher from Drill.Broker and Drill.Root (a RabbitMQ
// exchange is named after it); close, when not nil, runs on a graceful stop (the drill kills
// with SIGKILL). o are the sink's options, the ones the Drill's reader expects (the subject
// template, for instance).
func DrillWorker(open func(ctx context.Context, broker, root string) (p sink.Publisher, close func(), err error), o sink.Options) {
	env := os.Getenv(drillEnv)
	if env == "" {
		return
	}
	os.Exit(drillWorker(env, open, o))
}

// drillWorker runs a worker until SIGTERM (the drill sends SIGKILL); it returns the exit code.
// It appends a line to the acks file for every publish the broker acknowledged (a duplicate's
// included); a worker killed between an ack and its line leaves that one uncounted.
func drillWorker(env string, open func(context.Context, string, string) (sink.Publisher, func(), error), o sink.Options) int {
	var uri, broker, root, acks string
	if _, err := fmt.Sscan(env, &uri, &broker, &root, &acks); err != nil {
		fmt.Fprintf(os.Stderr, "drill worker: %s=%q: %v\n", drillEnv, env, err)
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
	p, closePublisher, err := open(ctx, broker, root)
	if err != nil {
		return fail("publisher", err)
	}
	if closePublisher != nil {
		defer closePublisher()
	}
	f, err := os.OpenFile(acks, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fail("acks file", err)
	}
	defer f.Close()
	h, err := sink.Handler[bson.Raw](countingPublisher{p, f}, o)
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
	if _, err := rt.Spawn(ctx, watchtree.Stream[bson.Raw]{Name: "relay", Collection: "docs", Lanes: drillLanes, OnChange: h}); err != nil {
		return fail("spawn", err)
	}
	<-ctx.Done()
	return 0
}

// countingPublisher appends a line to f for every acknowledged publish.
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

// drillProc is one worker process.
type drillProc struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
}

// Run runs the drill. Writers keep updating 30 documents (each write the next version v of its
// document) while a worker relays the changes; each worker is killed with SIGKILL once the
// broker side has grown by 100 messages since the previous kill, and a new one resumes from the
// checkpoint, republishing what was published after it. After the third kill the writers stop
// and a last worker drains. Then, reading the broker side in its order and deduplicating by
// event ID as a consumer would:
//   - every committed write is there: each document's versions 1..last, in order, each key in
//     one partition, and as many distinct events as committed writes;
//   - with Dedups, no event is stored twice, and the workers counted more acks than messages;
//   - without, each duplicate repeats an earlier message of its key and version, and their
//     number is at most both what the broker side held at the kills (a worker republishes no
//     more than what was published before its kill) and the acks the workers counted beyond
//     the committed writes plus what a killed worker had in flight (4 lanes per kill); the
//     workers must have counted more acks than writes (the drill exercised redelivery).
func (d Drill) Run(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("the SIGKILL drill runs worker processes; skipped with -short")
	}
	for name, v := range map[string]string{"Root": d.Root, "Broker": d.Broker} {
		if v == "" || strings.ContainsAny(v, " \t\n") {
			t.Fatalf("sinktest.Drill.%s is %q: required, without spaces", name, v)
		}
	}
	if d.Count == nil || d.Read == nil {
		t.Fatal("sinktest.Drill: Count and Read are required")
	}
	uri, client := startReplicaSet(t, "Drill", d.Start)
	ctx, cancel := context.WithTimeout(context.Background(), drillTimeout)
	defer cancel()
	db := client.Database(d.Root)
	acks := t.TempDir() + "/acks"

	start := func() drillProc {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), drillEnv+"="+strings.Join([]string{uri, d.Broker, d.Root, acks}, " "))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return drillProc{cmd, &stderr}
	}
	kill := func(w drillProc) {
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
	waitFor(t, "the first worker's checkpoint", drillWait, func() bool {
		n, err := db.Collection("_wt_checkpoints").CountDocuments(ctx, bson.D{})
		return err == nil && n > 0
	})

	lastV, stopWriters := writeUntilStopped(ctx, t, db.Collection("docs"))
	defer stopWriters()
	countBound := int64(0) // a restarted worker republishes at most what the broker held at its kill
	for k := 1; k <= drillKills; k++ {
		from := d.Count(t)
		waitFor(t, fmt.Sprintf("worker %d to publish %d messages", k, drillStep), drillWait,
			func() bool { return d.Count(t) >= from+drillStep })
		kill(w)
		at := d.Count(t)
		countBound += at
		t.Logf("kill %d: SIGKILL with %d messages on the broker side", k, at)
		w = start()
	}
	stopWriters()
	if t.Failed() {
		t.FailNow()
	}
	total := int64(0)
	for _, v := range lastV {
		total += v
	}

	c := newDrillCheck(t)
	waitFor(t, fmt.Sprintf("all %d committed writes on the broker side", total), drillWait, func() bool {
		c.add(d.Read(t))
		return c.reached(lastV)
	})
	kill(w)
	c.add(d.Read(t)) // whatever landed after the poll saw the last versions

	for doc, v := range lastV {
		if key := docKey(doc); c.last[key] != v {
			t.Errorf("document %d: the broker side ends at v %d, the last committed write is v %d", doc, c.last[key], v)
		}
	}
	if int64(len(c.ids)) != total {
		t.Fatalf("%d distinct events on the broker side for %d committed writes", len(c.ids), total)
	}
	raw, err := os.ReadFile(acks)
	if err != nil {
		t.Fatal(err)
	}
	acked := int64(bytes.Count(raw, []byte("\n")))
	if d.Dedups {
		t.Logf("%d committed writes, %d messages, %d duplicates, %d kills; the workers counted %d acks: at least %d republished events absorbed by the broker's deduplication",
			total, c.n, c.dups, drillKills, acked, acked-int64(c.n))
		if c.dups != 0 {
			t.Fatalf("%d messages for %d committed writes: %d duplicates on a broker that deduplicates", c.n, total, c.dups)
		}
		if acked <= int64(c.n) {
			t.Fatalf("the workers counted %d acks for %d messages: no event was republished after a kill, so the drill did not exercise deduplication", acked, c.n)
		}
		return
	}
	ackBound := acked - total + drillKills*drillLanes
	t.Logf("%d committed writes, %d messages, %d duplicates by event ID (bounds: %d held at the kills, %d from the acks), %d kills; the workers counted %d acks",
		total, c.n, c.dups, countBound, ackBound, drillKills, acked)
	if int64(c.dups) > countBound {
		t.Fatalf("%d duplicates, more than the %d messages the broker side held at the kills: republishes beyond the uncheckpointed tail", c.dups, countBound)
	}
	if int64(c.dups) > ackBound {
		t.Fatalf("%d duplicates, more than the %d republished events the workers could have sent", c.dups, ackBound)
	}
	if acked <= total {
		t.Fatalf("the workers counted %d acks for %d writes: no event was republished after a kill, so the drill did not exercise redelivery", acked, total)
	}
}

// drillCheck reads the broker side as a consumer that deduplicates by event ID: it fails the
// test at the first lost write, broken per-key order, key in two partitions, or a duplicate that
// repeats no earlier message.
type drillCheck struct {
	t       *testing.T
	n       int              // messages read
	dups    int              // of which repeat an event ID read before
	ids     map[string]int64 // event ID → its version
	last    map[string]int64 // key → last version
	keyPart map[string]int32 // key → its partition
}

func newDrillCheck(t *testing.T) *drillCheck {
	return &drillCheck{t: t, ids: map[string]int64{}, last: map[string]int64{}, keyPart: map[string]int32{}}
}

func (c *drillCheck) add(rs []Received) {
	t := c.t
	t.Helper()
	for _, r := range rs {
		c.n++
		v, err := payloadVersion(r.Payload)
		if err != nil {
			t.Fatalf("message %d (%s): %v", c.n-1, r.where(), err)
		}
		if p, ok := c.keyPart[r.Key]; ok && p != r.Partition {
			t.Fatalf("key %s in partitions %d and %d", r.Key, p, r.Partition)
		}
		c.keyPart[r.Key] = r.Partition
		if prev, seen := c.ids[r.ID]; seen {
			if prev != v || v > c.last[r.Key] {
				t.Fatalf("message %d (%s): event %s (key %s v %d) repeats v %d, with v %d read last: not a republish of an earlier message",
					c.n-1, r.where(), r.ID, r.Key, v, prev, c.last[r.Key])
			}
			c.dups++
			continue
		}
		c.ids[r.ID] = v
		if v != c.last[r.Key]+1 {
			t.Fatalf("message %d (%s): key %s v %d after v %d: a lost write or per-key order broken", c.n-1, r.where(), r.Key, v, c.last[r.Key])
		}
		c.last[r.Key] = v
	}
}

// reached says whether every document's last committed version has been read.
func (c *drillCheck) reached(lastV []int64) bool {
	for doc, v := range lastV {
		if c.last[docKey(doc)] != v {
			return false
		}
	}
	return true
}

// writeUntilStopped starts the drill's writers: writer i owns the documents i, i+6, ...; each
// round writes the next version of each, one write per 5 ms tick per writer, until stop is
// called. stop waits for the writers and reports each one's write error on t (t.Error: stop
// also runs deferred); after it, lastV holds each document's last committed version.
func writeUntilStopped(ctx context.Context, t *testing.T, coll *mongo.Collection) (lastV []int64, stop func()) {
	lastV = make([]int64, drillKeys)
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	werr := make(chan error, drillWriters)
	for i := range drillWriters {
		wg.Go(func() {
			pace := time.NewTicker(5 * time.Millisecond) // load, not a wait: a write per tick
			defer pace.Stop()
			for v := int64(1); ; v++ {
				for doc := i; doc < drillKeys; doc += drillWriters {
					select {
					case <-wctx.Done():
						return
					case <-pace.C:
					}
					if err := writeVersion(ctx, coll, doc, v); err != nil {
						werr <- err
						return
					}
					lastV[doc] = v // doc is this writer's alone; read after wg.Wait
				}
			}
		})
	}
	var once sync.Once
	return lastV, func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			close(werr)
			for err := range werr {
				t.Error(err)
			}
		})
	}
}
