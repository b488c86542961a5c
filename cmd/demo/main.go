// Command demo is the end-to-end demonstration of watchtree (make demo). Two pods, each a
// process of its own running a watchtree runtime with its console open, share two streams:
//
//   - orders, SingleLeader: the leader pod charges every new order of <db>.orders exactly once
//     into <db>.payments, idempotent by the event's ID, with retries; poison orders (every
//     --poison-every-th) are declined at every attempt and end as dead letters;
//   - products, AllInstances: each pod evicts the prices it caches in memory when a product
//     changes.
//
// A load generator writes orders and product changes. A quarter of the way in, a fail point
// kills the leader's orders cursor, and the supervisor's backoff and restart show as they
// happen; halfway, the leader pod is killed with SIGKILL, and the standby takes the lease over
// when it expires and resumes from the checkpoint; the killed pod is started again, as an
// orchestrator would. After the load one dead letter is replayed through the console, and each
// pod's cache is checked against the database. The summary table counts every order: written =
// charged + dead letters + lost, lost (computed order by order against payments) must be 0;
// the demo exits 1 otherwise.
//
// With MONGODB_URI unset it starts the embedded simulator (test/mongosim) and says so. It works in
// a database of its own (--db, default watchtree_demo): before it starts it drops the collections
// it owns there (demoCollections), after printing which, and it refuses, dropping nothing, a
// database that holds any other collection, so that pointing it at a real deployment never
// destroys a user's data. The cursor kill needs configureFailPoint: a real server needs
// enableTestCommands, else the demo says so and goes on without it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/watchtree/watchtree/store/mongostore"
	"github.com/watchtree/watchtree/test/mongosim"
)

func main() {
	if raw := os.Getenv(envPod); raw != "" { // the demo re-executes itself as its pods
		os.Exit(podMain(raw))
	}
	if err := newCommand(os.Stdout).Execute(); err != nil {
		os.Exit(1)
	}
}

// The streams' names.
const (
	ordersStream   = "orders"
	productsStream = "products"
)

// productCount is the number of products (IDs 1..productCount); product markerProduct (0) is
// changed once at the end, so that a pod knows its products stream has handled every change.
const (
	productCount  = 20
	markerProduct = 0
)

// defaultDB is the default of --db: a database of the demo's own, so that a run against a user's
// MONGODB_URI does not touch the user's databases unless told to.
const defaultDB = "watchtree_demo"

// demoCollections are the collections the demo writes in its database (its documents and the
// runtime's records under mongostore's default names): the only ones it drops, and the only
// ones it accepts to find there.
var demoCollections = []string{"orders", "payments", "products", "fixes",
	mongostore.DefaultCheckpointCollection, mongostore.DefaultDeadLetterCollection, mongostore.DefaultGapCollection,
	mongostore.DefaultLeaseCollection, mongostore.DefaultInstanceCollection}

// errForeignCollections is returned (wrapped, naming the database and the collections) when the
// demo's database holds collections that are not the demo's: it then drops nothing.
var errForeignCollections = errors.New("database holds collections that are not the demo's")

// config holds the flags.
type config struct {
	uri          string // MONGODB_URI; empty: embedded mongosim
	db           string
	orders       int
	rate         int // orders per second the load generator writes
	productRate  int // product changes per second
	poisonEvery  int
	lanes        int
	leaseTTL     time.Duration
	timeout      time.Duration
	progress     time.Duration
	verbose      bool
	simAddr      string // listen address of the embedded mongosim
	hold         bool   // keep the pods and the embedded mongosim running after the summary
	noCursorKill bool   // skip the fail point (a server without test commands)
}

// command is the demo's command line, parsed by the standard library's flag package (-db and
// --db both work): Execute runs the demo, and --help prints what it does and its flags.
type command struct {
	flags    *flag.FlagSet
	cfg      config
	args     []string
	out, err io.Writer
}

func newCommand(out io.Writer) *command {
	c := &command{args: os.Args[1:], out: out, err: os.Stderr}
	f := flag.NewFlagSet("demo", flag.ContinueOnError)
	f.SetOutput(io.Discard) // Execute reports a bad flag itself, and --help goes to out
	f.Usage = func() {}
	cfg := &c.cfg
	f.StringVar(&cfg.db, "db", defaultDB, "database of the demo (its demo collections are dropped first; any other collection there makes the demo refuse)")
	f.IntVar(&cfg.orders, "orders", 3000, "orders the load generator inserts")
	f.IntVar(&cfg.rate, "rate", 250, "orders per second the load generator writes")
	f.IntVar(&cfg.productRate, "product-rate", 20, "product changes per second the load generator writes while it writes orders")
	f.IntVar(&cfg.poisonEvery, "poison-every", 97, "every n-th order is poison: its card is declined at every attempt (0: none)")
	f.IntVar(&cfg.lanes, "lanes", 4, "lanes of the orders stream (parallel across orders)")
	f.DurationVar(&cfg.leaseTTL, "lease-ttl", 3*time.Second, "lease TTL of the orders stream: the failover after the SIGKILL takes about this long")
	f.DurationVar(&cfg.timeout, "timeout", 55*time.Second, "give up (and fail) after this long")
	f.DurationVar(&cfg.progress, "progress", time.Second, "interval of the progress lines")
	f.BoolVar(&cfg.verbose, "verbose", false, "log the pods' runtimes (zap, development format) to stderr")
	f.StringVar(&cfg.simAddr, "mongosim-addr", "127.0.0.1:0", "listen address of the embedded mongosim (port 0: a free one)")
	f.BoolVar(&cfg.hold, "hold", false, "after the summary keep the pods (and their consoles) and the embedded mongosim running until Ctrl-C")
	f.BoolVar(&cfg.noCursorKill, "no-cursor-kill", false, "skip the fail point that kills the leader's cursor")
	c.flags = f
	return c
}

// Flags returns the demo's flags.
func (c *command) Flags() *flag.FlagSet { return c.flags }

// SetArgs replaces the arguments Execute parses (os.Args[1:] by default).
func (c *command) SetArgs(args []string) { c.args = args }

// SetErr replaces where Execute reports an error (os.Stderr by default).
func (c *command) SetErr(w io.Writer) { c.err = w }

// Execute parses the arguments and runs the demo until it ends or SIGINT/SIGTERM; --help prints
// the usage to out and returns nil.
func (c *command) Execute() error {
	if err := c.flags.Parse(c.args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.usage()
			return nil
		}
		fmt.Fprintf(c.err, "demo: %v (demo --help lists the flags)\n", err)
		return err
	}
	if c.flags.NArg() > 0 {
		err := fmt.Errorf("unexpected arguments %q: the demo takes flags only", c.flags.Args())
		fmt.Fprintln(c.err, "demo:", err)
		return err
	}
	cfg := c.cfg
	cfg.uri = os.Getenv("MONGODB_URI")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, cfg, c.out)
	if err != nil {
		fmt.Fprintln(c.err, "demo:", err)
	}
	return err
}

// usage prints what the demo does and its flags, with their defaults, to out.
func (c *command) usage() {
	fmt.Fprint(c.out, "demo starts two pods (processes with a watchtree runtime and its console each). The\n"+
		"SingleLeader stream \"orders\" charges each order inserted into <db>.orders once into\n"+
		"<db>.payments, idempotent by the event ID; poison orders end as dead letters. The\n"+
		"AllInstances stream \"products\" invalidates each pod's price cache. Midway a fail point\n"+
		"kills the leader's cursor (the supervisor restarts it) and the leader pod is killed\n"+
		"with SIGKILL (the standby takes over from the checkpoint); one dead letter is replayed\n"+
		"through the console. MONGODB_URI selects a real replica set; unset, an embedded mongosim\n"+
		"is started.\n\n"+
		"The demo works in the database --db (default "+defaultDB+"). Before it starts it drops\n"+
		"the collections it owns there ("+strings.Join(demoCollections, ", ")+"),\n"+
		"printing which. It refuses a database that holds any other collection: it then drops\n"+
		"nothing, names the foreign collections and exits 1. It exits 1 when an order was lost.\n\n"+
		"Usage:\n  demo [flags]\n\nFlags:\n")
	tw := tabwriter.NewWriter(c.out, 0, 0, 3, ' ', 0)
	c.flags.VisitAll(func(f *flag.Flag) {
		typ, usage := flag.UnquoteUsage(f)
		name := "--" + f.Name
		if typ != "" {
			name += " " + typ
		}
		switch {
		case f.DefValue == "" || f.DefValue == "false" || f.DefValue == "0":
		case typ == "string":
			usage += fmt.Sprintf(" (default %q)", f.DefValue)
		default:
			usage += " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\n", name, usage)
	})
	fmt.Fprintf(tw, "  -h, --help\thelp for demo\n")
	_ = tw.Flush()
}

// Order is a document of <db>.orders.
type Order struct {
	ID       int64   `bson:"_id"`
	Customer string  `bson:"customer"`
	Amount   float64 `bson:"amount"`
	Poison   bool    `bson:"poison,omitempty"`
}

// Payment is a document of <db>.payments: the charge of one order, keyed by the ID of the event
// that charged it. Redeliveries counts the redeliveries of that event the handler absorbed.
type Payment struct {
	ID           string    `bson:"_id"`
	Order        int64     `bson:"order"`
	Amount       float64   `bson:"amount"`
	Pod          string    `bson:"pod"`
	At           time.Time `bson:"at"`
	Redeliveries int64     `bson:"redeliveries,omitempty"`
}

// Product is a document of <db>.products; every change replaces it with the next Version.
type Product struct {
	ID      int64   `bson:"_id"`
	Price   float64 `bson:"price"`
	Version int64   `bson:"version"`
}

func (c config) validate() error {
	var errs []error
	if c.orders <= 0 {
		errs = append(errs, fmt.Errorf("--orders must be > 0, got %d", c.orders))
	}
	if c.rate <= 0 {
		errs = append(errs, fmt.Errorf("--rate must be > 0, got %d", c.rate))
	}
	if c.productRate < 0 {
		errs = append(errs, fmt.Errorf("--product-rate must be >= 0, got %d", c.productRate))
	}
	if c.poisonEvery < 0 {
		errs = append(errs, fmt.Errorf("--poison-every must be >= 0, got %d", c.poisonEvery))
	}
	if c.lanes <= 0 || c.lanes > 1024 {
		errs = append(errs, fmt.Errorf("--lanes must be between 1 and 1024, got %d", c.lanes))
	}
	if c.leaseTTL < 600*time.Millisecond {
		errs = append(errs, fmt.Errorf("--lease-ttl must be >= 600ms, got %v", c.leaseTTL))
	}
	if c.timeout <= 0 || c.progress <= 0 {
		errs = append(errs, fmt.Errorf("--timeout and --progress must be > 0, got %v and %v", c.timeout, c.progress))
	}
	if c.db == "" {
		errs = append(errs, errors.New("--db must not be empty"))
	}
	return errors.Join(errs...)
}

func run(ctx context.Context, cfg config, out io.Writer) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	holdCtx := ctx // --hold waits on the caller's context, not on --timeout
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	out = &syncWriter{w: out} // the pods' reports and the progress lines write too

	uri := cfg.uri
	if uri == "" {
		srv, err := mongosim.Start(ctx, mongosim.Options{Addr: cfg.simAddr})
		if err != nil {
			return err
		}
		defer srv.Close()
		uri = srv.URI()
		fmt.Fprintf(out, "MONGODB_URI is not set: started the embedded mongosim (a MongoDB replica set simulator) at %s\n", uri)
		fmt.Fprintf(out, "  look inside while it runs: mongosh %q (--hold keeps it serving after the summary)\n", uri)
	} else {
		fmt.Fprintf(out, "using MONGODB_URI, database %s\n", cfg.db)
	}
	client, err := connect(uri, "watchtree-demo")
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
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("the demo starts its pods as copies of itself: %w", err)
	}
	d, err := newDemo(cfg, uri, exe, db, out)
	if err != nil {
		return err
	}
	defer d.killPods() // whatever happens, no pod outlives the demo
	return d.run(ctx, holdCtx)
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
	// In demoCollections order, which reads the demo's documents, then watchtree's records.
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
