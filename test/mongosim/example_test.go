package mongosim_test

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree/test/mongosim"
)

// A test starts its own simulated replica set, points the unchanged driver at srv.URI(),
// and closes the server when done. In a real test, use t.Cleanup(func() { srv.Close() }).
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	srv, err := mongosim.Start(ctx, mongosim.Options{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		panic(err)
	}
	defer client.Disconnect(context.Background())

	orders := client.Database("shop").Collection("orders")
	stream, err := orders.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		panic(err)
	}
	defer stream.Close(context.Background())

	if _, err := orders.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "item", Value: "book"}}); err != nil {
		panic(err)
	}
	if !stream.Next(ctx) {
		panic(stream.Err())
	}
	var ev struct {
		OperationType string `bson:"operationType"`
		FullDocument  bson.M `bson:"fullDocument"`
	}
	if err := stream.Decode(&ev); err != nil {
		panic(err)
	}
	fmt.Println(ev.OperationType, ev.FullDocument["item"])
	// Output: insert book
}

// Fault injection reads like the MongoDB specification tests: the next insert fails once
// with a retryable error, and the driver's automatic retry makes it succeed. The same fail
// point can be configured over the wire with the configureFailPoint command on admin.
func ExampleServer_ConfigureFailPoint() {
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

	err = srv.ConfigureFailPoint(bson.D{
		{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "errorCode", Value: 91}}},
	})
	if err != nil {
		panic(err)
	}
	_, err = client.Database("shop").Collection("orders").InsertOne(ctx, bson.D{{Key: "item", Value: "pen"}})
	fmt.Println("insert error:", err)
	fmt.Println("attempts seen by the server:", len(srv.CommandsNamed("insert")))
	// Output:
	// insert error: <nil>
	// attempts seen by the server: 2
}
