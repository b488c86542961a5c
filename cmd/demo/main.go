// Command demo is the first end-to-end demonstration (make demo): a change stream on
// shop.orders feeds a consumer that charges every new order exactly once into shop.payments,
// while a load generator writes orders and the connections are cut under it.
//
// With MONGODB_URI unset it starts the embedded simulator (test/mongosim) and, halfway
// through the load, kills every client connection to show the driver resuming the change
// stream. Midway the consumer also "crashes" and restarts from its last checkpoint (saved
// every --checkpoint-every events), so some events are delivered twice: the payment is keyed
// by the event's resume token, so the repeat is absorbed instead of charging twice.
//
// It ends with a summary table and exits 1 if any order was not charged exactly once.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree/test/mongosim"
)

func main() {
	if err := newCommand(os.Stdout).Execute(); err != nil {
		os.Exit(1)
	}
}

// config holds the flags.
type config struct {
	uri             string // MONGODB_URI; empty: embedded mongosim
	db              string
	orders          int
	updateEvery     int
	checkpointEvery int
	timeout         time.Duration
}

func newCommand(out io.Writer) *cobra.Command {
	var cfg config
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Charge every new order exactly once from a change stream, across connection kills",
		Long: "demo watches <db>.orders, charges each inserted order into <db>.payments idempotently\n" +
			"(keyed by the event's resume token) and prints a summary. MONGODB_URI selects a real\n" +
			"replica set; unset, an embedded mongosim is started. It drops <db>.orders, payments and\n" +
			"checkpoints first.",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.uri = os.Getenv("MONGODB_URI")
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			err := run(ctx, cfg, out)
			if err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "demo:", err)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.db, "db", "shop", "database holding orders, payments and checkpoints")
	f.IntVar(&cfg.orders, "orders", 3000, "orders the load generator inserts")
	f.IntVar(&cfg.updateEvery, "update-every", 3, "update every n-th order's status (0: none)")
	f.IntVar(&cfg.checkpointEvery, "checkpoint-every", 50, "events between consumer checkpoints")
	f.DurationVar(&cfg.timeout, "timeout", 45*time.Second, "give up (and fail) after this long")
	return cmd
}

// stats are the figures of the summary table.
type stats struct {
	ordersWritten   atomic.Int64
	updatesWritten  atomic.Int64
	delivered       atomic.Int64 // events handed to the consumer, repeats included
	unique          atomic.Int64 // distinct events (by resume token)
	duplicates      atomic.Int64 // repeats absorbed by the idempotent payment write
	charged         atomic.Int64 // payments written
	driverResumes   atomic.Int64 // change-stream aggregates the driver re-issued by itself
	consumerRestart atomic.Int64
	reopened        atomic.Int64 // streams the consumer reopened after an error the driver gave up on
	aggregates      atomic.Int64
	lastEvent       atomic.Int64 // unix nanos of the last new event
	getMoreInFlight atomic.Int64 // the consumer's getMores sent and not yet answered
}

func run(ctx context.Context, cfg config, out io.Writer) error {
	if cfg.orders <= 0 || cfg.checkpointEvery <= 0 || cfg.updateEvery < 0 {
		return errors.New("--orders and --checkpoint-every must be positive, --update-every >= 0")
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()

	var srv *mongosim.Server
	uri := cfg.uri
	if uri == "" {
		var err error
		srv, err = mongosim.Start(ctx, mongosim.Options{})
		if err != nil {
			return err
		}
		defer srv.Close()
		uri = srv.URI()
		fmt.Fprintf(out, "MONGODB_URI is not set: started the embedded mongosim at %s\n", uri)
	} else {
		fmt.Fprintf(out, "using MONGODB_URI (connection kills are only simulated on the embedded server)\n")
	}

	st := &stats{}
	// The consumer's client counts the change-stream aggregates it sends: every one after
	// the first (and after each consumer restart) is the driver resuming on its own.
	mon := &event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			switch e.CommandName {
			case "aggregate":
				st.aggregates.Add(1)
			case "getMore":
				st.getMoreInFlight.Add(1)
			}
		},
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
			if e.CommandName == "getMore" {
				st.getMoreInFlight.Add(-1)
			}
		},
		Failed: func(_ context.Context, e *event.CommandFailedEvent) {
			if e.CommandName == "getMore" {
				st.getMoreInFlight.Add(-1)
			}
		},
	}
	consumerCl, err := mongo.Connect(options.Client().ApplyURI(uri).SetAppName("demo-consumer").
		SetMonitor(mon).SetHeartbeatInterval(500 * time.Millisecond))
	if err != nil {
		return err
	}
	defer disconnect(consumerCl)
	loadCl, err := mongo.Connect(options.Client().ApplyURI(uri).SetAppName("demo-load").
		SetHeartbeatInterval(500 * time.Millisecond))
	if err != nil {
		return err
	}
	defer disconnect(loadCl)

	db := loadCl.Database(cfg.db)
	for _, c := range []string{"orders", "payments", "checkpoints"} {
		if err := db.Collection(c).Drop(ctx); err != nil {
			return fmt.Errorf("reset %s.%s: %w", cfg.db, c, err)
		}
	}

	updates := 0
	if cfg.updateEvery > 0 {
		updates = cfg.orders / cfg.updateEvery
	}
	expected := int64(cfg.orders + updates)
	c := &consumer{cfg: cfg, st: st, db: consumerCl.Database(cfg.db), out: out, restartAt: expected / 2}
	if err := c.open(ctx, nil); err != nil {
		return err
	}
	fmt.Fprintf(out, "watching %s.orders; writing %d orders and %d status updates\n", cfg.db, cfg.orders, updates)

	start := time.Now()
	consumerErr := make(chan error, 1)
	go func() { consumerErr <- c.run(ctx, expected) }()

	if err := generateLoad(ctx, cfg, db, st, srv, out); err != nil {
		cancel()
		<-consumerErr
		return err
	}
	if err := <-consumerErr; err != nil {
		return fmt.Errorf("consumer: %w (delivered %d of %d events)", err, st.unique.Load(), expected)
	}
	elapsed := time.Duration(st.lastEvent.Load() - start.UnixNano())

	lost, doubled, err := verify(ctx, db, cfg.orders)
	if err != nil {
		return err
	}
	st.driverResumes.Store(st.aggregates.Load() - 1 - st.consumerRestart.Load() - st.reopened.Load())
	printSummary(out, st, lost, doubled, elapsed)
	if lost > 0 || doubled > 0 {
		return fmt.Errorf("%d orders not charged, %d charged more than once", lost, doubled)
	}
	return nil
}

func disconnect(cl *mongo.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = cl.Disconnect(ctx)
}

// generateLoad inserts the orders one at a time, updates every n-th order's status, and kills
// all connections of the embedded server halfway through.
func generateLoad(ctx context.Context, cfg config, db *mongo.Database, st *stats, srv *mongosim.Server, out io.Writer) error {
	orders := db.Collection("orders")
	for i := 1; i <= cfg.orders; i++ {
		if i == cfg.orders/2 && srv != nil {
			// Cut the connections while the consumer waits in a getMore, so the driver has to
			// resume the change stream (a cursor outlives its connection: a kill between
			// getMores would go unnoticed).
			written := st.ordersWritten.Load() + st.updatesWritten.Load()
			deadline := time.Now().Add(5 * time.Second)
			for (st.unique.Load() < written || st.getMoreInFlight.Load() == 0) && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			fmt.Fprintf(out, "  ... order %d: killing every client connection (KillAllConnections)\n", i)
			srv.KillAllConnections()
		}
		order := bson.D{{Key: "_id", Value: int64(i)}, {Key: "customer", Value: fmt.Sprintf("c%03d", i%97)},
			{Key: "amount", Value: float64(10 + i%90)}, {Key: "status", Value: "new"}}
		if err := retry(ctx, func() error {
			_, err := orders.InsertOne(ctx, order)
			if mongo.IsDuplicateKeyError(err) {
				return nil // an earlier attempt landed: inserting is idempotent by _id
			}
			return err
		}); err != nil {
			return fmt.Errorf("insert order %d: %w", i, err)
		}
		st.ordersWritten.Add(1)
		if cfg.updateEvery > 0 && i%cfg.updateEvery == 0 {
			if err := retry(ctx, func() error {
				_, err := orders.UpdateOne(ctx, bson.D{{Key: "_id", Value: int64(i)}},
					bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: "confirmed"}}}})
				return err
			}); err != nil {
				return fmt.Errorf("update order %d: %w", i, err)
			}
			st.updatesWritten.Add(1)
		}
		if i%1000 == 0 {
			fmt.Fprintf(out, "  written %5d orders, consumer has %5d events\n", i, st.unique.Load())
		}
	}
	return nil
}

// retry runs op until it succeeds, retrying a few times what lost connections cause (network
// errors, a cleared connection pool) and server errors labelled retryable. The driver already
// retries once; a connection kill can cost a second attempt.
func retry(ctx context.Context, op func() error) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if err = op(); err == nil {
			return nil
		}
		if serverRejected(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt+1) * 20 * time.Millisecond):
		}
	}
	return err
}

// serverRejected reports whether err is the server's answer (an error code or write errors)
// not labelled retryable, as opposed to a lost connection.
func serverRejected(err error) bool {
	var ce mongo.CommandError
	if errors.As(err, &ce) && ce.Code != 0 {
		return !ce.HasErrorLabel("RetryableWriteError")
	}
	var we mongo.WriteException
	return errors.As(err, &we) && len(we.WriteErrors) > 0
}

// consumer charges orders from the change stream.
type consumer struct {
	cfg       config
	st        *stats
	db        *mongo.Database
	out       io.Writer
	cs        *mongo.ChangeStream
	seen      map[string]bool // resume tokens already delivered (for the duplicate count only)
	restartAt int64           // simulate one crash after this many distinct events
	restarted bool
}

func (c *consumer) open(ctx context.Context, resumeAfter bson.Raw) error {
	opts := options.ChangeStream().SetMaxAwaitTime(500 * time.Millisecond)
	if resumeAfter != nil {
		opts.SetResumeAfter(resumeAfter)
	}
	cs, err := c.db.Collection("orders").Watch(ctx, mongo.Pipeline{}, opts)
	if err != nil {
		return fmt.Errorf("watch %s.orders: %w", c.cfg.db, err)
	}
	c.cs = cs
	if c.seen == nil {
		c.seen = make(map[string]bool)
	}
	return nil
}

// run consumes until expected distinct events were handled.
func (c *consumer) run(ctx context.Context, expected int64) error {
	defer func() { _ = c.cs.Close(context.Background()) }()
	payments := c.db.Collection("payments")
	checkpoints := c.db.Collection("checkpoints")
	var checkpoint bson.Raw // the last token saved; restarts resume after it
	sinceCheckpoint := 0
	for c.st.unique.Load() < expected {
		if !c.cs.Next(ctx) {
			// The driver resumes by itself once per error; if that resume also meets a dead
			// connection the error surfaces, and the consumer resumes from the stream's token.
			err := c.cs.Err()
			if ctx.Err() != nil || err == nil || serverRejected(err) || c.st.reopened.Load() >= 10 {
				return fmt.Errorf("change stream ended: %w", err)
			}
			c.st.reopened.Add(1)
			tok := append(bson.Raw(nil), c.cs.ResumeToken()...)
			_ = c.cs.Close(ctx)
			if err := retry(ctx, func() error { return c.open(ctx, tok) }); err != nil {
				return err
			}
			continue
		}
		var ev struct {
			ID            bson.Raw `bson:"_id"`
			OperationType string   `bson:"operationType"`
			FullDocument  struct {
				ID     int64   `bson:"_id"`
				Amount float64 `bson:"amount"`
			} `bson:"fullDocument"`
		}
		if err := c.cs.Decode(&ev); err != nil {
			return err
		}
		c.st.delivered.Add(1)
		token := ev.ID.Lookup("_data").StringValue()
		if !c.seen[token] {
			c.seen[token] = true
			c.st.unique.Add(1)
			c.st.lastEvent.Store(time.Now().UnixNano())
		}
		if ev.OperationType == "insert" {
			// Charge the order, keyed by the event's resume token: a repeat of the event
			// fails with a duplicate key and is absorbed.
			_, err := payments.InsertOne(ctx, bson.D{{Key: "_id", Value: token},
				{Key: "order", Value: ev.FullDocument.ID}, {Key: "amount", Value: ev.FullDocument.Amount}})
			switch {
			case err == nil:
				c.st.charged.Add(1)
			case mongo.IsDuplicateKeyError(err):
				c.st.duplicates.Add(1)
			default:
				return fmt.Errorf("charge order %d: %w", ev.FullDocument.ID, err)
			}
		}
		if sinceCheckpoint++; sinceCheckpoint == c.cfg.checkpointEvery {
			sinceCheckpoint = 0
			checkpoint = append(bson.Raw(nil), c.cs.ResumeToken()...)
			if _, err := checkpoints.UpdateOne(ctx, bson.D{{Key: "_id", Value: "payments"}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "token", Value: checkpoint}}}}, options.UpdateOne().SetUpsert(true)); err != nil {
				return fmt.Errorf("checkpoint: %w", err)
			}
		}
		if !c.restarted && checkpoint != nil && c.st.unique.Load() >= c.restartAt && sinceCheckpoint > c.cfg.checkpointEvery/2 {
			// Simulated crash: the progress since the last checkpoint is forgotten and the
			// consumer starts over from the checkpoint, so those events come again.
			c.restarted = true
			c.st.consumerRestart.Add(1)
			fmt.Fprintf(c.out, "  ... consumer restarts from its checkpoint (%d events after it will come again)\n", sinceCheckpoint)
			_ = c.cs.Close(ctx)
			if err := c.open(ctx, checkpoint); err != nil {
				return err
			}
			sinceCheckpoint = 0
		}
	}
	return nil
}

// verify checks that every order was charged exactly once.
func verify(ctx context.Context, db *mongo.Database, orders int) (lost, doubled int, err error) {
	cur, err := db.Collection("payments").Aggregate(ctx, mongo.Pipeline{
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$order"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}},
	})
	if err != nil {
		return 0, 0, fmt.Errorf("verify: %w", err)
	}
	var groups []struct {
		ID int64 `bson:"_id"`
		N  int32 `bson:"n"`
	}
	if err := cur.All(ctx, &groups); err != nil {
		return 0, 0, fmt.Errorf("verify: %w", err)
	}
	paid := make(map[int64]bool, len(groups))
	for _, g := range groups {
		paid[g.ID] = true
		if g.N > 1 {
			doubled++
		}
	}
	for i := 1; i <= orders; i++ {
		if !paid[int64(i)] {
			lost++
		}
	}
	return lost, doubled, nil
}

func printSummary(out io.Writer, st *stats, lost, doubled int, elapsed time.Duration) {
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(name string, v any, note string) { fmt.Fprintf(tw, "%s\t%v\t  %s\n", name, v, note) }
	written := st.ordersWritten.Load() + st.updatesWritten.Load()
	row("written", written, fmt.Sprintf("%d orders inserted, %d updated", st.ordersWritten.Load(), st.updatesWritten.Load()))
	row("delivered", st.delivered.Load(), fmt.Sprintf("%d distinct events", st.unique.Load()))
	row("resumed", st.driverResumes.Load()+st.consumerRestart.Load()+st.reopened.Load(),
		fmt.Sprintf("%d by the driver after connection kills, %d consumer restart, %d reopened by the consumer",
			st.driverResumes.Load(), st.consumerRestart.Load(), st.reopened.Load()))
	row("duplicates absorbed", st.duplicates.Load(), "repeated events whose payment already existed")
	row("charged", st.charged.Load(), fmt.Sprintf("%d orders charged twice", doubled))
	row("lost", lost, "orders never charged")
	rate := 0.0
	if elapsed > 0 {
		rate = float64(st.unique.Load()) / elapsed.Seconds()
	}
	row("events/s", fmt.Sprintf("%.0f", rate), fmt.Sprintf("over %s", elapsed.Round(time.Millisecond)))
	_ = tw.Flush()
}
