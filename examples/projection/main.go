// Command projection shows two projections of the same orders.
//
// The idempotent one: every order, those that existed before the stream started included
// (Snapshot: SnapshotInitial), is kept in step in a read model. Orders carry a version v, +1 on
// every write, and the read model refuses a version older than its own, so an event delivered
// again after a crash, or a change that arrives after the snapshot copied the newer document,
// never moves a view back in time.
//
// The transactional one: how many times orders entered each status, counted with $inc, which is
// not idempotent. The stream is Transactional: each $inc commits in one transaction with the
// event's applied record, so a redelivery is skipped instead of counted twice. Run it with `go run ./examples/projection`
// (on MONGODB_URI when set, else an embedded mongosim; it drops watchtree_example_projection first).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/test/mongosim"
)

const dbName = "watchtree_example_projection"

// Order is both the source document and its view.
type Order struct {
	ID     int    `bson:"_id"`
	Status string `bson:"status"`
	V      int    `bson:"v"` // version: +1 on every write
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
	db := client.Database(dbName)
	if err := db.Drop(ctx); err != nil { // an earlier run's orders, views and checkpoint
		return err
	}
	orders, views := db.Collection("orders"), db.Collection("order_views")
	// Orders that exist before the stream starts: the snapshot copies them.
	if _, err := orders.InsertMany(ctx, []Order{{1, "new", 1}, {2, "new", 1}, {3, "new", 1}}); err != nil {
		return err
	}
	rt, err := watchtree.New(watchtree.Config{Client: client, Database: dbName})
	if err != nil {
		return err
	}
	if err := rt.Start(ctx); err != nil {
		return err
	}
	defer rt.Stop(context.Background())

	rm := readModel{views}
	_, err = rt.Spawn(ctx, watchtree.Stream[Order]{
		Name:         "order-views",
		Collection:   "orders",
		Lanes:        4, // ordered per order, parallel across orders
		FullDocument: watchtree.FullDocumentUpdateLookup,
		Snapshot:     watchtree.SnapshotPolicy{Mode: watchtree.SnapshotInitial},
		OnSnapshot:   rm.upsert,
		OnDelete:     rm.delete,
		OnChange:     rm.upsert, // inserts, updates and replaces
	})
	if err != nil {
		return err
	}
	// The transactional projection: status counts, exactly once (the handler's ctx carries the
	// transaction; counts must use client, the runtime's Config.Client).
	counts := db.Collection("status_counts")
	if err := db.CreateCollection(ctx, counts.Name()); err != nil { // before the transactions
		return err
	}
	entered := func(ctx context.Context, status string) error {
		_, err := counts.UpdateOne(ctx, bson.D{{Key: "_id", Value: status}},
			bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
		return err
	}
	_, err = rt.Spawn(ctx, watchtree.Stream[Order]{
		Name:          "status-counts",
		Collection:    "orders",
		Lanes:         4,
		Transactional: true,
		TxBatch:       watchtree.TxBatchPolicy{MaxEvents: 64}, // a backlog commits 64 events at a time
		OnInsert: func(ctx context.Context, ev *watchtree.Event[Order]) error {
			return entered(ctx, ev.FullDocument.Status)
		},
		OnUpdate: func(ctx context.Context, ev *watchtree.Event[Order]) error {
			// The update's own status (not the looked-up document, which may be newer).
			if st, ok := ev.UpdateDescription.UpdatedFields.Lookup("status").StringValueOK(); ok {
				return entered(ctx, st)
			}
			return nil
		},
	})
	if err != nil {
		return err
	}
	// Changes during (or after) the copy, in this order; every write bumps the version.
	status := func(st string) bson.D {
		return bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: st}}}, {Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}}
	}
	if _, err := orders.BulkWrite(ctx, []mongo.WriteModel{
		mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 1}}).SetUpdate(status("paid")),
		mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 1}}).SetUpdate(status("shipped")),
		mongo.NewInsertOneModel().SetDocument(Order{ID: 4, Status: "new", V: 1}),
		mongo.NewDeleteOneModel().SetFilter(bson.D{{Key: "_id", Value: 2}}),
	}); err != nil {
		return err
	}
	// Since the status stream started: order 4 entered new, order 1 paid then shipped.
	wantCounts := []statusCount{{"new", 1}, {"paid", 1}, {"shipped", 1}}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		want, err1 := all(ctx, orders)
		got, err2 := all(ctx, views)
		gotCounts, err3 := statusCounts(ctx, counts)
		if err := errors.Join(err1, err2, err3); err != nil {
			return err
		}
		if slices.Equal(got, want) && slices.Equal(gotCounts, wantCounts) {
			for _, o := range got {
				fmt.Fprintf(out, "order %d: %s (v%d)\n", o.ID, o.Status, o.V)
			}
			for _, c := range gotCounts {
				fmt.Fprintf(out, "entered %s: %d\n", c.Status, c.N)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("order_views %v did not match orders %v, or status_counts %v not %v, within 10s", got, want, gotCounts, wantCounts)
		}
	}
}

// readModel is the projection's target: one view per order, never older than one it holds.
type readModel struct{ views *mongo.Collection }

// upsert writes the order's view unless the view already holds this version or a newer one:
// the filter then matches nothing and the upsert's insert collides with the existing _id.
func (rm readModel) upsert(ctx context.Context, ev *watchtree.Event[Order]) error {
	o := ev.FullDocument
	if o == nil { // deleted before the update's lookup (its delete follows), or a drop
		return nil
	}
	_, err := rm.views.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: o.ID}, {Key: "v", Value: bson.D{{Key: "$lt", Value: o.V}}}},
		bson.D{{Key: "$set", Value: o}}, options.UpdateOne().SetUpsert(true))
	if mongo.IsDuplicateKeyError(err) {
		return nil // older than the view: dropped
	}
	return err
}

// delete drops the view of a deleted order.
func (rm readModel) delete(ctx context.Context, ev *watchtree.Event[Order]) error {
	_, err := rm.views.DeleteOne(ctx, bson.D{{Key: "_id", Value: ev.DocumentID()}})
	return err
}

// all returns a collection's orders in _id order.
func all(ctx context.Context, c *mongo.Collection) ([]Order, error) {
	cur, err := c.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, err
	}
	var docs []Order
	return docs, cur.All(ctx, &docs)
}

// statusCount is one status's count of orders that entered it.
type statusCount struct {
	Status string `bson:"_id"`
	N      int    `bson:"n"`
}

// statusCounts returns the status counts in status order.
func statusCounts(ctx context.Context, c *mongo.Collection) ([]statusCount, error) {
	cur, err := c.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, err
	}
	var docs []statusCount
	return docs, cur.All(ctx, &docs)
}
