// Command outbox shows an outbox relay: the service writes each message into an outbox
// collection (in the same transaction as its own change, in a real service), and a SingleLeader
// stream publishes every message once and marks it sent. Two relay instances run; only the lease
// holder publishes, the other waits in standby. Midway the leader stops gracefully: it writes its
// final checkpoint and releases the lease, and the standby takes over from exactly there.
// Delivery is at least once (after a crash the new leader replays from the shared checkpoint),
// so the publish is idempotent by the event's ID, as a broker's deduplication window would be.
// Run it with `go run ./examples/outbox` (on MONGODB_URI when set, else an embedded mongosim; it
// drops watchtree_example_outbox first).
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

const dbName = "watchtree_example_outbox"

// Message is an outbox entry.
type Message struct {
	ID    int    `bson:"_id"`
	Topic string `bson:"topic"`
	Sent  bool   `bson:"sent"`
}

// broker stands in for a message broker that drops a message whose ID it has already seen.
type broker struct {
	mu   sync.Mutex
	seen map[string]bool
	out  io.Writer
}

func (b *broker) publish(msgID, from string, m *Message) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen[msgID] {
		fmt.Fprintf(b.out, "%s: message %d again, dropped as a duplicate\n", from, m.ID)
		return
	}
	b.seen[msgID] = true
	fmt.Fprintf(b.out, "%s published message %d on %s\n", from, m.ID, m.Topic)
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
	if err := client.Database(dbName).Drop(ctx); err != nil { // an earlier run's outbox, lease, checkpoint
		return err
	}
	outbox := client.Database(dbName).Collection("outbox")
	b := &broker{seen: map[string]bool{}, out: out}

	var relays []*watchtree.Handle
	for _, name := range []string{"relay-a", "relay-b"} { // two pods of one service
		rt, err := watchtree.New(watchtree.Config{Client: client, Database: dbName, InstanceID: name})
		if err != nil {
			return err
		}
		if err := rt.Start(ctx); err != nil {
			return err
		}
		defer rt.Stop(context.Background())
		h, err := rt.Spawn(ctx, watchtree.Stream[Message]{
			Name:       "outbox-relay",
			Collection: "outbox",
			Mode:       watchtree.SingleLeader, // one publisher at a time, under a lease
			OnInsert: func(ctx context.Context, ev *watchtree.Event[Message]) error {
				b.publish(ev.ID(), name, ev.FullDocument)
				_, err := outbox.UpdateByID(ctx, ev.FullDocument.ID, bson.D{{Key: "$set", Value: bson.D{{Key: "sent", Value: true}}}})
				return err // an error is retried (Retry), then dead-lettered: never lost
			},
		})
		if err != nil {
			return err
		}
		relays = append(relays, h)
	}

	for id := 1; id <= 10; id++ {
		if id == 6 { // the leader leaves: final checkpoint, lease released, the standby takes over
			if err := waitSent(ctx, outbox, 5); err != nil {
				return err
			}
			for _, h := range relays {
				st, err := h.Status(ctx)
				if err != nil || st.Lease.Role != watchtree.RoleLeader {
					continue // a status error only hides the role: the leader is the other one
				}
				if err := h.Stop(ctx); err != nil {
					return err
				}
				fmt.Fprintf(out, "%s stopped; the standby takes over\n", st.Lease.Instance)
				break // the other one may already lead: the handover takes milliseconds
			}
		}
		if _, err := outbox.InsertOne(ctx, Message{ID: id, Topic: "orders"}); err != nil {
			return err
		}
	}
	if err := waitSent(ctx, outbox, 10); err != nil {
		return err
	}
	fmt.Fprintln(out, "every message sent")
	return nil
}

// waitSent waits until n outbox messages are marked sent.
func waitSent(ctx context.Context, outbox *mongo.Collection, n int64) error {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		sent, err := outbox.CountDocuments(ctx, bson.D{{Key: "sent", Value: true}})
		if err != nil || sent == n {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d outbox messages sent after 10s", sent, n)
		}
	}
}
