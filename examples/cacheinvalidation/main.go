// Command cacheinvalidation shows cache invalidation on every instance: two instances of a web
// service each keep a read-through cache of product prices in memory, and each runs the same
// ALL_INSTANCES stream on products that evicts a product's entry whenever its document changes,
// so the next read on every instance sees the new price.
//
// The stream is Ephemeral: a cache in memory is empty after a restart anyway, so no instance
// writes a checkpoint (N instances would pay N × the writes for a position nobody resumes from),
// and every start begins at the current position.
//
// Run it with `go run ./examples/cacheinvalidation`: on MONGODB_URI (a replica set) when set,
// else on an embedded mongosim. It works in the database watchtree_example_cache, dropped first.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/test/mongosim"
)

const dbName = "watchtree_example_cache"

// Product is a document of the products collection.
type Product struct {
	ID    int     `bson:"_id"`
	Price float64 `bson:"price"`
}

// cache is one instance's read-through cache of prices.
type cache struct {
	name     string
	products *mongo.Collection
	mu       sync.Mutex
	prices   map[int]float64
}

// price returns a product's price, from memory when cached, and says where it came from.
func (c *cache) price(ctx context.Context, id int) (float64, string, error) {
	c.mu.Lock()
	p, ok := c.prices[id]
	c.mu.Unlock()
	if ok {
		return p, "cache", nil
	}
	var doc Product
	if err := c.products.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&doc); err != nil {
		return 0, "", err
	}
	c.mu.Lock()
	c.prices[id] = doc.Price
	c.mu.Unlock()
	return doc.Price, "database", nil
}

func (c *cache) cached(id int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.prices[id]
	return ok
}

// evict is the stream's handler: any change to a product drops its entry.
func (c *cache) evict(ctx context.Context, ev *watchtree.Event[Product]) error {
	if id, ok := ev.DocumentID().AsInt64OK(); ok {
		c.mu.Lock()
		delete(c.prices, int(id))
		c.mu.Unlock()
	}
	return nil
}

func main() {
	if err := run(context.Background(), os.Getenv("MONGODB_URI"), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, uri string, out io.Writer) error {
	if uri == "" {
		srv, err := mongosim.Start(ctx, mongosim.Options{})
		if err != nil {
			return err
		}
		defer srv.Close()
		uri = srv.URI()
	}
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		return err
	}
	defer client.Disconnect(context.Background())
	if err := client.Database(dbName).Drop(ctx); err != nil {
		return err
	}
	products := client.Database(dbName).Collection("products")
	if _, err := products.InsertMany(ctx, []Product{{1, 9.99}, {2, 4.5}}); err != nil {
		return err
	}

	var caches []*cache
	for _, name := range []string{"web-1", "web-2"} { // two pods of one service
		rt, err := watchtree.New(watchtree.Config{Client: client, Database: dbName, InstanceName: name})
		if err != nil {
			return err
		}
		if err := rt.Start(ctx); err != nil {
			return err
		}
		defer rt.Stop(context.Background())
		c := &cache{name: name, products: products, prices: map[int]float64{}}
		if _, err := rt.Spawn(ctx, watchtree.Stream[Product]{
			Name:       "price-cache",
			Collection: "products",
			Checkpoint: watchtree.CheckpointPolicy{Ephemeral: true}, // no position stored
			OnChange:   c.evict,
		}); err != nil {
			return err
		}
		caches = append(caches, c)
	}
	read := func() error {
		for _, c := range caches {
			for _, id := range []int{1, 2} {
				p, from, err := c.price(ctx, id)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "%s: product %d costs %.2f (from the %s)\n", c.name, id, p, from)
			}
		}
		return nil
	}
	if err := read(); err != nil { // fills both caches
		return err
	}
	if _, err := products.UpdateByID(ctx, 1, bson.D{{Key: "$set", Value: bson.D{{Key: "price", Value: 11.49}}}}); err != nil {
		return err
	}
	for _, c := range caches { // every instance evicts product 1
		for deadline := time.Now().Add(10 * time.Second); c.cached(1); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				return fmt.Errorf("%s did not evict product 1 within 10s", c.name)
			}
		}
		fmt.Fprintf(out, "%s evicted product 1\n", c.name)
	}
	return read() // product 1 from the database again, product 2 still cached
}
