package integration_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree"
)

// TestCrashResumeDrill: the runtime is stopped while orders are being written, more are written
// while it is down, and a new runtime resumes the stream. Every order is handled; nothing is
// skipped; and because Stop is graceful (drain, then flush the last settled position), nothing
// handled before the stop is handled again.
func TestCrashResumeDrill(t *testing.T) {
	const first, during, after = 150, 150, 100
	e := newEnv(t)
	got := newHandled()
	spec := watchtree.Stream[Order]{Name: "drill", Collection: "orders", Lanes: 1,
		Checkpoint: watchtree.CheckpointPolicy{SaveEvery: 20}, OnInsert: got.handler()}

	r1 := e.startRuntime(nil)
	r1.waitRunning(t, r1.spawn(t, spec))
	e.insertOrders("orders", 1, first)
	waitFor(t, "a third of the orders handled", func() bool { return got.distinct() >= first/3 })

	// Stop mid-stream while the writer goes on.
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		e.insertOrders("orders", first+1, first+during)
	}()
	r1.stop(t)
	<-writerDone
	handledBeforeStop := got.deliveries()
	e.insertOrders("orders", first+during+1, first+during+after)
	if n := got.deliveries(); n != handledBeforeStop {
		t.Errorf("%d events handled after Stop returned", n-handledBeforeStop)
	}
	cp, ok := e.checkpoint("drill")
	if !ok {
		t.Fatal("no checkpoint after a graceful stop")
	}
	t.Logf("stopped after %d deliveries; checkpoint source %s", handledBeforeStop, cp.Source)

	r2 := e.startRuntime(nil)
	r2.waitRunning(t, r2.spawn(t, spec))
	total := first + during + after
	waitFor(t, "every order handled", func() bool { return got.distinct() >= total },
		func() string { return fmt.Sprintf("%d of %d", got.distinct(), total) })

	docs := got.docs()
	for i := int64(1); i <= int64(total); i++ {
		if !docs[i] {
			t.Errorf("order %d never handled", i)
		}
	}
	replays := got.deliveries() - got.distinct()
	t.Logf("drill: %d orders, %d deliveries, %d replays after the last checkpoint", total, got.deliveries(), replays)
	if replays != 0 {
		t.Errorf("%d events handled twice after a graceful Stop; the final checkpoint must equal the last settled event", replays)
	}
}

// TestCrashResumeSIGKILL: the same drill with the process killed. The test binary re-executes
// itself as a worker (workerMain), the parent SIGKILLs it mid-stream, writes more, starts a new
// worker, and checks the deliveries the workers recorded in a collection: every order handled,
// the replays are exactly a suffix of the first run's deliveries, all after the checkpoint the
// killed worker left behind.
func TestCrashResumeSIGKILL(t *testing.T) {
	const firstBatch, secondBatch = 400, 200
	e := newEnv(t)

	w1 := startWorker(t, e, 1)
	e.insertMany("orders", 1, firstBatch)
	waitFor(t, "the first worker to be mid-stream", func() bool {
		return e.collCount("deliveries", nil) >= firstBatch/4
	})
	if err := w1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	_ = w1.wait(t) // killed: the exit status is the signal
	atKill := e.collCount("deliveries", nil)
	if atKill >= firstBatch {
		t.Logf("worker 1 had handled everything (%d) before the kill; the drill still checks resume", atKill)
	}
	cp, ok := e.checkpoint(workerStream)
	if !ok {
		t.Fatalf("no checkpoint left by the killed worker\nworker stderr:\n%s", w1.stderr.String())
	}
	cpData := tokenData(cp.Token)
	t.Logf("killed worker 1 after %d deliveries; checkpoint %s (source %s)", atKill, cpData, cp.Source)

	e.insertMany("orders", firstBatch+1, firstBatch+secondBatch)
	w2 := startWorker(t, e, 2)
	total := firstBatch + secondBatch
	waitFor(t, "every order delivered", func() bool { return e.distinctDocs() >= total },
		func() string {
			return fmt.Sprintf("%d of %d\nworker 2 stderr:\n%s", e.distinctDocs(), total, w2.stderr.String())
		})
	w2.terminate(t)

	// Analyse the deliveries.
	type delivery struct {
		Event string `bson:"event"`
		Doc   int64  `bson:"doc"`
		Run   int    `bson:"run"`
	}
	all := deliveries[delivery](e)
	runs := map[string][2]int{} // event -> deliveries in run 1, run 2
	docs := map[int64]bool{}
	for _, d := range all {
		c := runs[d.Event]
		c[d.Run-1]++
		runs[d.Event] = c
		docs[d.Doc] = true
	}
	for i := int64(1); i <= int64(total); i++ {
		if !docs[i] {
			t.Errorf("order %d never handled", i)
		}
	}
	var replayed, notReplayed []string // first-run events, by whether run 2 handled them again
	for ev, c := range runs {
		if c[0] > 1 || c[1] > 1 {
			t.Errorf("event %s delivered %d times in run 1 and %d in run 2; one lane never repeats within a run", ev, c[0], c[1])
		}
		if c[1] > 0 && ev <= cpData {
			t.Errorf("run 2 handled event %s, at or before the checkpoint %s it resumed after", ev, cpData)
		}
		switch {
		case c[0] > 0 && c[1] > 0:
			replayed = append(replayed, ev)
		case c[0] > 0:
			notReplayed = append(notReplayed, ev)
		}
	}
	sort.Strings(replayed)
	sort.Strings(notReplayed)
	if len(replayed) > 0 && len(notReplayed) > 0 && notReplayed[len(notReplayed)-1] > replayed[0] {
		t.Errorf("replays are not a suffix of run 1: event %s was not replayed but %s, before it, was",
			notReplayed[len(notReplayed)-1], replayed[0])
	}
	t.Logf("SIGKILL drill: %d orders, %d deliveries, %d replays after the last checkpoint (run 1 handled %d)",
		total, len(all), len(replayed), len(replayed)+len(notReplayed))
}

// worker is a running worker process.
type worker struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{} // closed when the process has exited and been reaped
	err    error         // the exit status, once done is closed
}

// terminate stops the worker with SIGTERM, as an orchestrator does, and fails the test unless
// it exits cleanly (bounded by waitLimit).
func (w *worker) terminate(t *testing.T) {
	t.Helper()
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	if err := w.wait(t); err != nil {
		t.Errorf("worker did not stop cleanly: %v\nstderr:\n%s", err, w.stderr.String())
	}
}

// deliveries reads every record the workers' handlers wrote into the deliveries collection, as
// T (each drill records its own fields).
func deliveries[T any](e *env) []T {
	var all []T
	e.must(func(ctx context.Context) error {
		cur, err := e.db.Collection("deliveries").Find(ctx, bson.D{})
		if err != nil {
			return err
		}
		return cur.All(ctx, &all)
	})
	return all
}

// wait waits for the worker to exit (bounded by waitLimit) and returns its exit status.
func (w *worker) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-w.done:
		return w.err
	case <-time.After(waitLimit):
		t.Fatalf("worker did not exit within %v\nstderr:\n%s", waitLimit, w.stderr.String())
		return nil
	}
}

// startWorker starts the test binary as worker run n on e's deployment and waits until its stream
// is open. Cleanup kills it if the test left it running.
func startWorker(t *testing.T, e *env, n int) *worker {
	t.Helper()
	return startWorkerMode(t, e, n, "")
}

// startWorkerMode is startWorker with the worker's envWorkerMode and any more environment
// variables ("NAME=value") the mode reads.
func startWorkerMode(t *testing.T, e *env, n int, mode string, env ...string) *worker {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envWorker+"=1", envWorkerURI+"="+e.uri, envWorkerDB+"="+e.dbName,
		envWorkerRun+"="+strconv.Itoa(n), envWorkerMode+"="+mode)
	cmd.Env = append(cmd.Env, env...)
	w := &worker{cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = w.stderr, w.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	go func() {
		w.err = cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		select {
		case <-w.done:
		default:
			_ = cmd.Process.Kill()
			<-w.done
		}
	})
	waitFor(t, fmt.Sprintf("worker %d to report its stream open", n), func() bool {
		select {
		case <-w.done:
			t.Fatalf("worker %d exited early: %v\nstderr:\n%s", n, w.err, w.stderr.String())
		default:
		}
		return e.collCount("workers", bson.D{{Key: "_id", Value: n}}) > 0
	}, w.stderr.String)
	return w
}

// syncBuffer is a bytes.Buffer safe for the writer (the process's output) and readers.
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

// insertMany inserts orders from..to in one command.
func (e *env) insertMany(coll string, from, to int64) {
	e.t.Helper()
	docs := make([]any, 0, to-from+1)
	for i := from; i <= to; i++ {
		docs = append(docs, Order{ID: i, Amount: float64(i)})
	}
	e.must(func(ctx context.Context) error {
		_, err := e.db.Collection(coll).InsertMany(ctx, docs)
		return err
	})
}

// distinctDocs counts the distinct orders in deliveries.
func (e *env) distinctDocs() int {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	res := e.db.Collection("deliveries").Distinct(ctx, "doc", bson.D{})
	var ids []int64
	if err := res.Decode(&ids); err != nil && !errors.Is(err, context.Canceled) {
		e.t.Fatalf("distinct: %v", err)
	}
	return len(ids)
}

// TestHandleStopStartRestart: an operator stops one stream (drained and flushed, the runtime and
// its other streams go on), orders are written while it is down, Start resumes it from its
// checkpoint; Restart cycles it again. Every order is handled exactly once.
func TestHandleStopStartRestart(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	got, other := newHandled(), newHandled()
	h := r.spawn(t, watchtree.Stream[Order]{Name: "op", Collection: "orders", Lanes: 2, OnInsert: got.handler()})
	h2 := r.spawn(t, watchtree.Stream[Order]{Name: "bystander", Collection: "orders", OnInsert: other.handler()})
	r.waitRunning(t, h)
	waitState(t, h2, watchtree.StateRunning)
	e.insertOrders("orders", 1, 20)
	waitOrders(t, got, 20)

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := h.Stop(ctx); err != nil {
		t.Fatalf("Handle.Stop: %v", err)
	}
	if st := waitState(t, h, watchtree.StateStopped); st.Name != "op" {
		t.Errorf("status name %q", st.Name)
	}
	e.insertOrders("orders", 21, 40)
	waitOrders(t, other, 40) // the other stream never stopped
	if n := got.distinct(); n != 20 {
		t.Errorf("a stopped stream handled %d events, want 20", n)
	}
	if err := h.Start(ctx); err != nil {
		t.Fatalf("Handle.Start: %v", err)
	}
	waitOrders(t, got, 40)
	if err := h.Restart(ctx); err != nil {
		t.Fatalf("Handle.Restart: %v", err)
	}
	e.insertOrders("orders", 41, 50)
	waitOrders(t, got, 50)
	waitState(t, h, watchtree.StateRunning)
	if d := got.deliveries() - got.distinct(); d != 0 {
		t.Errorf("%d events handled twice across an operator Stop/Start/Restart", d)
	}
}

// TestRestartWaitsForInFlightEvents: an operator Restart while a handler is still working on an
// event lets it finish and settle before the new cursor opens, so that neither it nor the events
// queued behind it are delivered a second time.
func TestRestartWaitsForInFlightEvents(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	got, hold := newHandled(), newHoldOrder(t)
	h := r.spawn(t, watchtree.Stream[Order]{Name: "slow", Collection: "orders", OnInsert: hold.handler(5, got)})
	r.waitRunning(t, h)
	e.insertOrders("orders", 1, 10)
	hold.waitEntered(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	restarted := make(chan error, 1)
	go func() { restarted <- h.Restart(ctx) }()
	waitState(t, h, watchtree.StateStopping) // the restart waits for order 5
	hold.Release()
	if err := <-restarted; err != nil {
		t.Fatalf("Handle.Restart: %v", err)
	}
	e.insertOrders("orders", 11, 15)
	waitOrders(t, got, 15)
	if d := got.deliveries() - got.distinct(); d != 0 {
		t.Errorf("%d events handled twice across a Restart with an event in flight", d)
	}
}
