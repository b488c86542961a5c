// Command cacheinvalidation shows cache invalidation on every instance: two instances of a web
// service each keep a read-through cache of prices in memory and run the same AllInstances
// stream on products, which evicts a product's entry whenever its document changes, so the next
// read on every instance sees the new price. The stream is Ephemeral: a cache in memory is empty
// after a restart anyway, so no instance writes a checkpoint (N instances would pay N × the writes
// for a position nobody resumes from), and every start begins at the current position.
// Run it with `go run ./examples/cacheinvalidation` (on MONGODB_URI when set, else an embedded
// mongosim; it drops watchtree_example_cache first).
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

// cache is one instance's read-through cache of prices (product ID → price). A read that races
// an eviction can store the old price; a version check or a short TTL closes that window.
type cache struct {
	name     string
	products *mongo.Collection
	prices   sync.Map
}

// price returns a product's price, from memory when cached, and says where it came from.
func (c *cache) price(ctx context.Context, id int) (float64, string, error) {
	if p, ok := c.prices.Load(id); ok {
		return p.(float64), "cache", nil
	}
	var doc Product
	if err := c.products.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&doc); err != nil {
		return 0, "", err
	}
	c.prices.Store(id, doc.Price)
	return doc.Price, "database", nil
}

// evict is the stream's handler: any change to a product drops its entry.
func (c *cache) evict(ctx context.Context, ev *watchtree.Event[Product]) error {
	id, _ := ev.DocumentID().AsInt64OK()
	c.prices.Delete(int(id))
	return nil
}

// forget empties the cache: its OnHistoryLost rebuild, after changes were missed.
func (c *cache) forget(context.Context) error {
	c.prices.Clear()
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
		c := &cache{name: name, products: products}
		if _, err := rt.Spawn(ctx, watchtree.Stream[Product]{
			Name:       "price-cache",
			Collection: "products",
			Checkpoint: watchtree.CheckpointPolicy{Ephemeral: true}, // no position stored
			// Lost history (the cursor fell out of the oplog): the cache may hold prices that
			// changed meanwhile, so it forgets them all. (Left out, an Ephemeral stream records
			// the gap and resumes from now: ResumeFromNow.)
			OnHistoryLost: watchtree.Rebuild(c.forget),
			OnChange:      c.evict,
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
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, cached := c.prices.Load(1); !cached {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s did not evict product 1 within 10s", c.name)
			}
		}
		fmt.Fprintf(out, "%s evicted product 1\n", c.name)
	}
	return read() // product 1 from the database again, product 2 still cached
}
