package watchtree_test

import (
	"context"
	"fmt"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/test/mongosim"
)

type Order struct {
	ID     int     `bson:"_id"`
	Amount float64 `bson:"amount"`
}

// A stream that charges every new order once. The handler is idempotent by ev.ID(), which
// stays the same when an event is delivered again after a crash. mongosim stands in for the
// replica set; with a real one, pass its client instead.
func Example() {
	ctx := context.Background()
	srv, err := mongosim.Start(ctx, mongosim.Options{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		panic(err)
	}
	defer client.Disconnect(ctx)

	rt, err := watchtree.New(watchtree.Config{Client: client, Database: "shop"})
	if err != nil {
		panic(err)
	}
	if err := rt.Start(ctx); err != nil {
		panic(err)
	}
	defer rt.Stop(ctx)

	charged := make(chan string, 3)
	_, err = rt.Spawn(ctx, watchtree.Stream[Order]{
		Name:       "orders",
		Collection: "orders",
		OnInsert: func(ctx context.Context, ev *watchtree.Event[Order]) error {
			charged <- fmt.Sprintf("charged order %d: %.2f", ev.FullDocument.ID, ev.FullDocument.Amount)
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
	// Spawn returned: the stream's position is fixed, every write from now on is delivered.
	orders := client.Database("shop").Collection("orders")
	for i, amount := range []float64{12.5, 30, 7.25} {
		if _, err := orders.InsertOne(ctx, bson.D{{Key: "_id", Value: i + 1}, {Key: "amount", Value: amount}}); err != nil {
			panic(err)
		}
	}
	for range 3 {
		fmt.Println(<-charged)
	}
	// Output:
	// charged order 1: 12.50
	// charged order 2: 30.00
	// charged order 3: 7.25
}

// Cache invalidation on every instance: each process keeps prices in memory and drops an entry
// when its document changes. The stream runs on every instance (AllInstances, the default) and is
// Ephemeral: the cache is rebuilt at start, so no instance writes a checkpoint, and every start
// begins at the current position. InstanceName (default: the hostname, the pod name on
// Kubernetes) names the instance in logs and in its dead letters.
func ExampleCheckpointPolicy_ephemeral() {
	ctx := context.Background()
	srv, err := mongosim.Start(ctx, mongosim.Options{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		panic(err)
	}
	defer client.Disconnect(ctx)

	rt, err := watchtree.New(watchtree.Config{Client: client, Database: "shop", InstanceName: "web-1"})
	if err != nil {
		panic(err)
	}
	if err := rt.Start(ctx); err != nil {
		panic(err)
	}
	defer rt.Stop(ctx)

	var cache sync.Map // product id -> price, filled on reads, rebuilt at start
	cache.Store(1, 9.99)
	invalidated := make(chan int, 1)
	_, err = rt.Spawn(ctx, watchtree.Stream[bson.Raw]{
		Name:       "price-cache",
		Collection: "prices",
		Checkpoint: watchtree.CheckpointPolicy{Ephemeral: true},
		// Lost history (the default for Ephemeral is ResumeFromNow): forget everything, then
		// follow the changes from now on.
		OnHistoryLost: watchtree.Rebuild(func(context.Context) error { cache.Clear(); return nil }),
		OnChange: func(ctx context.Context, ev *watchtree.Event[bson.Raw]) error {
			id, _ := ev.DocumentID().AsInt64OK()
			cache.Delete(int(id))
			invalidated <- int(id)
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
	prices := client.Database("shop").Collection("prices")
	if _, err := prices.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "price", Value: 11.49}}); err != nil {
		panic(err)
	}
	id := <-invalidated
	_, cached := cache.Load(id)
	n, _ := client.Database("shop").Collection("_wt_checkpoints").CountDocuments(ctx, bson.D{})
	fmt.Printf("product %d invalidated, still cached: %v, checkpoints written: %d\n", id, cached, n)
	// Output:
	// product 1 invalidated, still cached: false, checkpoints written: 0
}
