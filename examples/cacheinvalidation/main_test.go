package main

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/goleak"

	"github.com/watchtree/watchtree/test/mongosim"
)

// TestMain: the program leaves no goroutine behind once run returned.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCacheInvalidation: after the update of product 1, both instances evict it and read the new
// price from the database, product 2 stays cached on both, and no checkpoint is written.
func TestCacheInvalidation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	uri := os.Getenv("WATCHTREE_MONGODB_URI")
	if uri == "" {
		srv, err := mongosim.Start(ctx, mongosim.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		uri = srv.URI()
	}
	var out bytes.Buffer
	if err := run(ctx, uri, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	want := `web-1: product 1 costs 9.99 (from the database)
web-1: product 2 costs 4.50 (from the database)
web-2: product 1 costs 9.99 (from the database)
web-2: product 2 costs 4.50 (from the database)
web-1 evicted product 1
web-2 evicted product 1
web-1: product 1 costs 11.49 (from the database)
web-1: product 2 costs 4.50 (from the cache)
web-2: product 1 costs 11.49 (from the database)
web-2: product 2 costs 4.50 (from the cache)
`
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}

	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(ctx)
	n, err := client.Database(dbName).Collection("_wt_checkpoints").CountDocuments(ctx, bson.D{})
	if err != nil || n != 0 {
		t.Errorf("%d checkpoints written (err %v), want none: the stream is Ephemeral", n, err)
	}
}
