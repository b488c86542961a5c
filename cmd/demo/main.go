// Command demo is the end-to-end demonstration of watchtree (make demo): a watchtree runtime
// runs the stream "orders" on <db>.orders, whose handler charges every new order exactly once
// into <db>.payments, idempotent by the event's ID. A load generator writes orders; some are
// poison (their charge always fails) and end as dead letters after their retries. A third of the
// way in the runtime is stopped as if the process crashed (a stop given no time to drain or
// flush: in-flight work is abandoned and the checkpoint stays where the last periodic write left
// it); halfway a new runtime is started. It resumes from the checkpoint, and the events replayed
// after it are absorbed by the idempotent payment.
//
// With MONGODB_URI unset it starts the embedded simulator (test/mongosim) and says so. It works in
// a database of its own (--db, default watchtree_demo): before it starts it drops the collections
// it owns there (demoCollections), after printing which, and it refuses, dropping nothing, a
// database that holds any other collection, so that pointing it at a real deployment never
// destroys a user's data. It shows progress while it runs, ends with a summary table, and exits 1
// if any order was lost (neither charged nor dead-lettered) or charged twice.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/store/mongostore"
	"github.com/watchtree/watchtree/test/mongosim"
)

func main() {
	if err := newCommand(os.Stdout).Execute(); err != nil {
		os.Exit(1)
	}
}

// streamName is the demo stream's name: the stream of its checkpoint and its dead letters.
const streamName = "orders"

// defaultDB is the default of --db: a database of the demo's own, so that a run against a user's
// MONGODB_URI does not touch the user's databases unless told to.
const defaultDB = "watchtree_demo"

// demoCollections are the collections the demo writes in its database (the orders, the payments
// and the runtime's records under mongostore's default names): the only ones it drops, and the
// only ones it accepts to find there.
var demoCollections = []string{"orders", "payments", mongostore.DefaultCheckpointCollection,
	mongostore.DefaultDeadLetterCollection, mongostore.DefaultGapCollection}

// errForeignCollections is returned (wrapped, naming the database and the collections) when the
// demo's database holds collections that are not the demo's: it then drops nothing.
var errForeignCollections = errors.New("database holds collections that are not the demo's")

// config holds the flags.
type config struct {
	uri         string // MONGODB_URI; empty: embedded mongosim
	db          string
	orders      int
	poisonEvery int
	lanes       int
	rate        int           // orders per second the load generator writes; 0: as fast as it can
	crashAfter  time.Duration // how long the crash-like stop may take
	timeout     time.Duration
	verbose     bool
	progress    time.Duration
	simAddr     string // listen address of the embedded mongosim
	hold        bool   // keep the embedded mongosim serving after the summary, until Ctrl-C
}

func newCommand(out io.Writer) *cobra.Command {
	var cfg config
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Charge every new order exactly once with a watchtree stream, across a crash and restart",
		Long: "demo runs a watchtree runtime whose stream \"orders\" charges each order inserted into\n" +
			"<db>.orders into <db>.payments, idempotent by the event ID; poison orders end as dead\n" +
			"letters. Midway the runtime is stopped as if it crashed and started again. MONGODB_URI\n" +
			"selects a real replica set; unset, an embedded mongosim is started.\n\n" +
			"The demo works in the database --db (default " + defaultDB + "). Before it starts it drops\n" +
			"the collections it owns there (" + strings.Join(demoCollections, ", ") + "),\n" +
			"printing which. It refuses a database that holds any other collection: it then drops\n" +
			"nothing, names the foreign collections and exits 1.",
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
	cmd.SetOut(out) // --help goes where the demo's output goes
	f := cmd.Flags()
	f.StringVar(&cfg.db, "db", defaultDB, "database of the demo (its demo collections are dropped first; any other collection there makes the demo refuse)")
	f.IntVar(&cfg.orders, "orders", 3000, "orders the load generator inserts")
	f.IntVar(&cfg.poisonEvery, "poison-every", 97, "every n-th order is poison: its charge always fails (0: none)")
	f.IntVar(&cfg.lanes, "lanes", 4, "lanes of the stream (parallel across orders)")
	f.IntVar(&cfg.rate, "rate", 1000, "orders per second the load generator writes (0: as fast as it can)")
	f.DurationVar(&cfg.crashAfter, "crash-stop", 0, "time the midway stop may take to drain and flush (0: none, like a kill)")
	f.DurationVar(&cfg.timeout, "timeout", 50*time.Second, "give up (and fail) after this long")
	f.DurationVar(&cfg.progress, "progress", 500*time.Millisecond, "interval of the progress lines")
	f.BoolVar(&cfg.verbose, "verbose", false, "log the runtime (zap, development format) to stderr")
	f.StringVar(&cfg.simAddr, "mongosim-addr", "127.0.0.1:0", "listen address of the embedded mongosim (port 0: a free one)")
	f.BoolVar(&cfg.hold, "hold", false, "after the summary keep the embedded mongosim serving until Ctrl-C, to look inside with mongosh")
	return cmd
}

// Order is the demo's document type.
type Order struct {
	ID       int64   `bson:"_id"`
	Customer string  `bson:"customer"`
	Amount   float64 `bson:"amount"`
	Poison   bool    `bson:"poison,omitempty"`
}

// stats are the figures of the summary table.
type stats struct {
	written      atomic.Int64 // orders inserted
	calls        atomic.Int64 // handler calls, retries and replays included
	charged      atomic.Int64 // payments written
	absorbed     atomic.Int64 // replays whose payment already existed
	declined     atomic.Int64 // failed charges of poison orders (each attempt)
	failed       atomic.Int64 // charges that failed otherwise (retried; e.g. cut off by the crash)
	deadLettered atomic.Int64 // DeadLettered observer events
	retries      atomic.Int64 // RetryScheduled observer events
	checkpoints  atomic.Int64 // Checkpointed observer events
	restarts     atomic.Int64 // Restarted observer events
}

// observer counts the runtime's events; it never blocks (the runtime queues for it anyway).
type observer struct{ st *stats }

func (o observer) OnEvent(ev watchtree.ObserverEvent) {
	switch ev.(type) {
	case watchtree.DeadLettered:
		o.st.deadLettered.Add(1)
	case watchtree.RetryScheduled:
		o.st.retries.Add(1)
	case watchtree.Checkpointed:
		o.st.checkpoints.Add(1)
	case watchtree.Restarted:
		o.st.restarts.Add(1)
	}
}

func run(ctx context.Context, cfg config, out io.Writer) error {
	if cfg.orders <= 0 || cfg.poisonEvery < 0 || cfg.lanes <= 0 || cfg.crashAfter < 0 || cfg.progress <= 0 || cfg.rate < 0 {
		return errors.New("--orders, --lanes and --progress must be positive, --poison-every, --rate and --crash-stop >= 0")
	}
	if cfg.db == "" {
		return errors.New("--db must not be empty")
	}
	if cfg.hold && cfg.uri != "" {
		return errors.New("--hold keeps the embedded mongosim serving: it needs MONGODB_URI unset")
	}
	holdCtx := ctx // --hold waits on the caller's context, not on --timeout
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	out = &syncWriter{w: out} // the progress goroutine writes too

	uri := cfg.uri
	if uri == "" {
		srv, err := mongosim.Start(ctx, mongosim.Options{Addr: cfg.simAddr})
		if err != nil {
			return err
		}
		defer srv.Close()
		uri = srv.URI()
		fmt.Fprintf(out, "MONGODB_URI is not set: started the embedded mongosim at %s\n", uri)
		fmt.Fprintf(out, "  look inside while it runs: mongosh %q (--hold keeps it serving after the summary)\n", uri)
		if cfg.hold {
			defer holdServer(holdCtx, out, uri)
		}
	} else {
		fmt.Fprintf(out, "using MONGODB_URI, database %s\n", cfg.db)
	}
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetAppName("watchtree-demo").
		SetHeartbeatInterval(500 * time.Millisecond))
	if err != nil {
		return err
	}
	defer disconnect(client)
	// Fail fast on a dead MONGODB_URI, within watchtree's default ConnectTimeout as rt.Start
	// would: the reset below would otherwise wait for the driver's 30s server selection timeout.
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	err = client.Ping(pctx, nil)
	pcancel()
	if err != nil {
		return fmt.Errorf("cannot reach MongoDB within 10s: %w", err)
	}
	db := client.Database(cfg.db)
	if err := resetDatabase(ctx, db, out); err != nil {
		return err
	}
	logger := zap.NewNop()
	if cfg.verbose {
		if logger, err = zap.NewDevelopment(); err != nil {
			return err
		}
		defer func() { _ = logger.Sync() }()
	}

	st := &stats{}
	start := time.Now()
	d := &demo{cfg: cfg, st: st, out: out, client: client, db: db, logger: logger, start: start}
	stopProgress := d.progressLoop()
	defer stopProgress()

	// The load generator writes every order, paced, while the runtime below crashes and
	// restarts under it.
	rt1, err := d.startRuntime(ctx)
	if err != nil {
		return err
	}
	genErr := make(chan error, 1)
	go func() { genErr <- d.writeOrders(ctx, 1, int64(cfg.orders)) }()
	waitWritten := func(n int64) {
		for st.written.Load() < n && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
	}

	// A third of the way in, crash: the runtime is stopped with --crash-stop to drain and
	// flush (default none at all), so in-flight work is abandoned and the checkpoint stays where
	// the last periodic write left it, as when the process is killed.
	waitWritten(int64(cfg.orders) / 3)
	crashCtx, cancelCrash := context.WithTimeout(ctx, cfg.crashAfter)
	stopErr := rt1.Stop(crashCtx)
	cancelCrash()
	how := "cut short: nothing drained or flushed"
	if stopErr == nil {
		how = "graceful"
	}
	fmt.Fprintf(out, "  ... crash: runtime stopped after %d charges (%s); orders keep coming while it is down\n",
		st.charged.Load(), how)

	// Halfway, a new runtime resumes the stream from its checkpoint.
	waitWritten(int64(cfg.orders) / 2)
	rt2, err := d.startRuntime(ctx)
	if err != nil {
		cancel()
		<-genErr
		return err
	}
	fmt.Fprintf(out, "  ... restart: a new runtime resumes the stream from its checkpoint\n")
	if err := <-genErr; err != nil {
		_ = rt2.Stop(context.Background())
		return err
	}

	poison := int64(0)
	if cfg.poisonEvery > 0 {
		poison = int64(cfg.orders / cfg.poisonEvery)
	}
	good := int64(cfg.orders) - poison
	var dls []watchtree.DeadLetter
	payments := db.Collection("payments")
	for ctx.Err() == nil {
		if n, err := payments.CountDocuments(ctx, bson.D{}); err == nil && n >= good {
			if dls, err = rt2.DeadLetters(ctx, streamName, 0); err == nil && int64(len(dls)) >= poison {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	elapsed := time.Since(start)
	stopCtx, cancelStop := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancelStop()
	if err := rt2.Stop(stopCtx); err != nil {
		fmt.Fprintf(out, "  ... stop: %v\n", err)
	}
	stopProgress()

	res, err := verify(context.Background(), db, cfg.orders, dls)
	if err != nil {
		return err
	}
	printSummary(out, st, res, elapsed)
	if len(dls) > 0 {
		dl := dls[0]
		id, _ := dl.DocumentKey.Lookup("_id").AsInt64OK()
		fmt.Fprintf(out, "\nfirst dead letter (rt.DeadLetters): order %d, %d attempts, error %q\n", id, dl.Attempts, dl.Error)
	}
	if res.lost > 0 || res.doubled > 0 {
		return fmt.Errorf("%d orders lost, %d charged more than once", res.lost, res.doubled)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("timed out after %v: %w", cfg.timeout, ctx.Err())
	}
	return nil
}

// holdServer keeps the embedded mongosim serving (run's deferred srv.Close waits for it) until
// ctx ends: Ctrl-C or SIGTERM.
func holdServer(ctx context.Context, out io.Writer, uri string) {
	fmt.Fprintf(out, "\n--hold: the embedded mongosim serves until Ctrl-C: mongosh %q\n", uri)
	<-ctx.Done()
}

// demo is one run's shared state.
type demo struct {
	cfg    config
	st     *stats
	out    io.Writer
	client *mongo.Client
	db     *mongo.Database
	logger *zap.Logger
	start  time.Time // the load generator's schedule starts here
}

// startRuntime starts a runtime and spawns the orders stream on it.
func (d *demo) startRuntime(ctx context.Context) (*watchtree.Runtime, error) {
	rt, err := watchtree.New(watchtree.Config{Client: d.client, Database: d.cfg.db, Logger: d.logger,
		Observer: observer{d.st}})
	if err != nil {
		return nil, err
	}
	if err := rt.Start(ctx); err != nil {
		return nil, err
	}
	payments := d.db.Collection("payments")
	h, err := rt.Spawn(ctx, watchtree.Stream[Order]{
		Name:       streamName,
		Collection: "orders",
		Lanes:      d.cfg.lanes,
		Retry:      watchtree.RetryPolicy{MaxAttempts: 3, InitialDelay: 5 * time.Millisecond, MaxDelay: 20 * time.Millisecond},
		Checkpoint: watchtree.CheckpointPolicy{SaveEvery: 200, SaveInterval: time.Second},
		OnInsert: func(ctx context.Context, ev *watchtree.Event[Order]) error {
			d.st.calls.Add(1)
			o := ev.FullDocument
			if o.Poison {
				d.st.declined.Add(1)
				return fmt.Errorf("order %d: card declined", o.ID)
			}
			// Charge once: the payment's _id is the event ID, stable across redeliveries, so a
			// replay after the crash hits the duplicate key and is absorbed.
			_, err := payments.InsertOne(ctx, bson.D{{Key: "_id", Value: ev.ID()}, {Key: "order", Value: o.ID},
				{Key: "amount", Value: o.Amount}})
			switch {
			case err == nil:
				d.st.charged.Add(1)
			case mongo.IsDuplicateKeyError(err):
				d.st.absorbed.Add(1)
			default:
				d.st.failed.Add(1)
				return err // retried by the RetryPolicy
			}
			return nil
		},
	})
	if err != nil {
		_ = rt.Stop(context.Background())
		return nil, err
	}
	// Wait until the cursor is open: on the very first start the stream begins at the position
	// it captures then (StartPosition Resume with no checkpoint), so orders written before that
	// would not be part of it.
	for {
		st, err := h.Status(ctx)
		if err == nil && st.State == watchtree.StateRunning {
			return rt, nil
		}
		if ctx.Err() != nil {
			_ = rt.Stop(context.Background())
			return nil, fmt.Errorf("stream %s did not start: %w (status %+v)", streamName, ctx.Err(), st)
		}
		time.Sleep(time.Millisecond)
	}
}

// resetDatabase drops the demo's collections of db after printing which, or, when db holds any
// other collection, drops nothing and returns an error wrapping errForeignCollections that names
// the database and the foreign collections.
func resetDatabase(ctx context.Context, db *mongo.Database, out io.Writer) error {
	names, err := db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		return fmt.Errorf("list the collections of database %s: %w", db.Name(), err)
	}
	var own, foreign []string
	for _, n := range names {
		if slices.Contains(demoCollections, n) {
			own = append(own, n)
		} else {
			foreign = append(foreign, n)
		}
	}
	if len(foreign) > 0 {
		slices.Sort(foreign)
		return fmt.Errorf("%w: database %s holds %s; nothing was dropped. The demo drops its own collections "+
			"(%s) before it starts, so it needs a database that holds nothing else: choose one with --db",
			errForeignCollections, db.Name(), strings.Join(foreign, ", "), strings.Join(demoCollections, ", "))
	}
	fmt.Fprintln(out, announcement(db.Name(), own))
	for _, c := range own {
		if err := db.Collection(c).Drop(ctx); err != nil {
			return fmt.Errorf("drop %s.%s: %w", db.Name(), c, err)
		}
	}
	return nil
}

// announcement is the line printed before resetDatabase drops the demo collections own of db.
func announcement(db string, own []string) string {
	if len(own) == 0 {
		return fmt.Sprintf("database %s holds no collections: nothing to drop", db)
	}
	own = slices.Clone(own)
	// In demoCollections order, which reads orders, payments, then watchtree's records.
	slices.SortFunc(own, func(a, b string) int {
		return slices.Index(demoCollections, a) - slices.Index(demoCollections, b)
	})
	qualified := make([]string, len(own))
	for i, c := range own {
		qualified[i] = db + "." + c
	}
	return fmt.Sprintf("dropping the demo's collections left in database %s (it holds no others): %s",
		db, strings.Join(qualified, ", "))
}

// writeOrders inserts orders from..to in batches of 50.
func (d *demo) writeOrders(ctx context.Context, from, to int64) error {
	orders := d.db.Collection("orders")
	const batch = 50
	for lo := from; lo <= to; lo += batch {
		hi := min(lo+batch-1, to)
		docs := make([]any, 0, hi-lo+1)
		for i := lo; i <= hi; i++ {
			docs = append(docs, Order{ID: i, Customer: fmt.Sprintf("c%03d", i%97), Amount: float64(10 + i%90),
				Poison: d.cfg.poisonEvery > 0 && i%int64(d.cfg.poisonEvery) == 0})
		}
		// Unordered, so a retry after a lost reply skips the orders that landed (duplicate key).
		_, err := orders.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
		if err != nil && !onlyDuplicates(err) {
			return fmt.Errorf("insert orders %d..%d: %w", lo, hi, err)
		}
		written := d.st.written.Add(hi - lo + 1)
		if d.cfg.rate > 0 { // pace the load: order n is due at start + n/rate
			due := d.start.Add(time.Duration(float64(written) / float64(d.cfg.rate) * float64(time.Second)))
			select {
			case <-time.After(time.Until(due)):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// onlyDuplicates reports whether every write error of err is a duplicate key.
func onlyDuplicates(err error) bool {
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) || bwe.WriteConcernError != nil || len(bwe.WriteErrors) == 0 {
		return false
	}
	for _, we := range bwe.WriteErrors {
		if we.Code != 11000 {
			return false
		}
	}
	return true
}

// progressLoop prints a progress line every cfg.progress until the returned stop is called.
func (d *demo) progressLoop() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(d.cfg.progress)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				fmt.Fprintf(d.out, "  written %5d orders, charged %5d, replays absorbed %4d, dead letters %3d\n",
					d.st.written.Load(), d.st.charged.Load(), d.st.absorbed.Load(), d.st.deadLettered.Load())
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func disconnect(cl *mongo.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = cl.Disconnect(ctx)
}

// result is what verify found in the database.
type result struct {
	paid, doubled, deadLettered, lost int
}

// verify checks that every order was charged exactly once or dead-lettered.
func verify(ctx context.Context, db *mongo.Database, orders int, dls []watchtree.DeadLetter) (result, error) {
	var res result
	cur, err := db.Collection("payments").Aggregate(ctx, mongo.Pipeline{
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$order"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}},
	})
	if err != nil {
		return res, fmt.Errorf("verify: %w", err)
	}
	var groups []struct {
		ID int64 `bson:"_id"`
		N  int32 `bson:"n"`
	}
	if err := cur.All(ctx, &groups); err != nil {
		return res, fmt.Errorf("verify: %w", err)
	}
	done := make(map[int64]bool, orders)
	for _, g := range groups {
		done[g.ID] = true
		res.paid++
		if g.N > 1 {
			res.doubled++
		}
	}
	for _, dl := range dls {
		if id, ok := dl.DocumentKey.Lookup("_id").AsInt64OK(); ok && !done[id] {
			done[id] = true
			res.deadLettered++
		}
	}
	for i := 1; i <= orders; i++ {
		if !done[int64(i)] {
			res.lost++
		}
	}
	return res, nil
}

func printSummary(out io.Writer, st *stats, res result, elapsed time.Duration) {
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(name string, v any, note string) { fmt.Fprintf(tw, "%s\t%v\t  %s\n", name, v, note) }
	row("written", st.written.Load(), "orders inserted by the load generator")
	row("handled", st.calls.Load(), fmt.Sprintf("handler calls: %d charges, %d replays, %d declined attempts, %d failed",
		st.charged.Load(), st.absorbed.Load(), st.declined.Load(), st.failed.Load()))
	row("charged", res.paid, fmt.Sprintf("orders with a payment, %d of them charged twice", res.doubled))
	row("replays absorbed", st.absorbed.Load(), "events redelivered after the crash, absorbed by the idempotent payment")
	row("dead letters", res.deadLettered, fmt.Sprintf("poison orders, after %d retries (%d dead-letter writes)",
		st.retries.Load(), st.deadLettered.Load()))
	row("lost", res.lost, "orders neither charged nor dead-lettered")
	row("checkpoints", st.checkpoints.Load(), "checkpoint writes")
	rate := 0.0
	if elapsed > 0 {
		rate = float64(st.written.Load()) / elapsed.Seconds()
	}
	row("events/s", fmt.Sprintf("%.0f", rate), fmt.Sprintf("orders settled per second over %s, crash and restart included (load paced by --rate)",
		elapsed.Round(time.Millisecond)))
	_ = tw.Flush()
}
