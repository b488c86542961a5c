package integration_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
)

// The worker process of TestCrashResumeSIGKILL: the test binary re-executed with envWorker set.
const (
	envWorker    = "WATCHTREE_IT_WORKER" // "1": run workerMain instead of the tests
	envWorkerURI = "WATCHTREE_IT_WORKER_URI"
	envWorkerDB  = "WATCHTREE_IT_WORKER_DB"
	envWorkerRun = "WATCHTREE_IT_WORKER_RUN"
	// envWorkerMode "snapshot" runs the stream snapWorkerStream with an initial snapshot of
	// <db>.orders instead (TestSnapshotResumeSIGKILL); it reports ready once Spawn returned.
	// "leader" runs the SingleLeader worker (leaderWorkerMain); "shared50" the 50 Shared
	// members of TestSharedSIGKILLDrill50 (shared50WorkerMain).
	envWorkerMode    = "WATCHTREE_IT_WORKER_MODE"
	snapWorkerStream = "snapkill"
	snapWorkerParts  = 4
	snapWorkerBatch  = 50
	workerStream     = "killme"
	workerSaveEvery  = 25
)

// workerSetup is what every worker process starts with: its run and database from the
// environment (envWorkerURI, envWorkerDB, envWorkerRun), a context cancelled by SIGTERM or
// SIGINT, and a client named "<app>-<run>". done disconnects the client and stops the signal
// handling.
func workerSetup(app string) (ctx context.Context, cl *mongo.Client, db string, run int, done func(), err error) {
	uri, db := os.Getenv(envWorkerURI), os.Getenv(envWorkerDB)
	run, err = strconv.Atoi(os.Getenv(envWorkerRun))
	if uri == "" || db == "" || err != nil {
		return nil, nil, "", 0, nil, fmt.Errorf("needs %s, %s and %s", envWorkerURI, envWorkerDB, envWorkerRun)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	cl, err = mongo.Connect(options.Client().ApplyURI(uri).SetAppName(fmt.Sprintf("%s-%d", app, run)).
		SetHeartbeatInterval(500 * time.Millisecond))
	if err != nil {
		stop()
		return nil, nil, "", 0, nil, fmt.Errorf("connect: %w", err)
	}
	return ctx, cl, db, run, func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = cl.Disconnect(dctx)
		stop()
	}, nil
}

// workerMain runs one watchtree runtime with the stream "killme" on <db>.orders. Its handler
// records every delivery in <db>.deliveries as {event: ID, doc: order id, run: N}. Once the
// stream is open it writes {_id: N} to <db>.workers, so the parent knows it is consuming. On
// SIGTERM it stops the runtime gracefully and exits 0; SIGKILL ends it wherever it is.
func workerMain() int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "worker: "+format+"\n", args...)
		return 2
	}
	switch os.Getenv(envWorkerMode) {
	case "leader":
		return leaderWorkerMain()
	case "shared50":
		return shared50WorkerMain()
	case "txn":
		return txnWorkerMain()
	}
	ctx, cl, db, run, done, err := workerSetup("wt-it-worker")
	if err != nil {
		return fail("%v", err)
	}
	defer done()
	started := make(chan struct{}, 1)
	obs := observe.Func(func(ev observe.Event) {
		if _, ok := ev.(observe.Started); ok {
			select {
			case started <- struct{}{}:
			default:
			}
		}
	})
	rt, err := watchtree.New(watchtree.Config{Client: cl, Database: db, Observer: obs})
	if err != nil {
		return fail("New: %v", err)
	}
	sctx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	if err := rt.Start(sctx); err != nil {
		return fail("Start: %v", err)
	}
	deliveries := cl.Database(db).Collection("deliveries")
	if os.Getenv(envWorkerMode) == "snapshot" {
		_, err = rt.Spawn(sctx, withCursor(watchtree.Stream[Order]{
			Name: snapWorkerStream, Collection: "orders", Lanes: 4,
			Snapshot: watchtree.SnapshotPolicy{Mode: watchtree.SnapshotInitial, Partitions: snapWorkerParts, BatchSize: snapWorkerBatch},
			OnSnapshot: func(ctx context.Context, ev *watchtree.Event[Order]) error {
				_, err := deliveries.InsertOne(ctx, bson.D{{Key: "event", Value: ev.ID()}, {Key: "doc", Value: ev.FullDocument.ID}, {Key: "run", Value: run}})
				return err
			},
		}))
		if err != nil {
			return fail("Spawn: %v", err)
		}
		if _, err := cl.Database(db).Collection("workers").InsertOne(sctx, bson.D{{Key: "_id", Value: run}}); err != nil {
			return fail("ready: %v", err)
		}
		<-ctx.Done()
		stopCtx, cancelStop := context.WithTimeout(context.Background(), waitLimit)
		defer cancelStop()
		if err := rt.Stop(stopCtx); err != nil {
			return fail("Stop: %v", err)
		}
		return 0
	}
	_, err = rt.Spawn(ctx, withCursor(watchtree.Stream[Order]{
		Name: workerStream, Collection: "orders", Lanes: 1,
		Checkpoint: watchtree.CheckpointPolicy{SaveEvery: workerSaveEvery, SaveInterval: 200 * time.Millisecond},
		OnInsert: func(ctx context.Context, ev *watchtree.Event[Order]) error {
			_, err := deliveries.InsertOne(ctx, bson.D{{Key: "event", Value: ev.ID()}, {Key: "doc", Value: ev.FullDocument.ID}, {Key: "run", Value: run}})
			return err
		},
	}))
	if err != nil {
		return fail("Spawn: %v", err)
	}
	select {
	case <-started:
	case <-sctx.Done():
		return fail("the stream did not start: %v", sctx.Err())
	}
	if _, err := cl.Database(db).Collection("workers").InsertOne(sctx, bson.D{{Key: "_id", Value: run}}); err != nil {
		return fail("ready: %v", err)
	}
	<-ctx.Done() // SIGTERM
	stopCtx, cancelStop := context.WithTimeout(context.Background(), waitLimit)
	defer cancelStop()
	if err := rt.Stop(stopCtx); err != nil {
		return fail("Stop: %v", err)
	}
	return 0
}
