// Command quickstart is the README's Quickstart, as a program: it charges every new order once.
// Run it with `go run ./cmd/quickstart`; it uses MONGODB_URI (a replica set) when set, and an
// embedded mongosim otherwise.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/test/mongosim"
)

type Order struct {
	ID     int     `bson:"_id"`
	Amount float64 `bson:"amount"`
}

func main() {
	if err := run(context.Background(), os.Getenv("MONGODB_URI"), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, uri string, out io.Writer) error {
	if uri == "" { // no replica set at hand: an in-process one
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

	rt, err := watchtree.New(watchtree.Config{
		Client:   client,
		Database: "quickstart", // where checkpoints, dead letters and gap records live
		Logger:   zap.NewNop(), // your *zap.Logger; protoactor's own logs are bridged into it
	})
	if err != nil {
		return err // a *watchtree.ConfigError naming the field
	}
	if err := rt.Start(ctx); err != nil {
		return err // watchtree.ErrUnreachable within Config.ConnectTimeout (10s)
	}
	defer rt.Stop(context.Background()) // drain, write the final checkpoints, stop

	h, err := rt.Spawn(ctx, watchtree.Stream[Order]{
		Name:       "charge-orders", // identity of the checkpoint and the dead letters
		Collection: "orders",
		Lanes:      8, // ordered per document, parallel across documents
		OnInsert: func(ctx context.Context, ev *watchtree.Event[Order]) error {
			// ev.ID() is the same when an event is delivered again: use it as an idempotency key.
			fmt.Fprintf(out, "charging order %d: %.2f\n", ev.FullDocument.ID, ev.FullDocument.Amount)
			return nil
		},
	})
	if err != nil {
		return err // a bad Pipeline or an unreachable server fails here, with the cause
	}
	// Spawn returned: the stream's position is fixed, so every write from now on is delivered.
	orders := client.Database("quickstart").Collection("orders")
	if _, err := orders.DeleteMany(ctx, bson.D{}); err != nil { // orders of an earlier run
		return err
	}
	for i, amount := range []float64{12.5, 30, 7.25} {
		if _, err := orders.InsertOne(ctx, bson.D{{Key: "_id", Value: i + 1}, {Key: "amount", Value: amount}}); err != nil {
			return err
		}
	}
	// Returns once every write committed before the call is handled (30s at most here).
	if err := h.AwaitCaughtUp(ctx); err != nil {
		return err
	}
	// A graceful stop: in-flight events finish and the final position is written, so nothing
	// handled so far is delivered again when the stream starts next time.
	if err := h.Stop(ctx); err != nil {
		return err
	}
	st, err := h.Status(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "stream %s is %s: %d events handled, checkpoint written at %s\n",
		st.Name, st.State, st.Handled, st.CheckpointAt.Format(time.RFC3339))
	return nil
}
