package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/mongostore"
	"github.com/watchtree/watchtree/test/mongosim"
)

// benchDB is the database every benchmark works in (one mongosim server per benchmark).
const benchDB = "bench"

// order is the T of the benchmark streams: a small order document.
type order struct {
	ID     bson.ObjectID `bson:"_id"`
	I      int64         `bson:"i"`
	Status string        `bson:"status"`
	Amount float64       `bson:"amount"`
}

// startMongosim starts an in-process mongosim and connects a client to it; cleanup disconnects
// the client, then closes the server.
func startMongosim(b *testing.B) (*mongosim.Server, *mongo.Client) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := mongosim.Start(ctx, mongosim.Options{})
	if err != nil {
		b.Fatalf("mongosim.Start: %v", err)
	}
	b.Cleanup(func() { _ = srv.Close() })
	waitNextSecond()
	return srv, connect(b, srv.URI(), nil)
}

// waitNextSecond sleeps until the next wall-clock second, so that startPoint's second is not a
// server's first one: a new server's history starts at {start second, 1}, and a start at
// {start second, 0} would be history lost. Call it after the server has started.
func waitNextSecond() { time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second))) }

// connect connects a driver client to uri; configure may adjust the options. A 500ms heartbeat
// (the driver's minimum) bounds driver v2.10.0's Disconnect race with an awaitable hello.
// Cleanup disconnects it.
func connect(b *testing.B, uri string, configure func(*options.ClientOptions)) *mongo.Client {
	b.Helper()
	o := options.Client().ApplyURI(uri).SetHeartbeatInterval(500 * time.Millisecond)
	if configure != nil {
		configure(o)
	}
	cl, err := mongo.Connect(o)
	if err != nil {
		b.Fatalf("mongo.Connect: %v", err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = cl.Disconnect(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.Ping(ctx, nil); err != nil {
		b.Fatalf("ping: %v", err)
	}
	return cl
}

// insertOrders inserts n orders into coll, 1,000 per InsertMany.
func insertOrders(b *testing.B, coll *mongo.Collection, n int) {
	b.Helper()
	const batch = 1000
	docs := make([]any, 0, batch)
	for i := range n {
		docs = append(docs, order{ID: bson.NewObjectID(), I: int64(i), Status: "new", Amount: 12.5})
		if len(docs) == batch || i == n-1 {
			if _, err := coll.InsertMany(context.Background(), docs); err != nil {
				b.Fatalf("insert: %v", err)
			}
			docs = docs[:0]
		}
	}
}

// startPoint returns a start time for watchtree.At and startAtOperationTime that precedes every
// write made after the call: mongosim's cluster time is the wall-clock second (plus a counter),
// and both options have second precision. Streams started there on a fresh collection see
// exactly the writes made to it after the call.
func startPoint() time.Time { return time.Now().Truncate(time.Second) }

// newRuntime creates and starts a runtime on cl and benchDB with obs (nil: none); cleanup stops
// it gracefully.
func newRuntime(b *testing.B, cl *mongo.Client, obs observe.Observer) *watchtree.Runtime {
	b.Helper()
	rt, stop := startRuntime(b, cl, obs)
	b.Cleanup(stop)
	return rt
}

// startRuntime creates and starts a runtime on cl and benchDB with obs (nil: none), and returns
// it with a function that stops it gracefully (once; later calls do nothing).
func startRuntime(b *testing.B, cl *mongo.Client, obs observe.Observer) (*watchtree.Runtime, func()) {
	b.Helper()
	rt, err := watchtree.New(watchtree.Config{Client: cl, Database: benchDB, Observer: obs})
	if err != nil {
		b.Fatalf("watchtree.New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rt.Start(ctx); err != nil {
		b.Fatalf("Runtime.Start: %v", err)
	}
	var once sync.Once
	return rt, func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := rt.Stop(ctx); err != nil {
				b.Errorf("Runtime.Stop: %v", err)
			}
		})
	}
}

// stopHandle stops one stream gracefully (drain, final checkpoint).
func stopHandle(b *testing.B, h *watchtree.Handle) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.Stop(ctx); err != nil {
		b.Fatalf("stop %s: %v", h.Name(), err)
	}
}

// countdown closes done when its n-th tick arrives.
type countdown struct {
	n    int64
	got  atomic.Int64
	done chan struct{}
}

func newCountdown(n int) *countdown { return &countdown{n: int64(n), done: make(chan struct{})} }

func (c *countdown) tick() {
	if c.got.Add(1) == c.n {
		close(c.done)
	}
}

// wait blocks until the n-th tick, failing the benchmark after stallAfter.
func (c *countdown) wait(b *testing.B, what string) {
	b.Helper()
	select {
	case <-c.done:
	case <-time.After(stallAfter):
		b.Fatalf("%s: stalled after %d of %d events", what, c.got.Load(), c.n)
	}
}

// newMongoLeases returns the default MongoDB lease store on cl's database db.
func newMongoLeases(cl *mongo.Client, db string) (store.LeaseStore, error) {
	return mongostore.New(cl.Database(db), mongostore.Options{})
}
