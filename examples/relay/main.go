// Command relay is the outbox relay of examples/outbox with a real broker: the service writes
// each message into an outbox collection (in the same transaction as its own change, in a real
// service), a watchtree stream publishes every outbox insert to NATS JetStream through the sink
// (sink/nats), and a consumer group, three workers on one durable pull consumer, reads them
// back. The relay's handler returns only after JetStream's PubAck, so the checkpoint never
// passes an unpublished message; every message carries its event ID as Nats-Msg-Id, so a
// republish after a crash within the stream's duplicate window (2 minutes) is dropped by
// JetStream. Run it with `go run .` in examples/relay (its own module): on MONGODB_URI when set,
// else an embedded mongosim, and NATS_URL when set, else nats://127.0.0.1:4222 (a nats-server
// started with -js). It drops the database watchtree_example_relay and the JetStream stream of
// the same name first, and leaves both to look at.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/sink"
	natssink "github.com/watchtree/watchtree/sink/nats"
	"github.com/watchtree/watchtree/test/mongosim"
)

const (
	messages = 20
	workers  = 3
)

// Message is an outbox entry.
type Message struct {
	ID    int    `bson:"_id"`
	Order string `bson:"order"`
	Event string `bson:"event"`
}

func main() {
	url := os.Getenv("NATS_URL")
	if url == "" {
		url = "nats://127.0.0.1:4222"
	}
	if err := run(context.Background(), os.Getenv("MONGODB_URI"), url, "watchtree_example_relay", os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run relays in the database name, through the JetStream stream name (which takes the subjects
// name.>).
func run(ctx context.Context, uri, natsURL, name string, out io.Writer) error {
	dbName, streamName := name, name
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
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
	if err := client.Database(dbName).Drop(ctx); err != nil { // an earlier run's outbox and checkpoint
		return err
	}

	// The broker: a file-storage stream for the outbox's subjects, with the default duplicate
	// window (2 minutes).
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return fmt.Errorf("NATS at %s (start nats-server -js, or set NATS_URL): %w", natsURL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if err := js.DeleteStream(ctx, streamName); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return err
	}
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: streamName, Subjects: []string{dbName + ".>"}, Storage: jetstream.FileStorage})
	if err != nil {
		return err
	}

	// The relay: every outbox insert, published as the outbox document in relaxed Extended JSON
	// on <name>.outbox.insert; the message key is the document key.
	p, err := natssink.New(js)
	if err != nil {
		return err
	}
	publish, err := sink.Handler[Message](p, sink.Options{
		Subject: "{db}.{coll}.{op}",
		Encode: func(raw bson.Raw) ([]byte, error) {
			doc, ok := raw.Lookup("fullDocument").DocumentOK()
			if !ok {
				return nil, errors.New("no fullDocument")
			}
			return bson.MarshalExtJSON(doc, false, false)
		},
	})
	if err != nil {
		return err
	}
	rt, err := watchtree.New(watchtree.Config{Client: client, Database: dbName, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	if err := rt.Start(ctx); err != nil {
		return err
	}
	defer rt.Stop(context.Background())
	if _, err := rt.Spawn(ctx, watchtree.Stream[Message]{Name: "outbox-relay", Collection: "outbox", Lanes: 4, OnInsert: publish}); err != nil {
		return err
	}

	// The service writes its outbox.
	outbox := client.Database(dbName).Collection("outbox")
	for id := 1; id <= messages; id++ {
		m := Message{ID: id, Order: fmt.Sprintf("order-%d", (id+1)/2), Event: "created"}
		if id%2 == 0 {
			m.Event = "paid"
		}
		if _, err := outbox.InsertOne(ctx, m); err != nil {
			return err
		}
	}

	// The consumer group: three workers share the durable pull consumer "billing"; each message
	// goes to one of them.
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "billing", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		return err
	}
	var mu sync.Mutex
	got := map[string]int{} // Nats-Msg-Id → deliveries
	perWorker := make([]int, workers)
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				batch, err := cons.Fetch(4, jetstream.FetchMaxWait(200*time.Millisecond))
				if err != nil {
					errs <- err
					return
				}
				for msg := range batch.Messages() {
					mu.Lock()
					got[msg.Headers().Get(jetstream.MsgIDHeader)]++
					perWorker[w]++
					fmt.Fprintf(out, "worker %d: %s %s\n", w+1, msg.Subject(), msg.Data())
					mu.Unlock()
					if err := msg.Ack(); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
	var werr error
	for deadline := time.Now().Add(30 * time.Second); count() < messages && werr == nil; {
		if time.Now().After(deadline) {
			werr = fmt.Errorf("%d of %d messages consumed after 30s", count(), messages)
			break
		}
		select {
		case werr = <-errs:
		case <-time.After(20 * time.Millisecond):
		}
	}
	close(done)
	wg.Wait()
	if werr != nil {
		return werr
	}
	dups := 0
	for _, n := range got {
		dups += n - 1
	}
	fmt.Fprintf(out, "%d messages relayed, %d consumed by %d workers (%v), %d delivered twice\n", messages, len(got), workers, perWorker, dups)
	return nil
}
