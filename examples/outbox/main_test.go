package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
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

// syncBuffer is an io.Writer safe for the handler's lanes and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// TestOutbox: each of the ten messages is published exactly once, the first five by the leader,
// the rest by the other instance after the leader's graceful stop, and every message is marked
// sent. No instance other than the leader publishes while it leads, and no message reaches the
// broker twice.
func TestOutbox(t *testing.T) {
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
	var out syncBuffer
	if err := run(ctx, uri, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.b.String())
	}
	got := out.b.String()

	// A graceful handover redelivers nothing: the new leader starts after the final checkpoint,
	// so the broker never has a duplicate to drop.
	if strings.Contains(got, "dropped as a duplicate") {
		t.Errorf("a message was delivered twice across a graceful handover:\n%s", got)
	}
	publishedBy := map[int][]string{}
	for _, m := range regexp.MustCompile(`(?m)^(relay-[ab]) published message (\d+) on orders$`).FindAllStringSubmatch(got, -1) {
		var id int
		fmt.Sscan(m[2], &id)
		publishedBy[id] = append(publishedBy[id], m[1])
	}
	stops := regexp.MustCompile(`(?m)^(relay-[ab]) stopped; the standby takes over$`).FindAllStringSubmatch(got, -1)
	if len(stops) != 1 {
		t.Fatalf("%d instances stopped midway, want the one leader:\n%s", len(stops), got)
	}
	stopped := stops[0]
	for id := 1; id <= 10; id++ {
		by := publishedBy[id]
		if len(by) != 1 {
			t.Errorf("message %d published %d times (%v), want once", id, len(by), by)
			continue
		}
		if leader := by[0] == stopped[1]; leader != (id <= 5) {
			t.Errorf("message %d published by %s; %s led until message 6", id, by[0], stopped[1])
		}
	}
	if !strings.HasSuffix(got, "every message sent\n") {
		t.Errorf("output does not end with every message sent:\n%s", got)
	}

	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(ctx)
	n, err := client.Database(dbName).Collection("outbox").CountDocuments(ctx, bson.D{{Key: "sent", Value: true}})
	if err != nil || n != 10 {
		t.Errorf("outbox has %d messages marked sent (err %v), want 10", n, err)
	}
}
