package main

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/goleak"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/test/mongosim"
)

// TestMain: the program leaves no goroutine behind once run returned.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestProjection: the orders that existed before the stream and every later change end up in
// order_views, document for document and version for version; the transactional stream counts
// each status entered once; and the program prints them.
func TestProjection(t *testing.T) {
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
	want := "order 1: shipped (v3)\norder 3: new (v1)\norder 4: new (v1)\nentered new: 1\nentered paid: 1\nentered shipped: 1\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}

	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(ctx)
	db := client.Database(dbName)
	src, err := all(ctx, db.Collection("orders"))
	if err != nil {
		t.Fatal(err)
	}
	view, err := all(ctx, db.Collection("order_views"))
	if err != nil {
		t.Fatal(err)
	}
	if len(view) != 3 || len(src) != len(view) {
		t.Fatalf("order_views %v, orders %v: want the same 3 orders", view, src)
	}
	for i := range src {
		if src[i] != view[i] {
			t.Errorf("view %d = %+v, source %+v", i, view[i], src[i])
		}
	}

	// The target refuses an older version: order 1's first state, delivered again (as after a
	// crash), leaves its view at v3.
	rm := readModel{db.Collection("order_views")}
	if err := rm.upsert(ctx, &watchtree.Event[Order]{FullDocument: &Order{ID: 1, Status: "new", V: 1}}); err != nil {
		t.Fatalf("upsert of an older version: %v, want nil (dropped)", err)
	}
	if err := rm.upsert(ctx, &watchtree.Event[Order]{FullDocument: &Order{ID: 3, Status: "paid", V: 2}}); err != nil {
		t.Fatalf("upsert of a newer version: %v", err)
	}
	view, err = all(ctx, db.Collection("order_views"))
	if err != nil {
		t.Fatal(err)
	}
	if view[0] != (Order{ID: 1, Status: "shipped", V: 3}) || view[1] != (Order{ID: 3, Status: "paid", V: 2}) {
		t.Errorf("after an older and a newer version, views = %+v: want order 1 kept at v3, order 3 at v2", view)
	}
}
