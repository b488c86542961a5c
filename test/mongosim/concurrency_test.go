package mongosim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/goleak"
)

// concEvent is the part of an insert event the concurrency tests check.
type concEvent struct {
	OperationType string `bson:"operationType"`
	FullDocument  struct {
		W int32 `bson:"w"`
		I int32 `bson:"i"`
	} `bson:"fullDocument"`
}

func TestConcurrencyManyStreamsConcurrentWriters(t *testing.T) {
	const (
		clients = 6
		streams = 300 // in total, spread over the clients
		writers = 4
		perW    = 25
	)
	srv, _ := startServer(t, Options{})
	// 30,000 events decoded under -race: a few seconds on a quiet machine, several times the
	// package's usual budget on a loaded one. The test asserts delivery, not speed, so its
	// bound only has to catch a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 6*testTimeout)
	t.Cleanup(cancel)
	var cls []*mongo.Client
	for i := 0; i < clients; i++ {
		// Every waiting change-stream getMore holds a pooled connection.
		cls = append(cls, connectClient(t, srv, func(o *options.ClientOptions) { o.SetMaxPoolSize(streams/clients + 10) }))
	}
	var css []*mongo.ChangeStream
	for i := 0; i < streams; i++ {
		cs, err := cls[i%clients].Database("conc").Collection("c").Watch(ctx, mongo.Pipeline{},
			options.ChangeStream().SetMaxAwaitTime(500*time.Millisecond))
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		css = append(css, cs)
	}
	t.Cleanup(func() {
		for _, cs := range css {
			_ = cs.Close(context.Background())
		}
	})

	// Readers: each stream must see every insert exactly once, each writer's in order.
	var wg sync.WaitGroup
	errs := make(chan error, streams+writers)
	for si, cs := range css {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := make([]int32, writers)
			for n := 0; n < writers*perW; n++ {
				if !cs.Next(ctx) {
					errs <- fmt.Errorf("stream %d after %d events: %v", si, n, cs.Err())
					return
				}
				var ev concEvent
				if err := cs.Decode(&ev); err != nil {
					errs <- err
					return
				}
				w, i := ev.FullDocument.W, ev.FullDocument.I
				if ev.OperationType != "insert" || w < 0 || int(w) >= writers || i != next[w] {
					errs <- fmt.Errorf("stream %d: event %s w=%d i=%d, want i=%d", si, ev.OperationType, w, i, next[w])
					return
				}
				next[w]++
			}
		}()
	}
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			coll := cls[w%clients].Database("conc").Collection("c")
			for i := 0; i < perW; i++ {
				if _, err := coll.InsertOne(ctx, bson.D{{Key: "w", Value: int32(w)}, {Key: "i", Value: int32(i)}}); err != nil {
					errs <- fmt.Errorf("writer %d: %v", w, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := srv.ConnectionCount(); n < streams {
		t.Errorf("%d connections open, want at least one per stream (%d)", n, streams)
	}
}

func TestConcurrencyParallelCRUDAcrossConnections(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("conc").Collection("crud")
	other := connectClient(t, srv, nil).Database("conc").Collection("crud")
	const workers, ops = 16, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		c := coll
		if w%2 == 1 {
			c = other
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < ops; i++ {
				id := fmt.Sprintf("%d-%d", w, i)
				if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "n", Value: 0}}); err != nil {
					errs <- err
					return
				}
				if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}); err != nil {
					errs <- err
					return
				}
				// A shared counter document contended by every worker.
				if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: "shared"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}},
					options.UpdateOne().SetUpsert(true)); err != nil {
					errs <- err
					return
				}
				var got struct{ N int32 }
				if err := c.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&got); err != nil || got.N != 1 {
					errs <- fmt.Errorf("read back %s: n=%d err=%v", id, got.N, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var shared struct{ N int32 }
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "shared"}}).Decode(&shared); err != nil {
		t.Fatal(err)
	}
	if shared.N != workers*ops {
		t.Errorf("shared counter %d, want %d (lost updates)", shared.N, workers*ops)
	}
	if n := countDocs(t, cl, "conc", "crud"); n != workers*ops+1 {
		t.Errorf("%d documents, want %d", n, workers*ops+1)
	}
}

// oplogLen returns the number of retained oplog entries and the ring's allocated slots.
func oplogLen(s *Server) (n, slots int) {
	s.eng.mu.Lock()
	defer s.eng.mu.Unlock()
	return s.eng.oplog.len(), len(s.eng.oplog.ring)
}

func TestConcurrencyOplogBoundedByCapacity(t *testing.T) {
	const capacity = 100
	srv, cl := startServer(t, Options{OplogCapacity: capacity})
	ctx := testCtx(t)
	coll := cl.Database("conc").Collection("bounded")

	// A watcher that never reads keeps no entries alive: it falls off the history instead.
	slow, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close(context.Background())

	const total = 5000
	batch := make([]any, 0, 500)
	for i := 0; i < total; i++ {
		batch = append(batch, bson.D{{Key: "_id", Value: int32(i)}, {Key: "pad", Value: "xxxxxxxxxxxxxxxx"}})
		if len(batch) == cap(batch) {
			if _, err := coll.InsertMany(ctx, batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
			if n, slots := oplogLen(srv); n > capacity || slots > capacity {
				t.Fatalf("after %d inserts the oplog holds %d entries in %d slots, capacity %d", i+1, n, slots, capacity)
			}
		}
	}
	n, slots := oplogLen(srv)
	if n != capacity || slots != capacity {
		t.Fatalf("oplog holds %d entries in %d slots, want exactly %d", n, slots, capacity)
	}
	srv.eng.mu.Lock()
	newest := srv.eng.oplog.at(capacity - 1).seq
	oldest := srv.eng.oplog.at(0).seq
	srv.eng.mu.Unlock()
	if newest-oldest != capacity-1 || newest < total {
		t.Errorf("retained seqs %d..%d, want the newest %d of %d", oldest, newest, capacity, total)
	}
	if slow.Next(ctx) {
		t.Fatal("a watcher that fell behind the retained history must not get events")
	}
	var ce mongo.CommandError
	if !errors.As(slow.Err(), &ce) || ce.Code != codeChangeStreamHistoryLost {
		t.Fatalf("want ChangeStreamHistoryLost (286), got %v", slow.Err())
	}
	if !ce.HasErrorLabel("NonResumableChangeStreamError") && len(ce.Labels) != 0 {
		t.Errorf("history lost labels %v", ce.Labels)
	}
}

func TestConcurrencyStartCloseClean(t *testing.T) {
	// Servers closed with clients still connected, change streams waiting in getMore and a
	// stepdown timer pending leave no goroutine behind, and Close does not wait for awaits.
	for round := 0; round < 5; round++ {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		srv, err := Start(ctx, Options{})
		if err != nil {
			t.Fatal(err)
		}
		cl, err := mongo.Connect(options.Client().ApplyURI(srv.URI()).SetHeartbeatInterval(500 * time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		coll := cl.Database("conc").Collection("close")
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "x", Value: round}}); err != nil {
			t.Fatal(err)
		}
		cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		nextDone := make(chan bool)
		nextCtx, nextCancel := context.WithTimeout(ctx, 3*time.Second)
		go func() { nextDone <- cs.Next(nextCtx) }()
		waitFor(t, 5*time.Second, "the getMore to wait on the server", func() bool {
			return srv.ConnectionCount() >= 2 && len(srv.CommandsNamed("aggregate")) == 1
		})
		_ = srv.StepDown(time.Hour)
		srv.Resume()
		start := time.Now()
		var wg sync.WaitGroup
		for i := 0; i < 3; i++ { // Close is idempotent and safe to race
			wg.Add(1)
			go func() { defer wg.Done(); _ = srv.Close() }()
		}
		wg.Wait()
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Close took %s with a getMore waiting", d)
		}
		if srv.ConnectionCount() != 0 {
			t.Errorf("%d connections after Close", srv.ConnectionCount())
		}
		if <-nextDone {
			t.Error("the waiting change stream must fail when the server closes")
		}
		nextCancel()
		_ = cs.Close(context.Background())
		// With the server gone, Disconnect's endSessions waits for server selection until its
		// context ends (driver behaviour); bound it, the client still closes everything.
		dctx, dcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_ = cl.Disconnect(dctx)
		dcancel()
		cancel()
		if c, err := net.DialTimeout("tcp", srv.Addr(), time.Second); err == nil {
			_ = c.Close()
			t.Error("the listener must be closed")
		}
	}
	goleak.VerifyNone(t)
}
