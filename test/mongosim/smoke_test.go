package mongosim

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func TestSmokeHandshakePing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cl, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Disconnect(context.Background())
	if err := cl.Ping(ctx, nil); err != nil {
		t.Fatal(err)
	}
	var res bson.M
	if err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&res); err != nil {
		t.Fatal(err)
	}
	t.Log(res["version"])
	err = cl.Database("admin").RunCommand(ctx, bson.D{{Key: "nope", Value: 1}}).Err()
	t.Log(err)
}
