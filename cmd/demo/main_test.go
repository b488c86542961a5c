package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/goleak"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/console"
	"github.com/watchtree/watchtree/test/mongosim"
)

// TestMain runs the test binary as a demo pod when the demo re-executes it (as the demo's own
// binary does), and otherwise the tests, failing them if any goroutine outlives them.
func TestMain(m *testing.M) {
	if raw := os.Getenv(envPod); raw != "" {
		os.Exit(podMain(raw))
	}
	goleak.VerifyTestMain(m)
}

// shortConfig is the demo with short settings: 600 orders at 300/s, on the replica set of
// WATCHTREE_MONGODB_URI when set (as for every integration test), else the embedded mongosim.
func shortConfig() config {
	return config{uri: os.Getenv("WATCHTREE_MONGODB_URI"), db: defaultDB, orders: 600, rate: 300, productRate: 20, poisonEvery: 50, lanes: 4,
		leaseTTL: 3 * time.Second, timeout: 55 * time.Second, progress: 250 * time.Millisecond, simAddr: "127.0.0.1:0"}
}

// summaryRow returns the figure of the summary row name (its first field after the name).
func summaryRow(t *testing.T, out, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(name) + `\s{2,}(\S+)\s`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no summary row %q:\n%s", name, out)
	}
	return m[1]
}

func summaryInt(t *testing.T, out, name string) int {
	t.Helper()
	v, err := strconv.Atoi(summaryRow(t, out, name))
	if err != nil {
		t.Fatalf("summary row %q: %v", name, err)
	}
	return v
}

// TestDemoEmbeddedShowsEveryGuarantee runs the demo small, two pod processes on the embedded
// mongosim: the cursor kill shows the supervisor's backoff and restart, the SIGKILL of the
// leader a takeover from the checkpoint, the dead letter replay a charge, and the summary adds
// up with nothing lost and no stale cache entry.
func TestDemoEmbeddedShowsEveryGuarantee(t *testing.T) {
	var out lockedBuffer
	cfg := shortConfig()
	if err := run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	s := out.String()
	patterns := []string{
		`database watchtree_demo (holds no collections: nothing to drop|.*it holds no others)`,
		`pod-a console at 127\.0\.0\.1:\d+; inspect it: go run -C cmd/watchtree \. --addr 127\.0\.0\.1:\d+ streams`,
		`pod-b console at 127\.0\.0\.1:\d+`,
		`\[pod-.\] stream orders: leader \(epoch 1\)`,
		`\[#*\.*\] handled\s+\d+ /\s+\d+ written\s+leader pod-.`, // a progress line
		`SIGKILL of pod-., the leader of orders`,
		`\[pod-.\] stream orders: leader \(epoch 2\): [0-9.]+m?s after the SIGKILL of pod-.`,
		`after the SIGKILL of pod-(.|\n)*\[pod-.\] stream orders started from checkpoint\n`, // the new leader resumes
		`\[pod-.\] worked off the backlog of \d+ orders in`,
		// The restarted pod resumes its own products position (checkpoints every 250ms).
		`starting (pod-.) again(.|\n)*\[pod-.\] stream products started from checkpoint`,
		`replayed the dead letter of order 50 \(3 attempts: "order 50: card of c050 declined"\)`,
	}
	if cfg.uri == "" {
		patterns = append(patterns, `started the embedded mongosim`)
	}
	// The backoff and the restart, as the leader pod's Observer reported them; a real server
	// without test commands refuses the fail point, and the demo says so.
	failPoint := !strings.Contains(s, "the server refused configureFailPoint")
	if failPoint {
		patterns = append(patterns,
			`\[pod-.\] stream orders stopped \(crashed\), restart attempt 1 in \d+(\.\d+)?ms: .*HostUnreachable`,
			`\[pod-.\] stream orders restarted \(attempt 1\) after: .*HostUnreachable`)
	}
	for _, want := range patterns {
		if !regexp.MustCompile(want).MatchString(s) {
			t.Errorf("output lacks %q", want)
		}
	}
	// The summary adds up.
	written, handled := summaryInt(t, s, "written"), summaryInt(t, s, "handled")
	charged, dls, lost := summaryInt(t, s, "charged"), summaryInt(t, s, "dead letters"), summaryInt(t, s, "lost")
	if written != 600 || handled != charged+dls || written != handled+lost || lost != 0 {
		t.Errorf("written %d, handled %d = charged %d + dead letters %d, lost %d: want 600 written, all handled, 0 lost",
			written, handled, charged, dls, lost)
	}
	if dls != 600/50-1 { // every poison order but the replayed one
		t.Errorf("dead letters %d, want %d", dls, 600/50-1)
	}
	if n := summaryInt(t, s, "charged twice"); n != 0 {
		t.Errorf("charged twice %d", n)
	}
	if n := summaryInt(t, s, "restarts"); failPoint && n < 1 {
		t.Errorf("restarts %d, want the cursor kill's restart", n)
	}
	if f, err := time.ParseDuration(summaryRow(t, s, "failover")); err != nil || f <= 0 || f > 2*cfg.leaseTTL {
		t.Errorf("failover %q (%v), want about the lease TTL %v", summaryRow(t, s, "failover"), err, cfg.leaseTTL)
	}
	for _, r := range []string{"throughput", "catch-up"} {
		if !regexp.MustCompile(`^\d+/s$`).MatchString(summaryRow(t, s, r)) {
			t.Errorf("%s %q, want orders/s", r, summaryRow(t, s, r))
		}
	}
	if !regexp.MustCompile(`pod-a \d+ cached, 0 stale; pod-b \d+ cached, 0 stale|pod-b \d+ cached, 0 stale; pod-a \d+ cached, 0 stale`).MatchString(s) {
		t.Errorf("the cache check of both pods is missing or found stale prices")
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", s)
	}
}

func TestDemoRejectsBadFlags(t *testing.T) {
	cfg := shortConfig()
	cfg.orders, cfg.lanes, cfg.leaseTTL = 0, 2000, time.Millisecond
	err := run(context.Background(), cfg, &bytes.Buffer{})
	for _, want := range []string{"--orders must be > 0, got 0", "--lanes must be between 1 and 1024, got 2000", "--lease-ttl must be >= 600ms, got 1ms"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to say %q", err, want)
		}
	}
}

// startSim starts a mongosim and connects a client to it; both end with the test.
func startSim(t *testing.T) (*mongosim.Server, *mongo.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv, err := mongosim.Start(ctx, mongosim.Options{})
	if err != nil {
		t.Fatalf("mongosim: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { disconnect(client) })
	return srv, client
}

func insert(t *testing.T, db *mongo.Database, coll string) {
	t.Helper()
	if _, err := db.Collection(coll).InsertOne(context.Background(), bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatalf("insert into %s.%s: %v", db.Name(), coll, err)
	}
}

func collections(t *testing.T, db *mongo.Database) []string {
	t.Helper()
	names, err := db.ListCollectionNames(context.Background(), bson.D{})
	if err != nil {
		t.Fatalf("list collections of %s: %v", db.Name(), err)
	}
	slices.Sort(names)
	return names
}

// TestDemoRefusesDatabaseWithForeignCollections points the demo (through its command line, as
// MONGODB_URI=... make demo does) at a database that holds a collection of someone else's: it
// fails naming the database and that collection, and drops nothing, not even its own
// collections there.
func TestDemoRefusesDatabaseWithForeignCollections(t *testing.T) {
	srv, client := startSim(t)
	shop := client.Database("shop")
	for _, c := range []string{"orders", "customers", "_wt_checkpoints"} {
		insert(t, shop, c)
	}
	before := collections(t, shop)

	t.Setenv("MONGODB_URI", srv.URI())
	var out, stderr bytes.Buffer
	cmd := newCommand(&out)
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{"--db", "shop", "--orders", "10"})
	err := cmd.Execute()
	if !errors.Is(err, errForeignCollections) {
		t.Fatalf("Execute: %v, want errForeignCollections\nstdout:\n%s", err, out.String())
	}
	for _, want := range []string{"database shop", "customers", "nothing was dropped", "--db"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q: %s", want, stderr.String())
		}
	}
	if !strings.Contains(err.Error(), "database shop holds customers;") {
		t.Errorf("want exactly customers named as foreign, got: %v", err)
	}
	if strings.Contains(out.String(), "dropping") {
		t.Errorf("announced a drop it must not do:\n%s", out.String())
	}
	if after := collections(t, shop); !slices.Equal(after, before) {
		t.Fatalf("collections of shop changed: %v, want %v", after, before)
	}
	for _, c := range before {
		if n, err := shop.Collection(c).CountDocuments(context.Background(), bson.D{}); err != nil || n != 1 {
			t.Errorf("shop.%s holds %d documents (err %v), want its 1", c, n, err)
		}
	}
}

// TestResetDatabaseDropsOnlyAfterSayingSo: with only demo collections in the database, they are
// announced, by name, before they are dropped, and the other databases are untouched.
func TestResetDatabaseDropsOnlyAfterSayingSo(t *testing.T) {
	_, client := startSim(t)
	db := client.Database(defaultDB)
	insert(t, db, "payments")
	insert(t, db, "_wt_gaps")
	insert(t, db, "orders")
	other := client.Database("shop")
	insert(t, other, "customers")

	var out bytes.Buffer
	if err := resetDatabase(context.Background(), db, &out); err != nil {
		t.Fatalf("resetDatabase: %v", err)
	}
	want := "dropping the demo's collections left in database watchtree_demo (it holds no others): " +
		"watchtree_demo.orders, watchtree_demo.payments, watchtree_demo._wt_gaps\n"
	if out.String() != want {
		t.Errorf("announcement:\n%q\nwant\n%q", out.String(), want)
	}
	if left := collections(t, db); len(left) != 0 {
		t.Errorf("left in %s: %v", defaultDB, left)
	}
	if left := collections(t, other); !slices.Equal(left, []string{"customers"}) {
		t.Errorf("shop holds %v, want [customers]", left)
	}
}

func TestAnnouncement(t *testing.T) {
	for _, tc := range []struct {
		own  []string
		want string
	}{
		{nil, "database demo1 holds no collections: nothing to drop"},
		{[]string{"_wt_dead_letters", "_wt_checkpoints", "payments", "orders", "_wt_gaps"},
			"dropping the demo's collections left in database demo1 (it holds no others): demo1.orders, " +
				"demo1.payments, demo1._wt_checkpoints, demo1._wt_dead_letters, demo1._wt_gaps"},
	} {
		if got := announcement("demo1", tc.own); got != tc.want {
			t.Errorf("announcement(%v):\n%q\nwant\n%q", tc.own, got, tc.want)
		}
	}
}

// TestDemoDefaultDatabase: with no --db the demo uses its own database, and --help says so,
// together with what it drops and when it refuses.
func TestDemoDefaultDatabase(t *testing.T) {
	var out bytes.Buffer
	cmd := newCommand(&out)
	if f := cmd.Flags().Lookup("db"); f == nil || f.DefValue != "watchtree_demo" {
		t.Fatalf("--db flag %+v, want default watchtree_demo", f)
	}
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("--help: %v", err)
	}
	help := out.String()
	for _, want := range append([]string{"--db", "default watchtree_demo", "refuses", "drops"}, demoCollections...) {
		if !strings.Contains(help, want) {
			t.Errorf("--help lacks %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, "shop") {
		t.Errorf("--help still mentions the old default database shop:\n%s", help)
	}
}

// lockedBuffer is a bytes.Buffer safe to read while run writes to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// With --hold the pods keep running after the summary, their consoles open, until the run's
// context ends; then they stop gracefully and the run succeeds.
func TestDemoHoldKeepsThePodsRunning(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &lockedBuffer{}
	cfg := shortConfig()
	cfg.orders, cfg.hold, cfg.noCursorKill = 300, true, true
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, out) }()
	holdLine := regexp.MustCompile(`go run -C cmd/watchtree \. --addr (127\.0\.0\.1:\d+) top\s+# (pod-.)\n`)
	var addr string
	deadline := time.Now().Add(55 * time.Second)
	for addr == "" {
		if m := holdLine.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
			break
		}
		select {
		case err := <-done:
			t.Fatalf("run ended before holding: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no --hold line:\n%s", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "--no-cursor-kill: the leader's cursor is left alone") {
		t.Errorf("--no-cursor-kill is not reported:\n%s", out.String())
	}
	// The held pod answers on its console, as the watchtree CLI would ask it.
	c, err := console.Dial(addr, console.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	qctx, qcancel := context.WithTimeout(ctx, 10*time.Second)
	reply, err := c.DeadLetters(qctx, ordersStream, 0)
	qcancel()
	_ = c.Close()
	if err != nil || len(reply.GetDeadLetters()) != 300/50-1 {
		t.Fatalf("dead letters through the held console: %v, %v; want %d", reply, err, 300/50-1)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run after the hold: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "stopping the pods gracefully") {
		t.Errorf("the pods were not stopped after the hold:\n%s", out.String())
	}
}

// TestChargeIsIdempotentByEventID unit-tests the orders handler with built events
// (watchtree.TestEvent): a redelivered event finds its payment and is absorbed; a poison order
// is declined until its card is fixed.
func TestChargeIsIdempotentByEventID(t *testing.T) {
	_, client := startSim(t)
	ctx := context.Background()
	p := &pod{cfg: podConfig{Name: "pod-t"}, db: client.Database("charge_test")}
	ev, err := watchtree.TestEvent[Order]{Stream: ordersStream, FullDocument: &Order{ID: 1, Customer: "c001", Amount: 10}}.Build()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // delivered, then redelivered
		if err := p.charge(ctx, ev); err != nil {
			t.Fatalf("charge: %v", err)
		}
	}
	var pays []Payment
	cur, err := p.db.Collection("payments").Find(ctx, bson.D{})
	if err != nil || cur.All(ctx, &pays) != nil {
		t.Fatalf("payments: %v", err)
	}
	if len(pays) != 1 || pays[0].ID != ev.ID() || pays[0].Order != 1 || pays[0].Redeliveries != 1 || pays[0].Pod != "pod-t" {
		t.Fatalf("payments %+v: want one for order 1, keyed by the event ID, 1 redelivery absorbed", pays)
	}
	if c := p.counts.get(); c.Charged != 1 || c.Absorbed != 1 || c.Calls != 2 {
		t.Errorf("counts %+v", c)
	}

	poison, err := watchtree.TestEvent[Order]{FullDocument: &Order{ID: 2, Customer: "c002", Poison: true}}.Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.charge(ctx, poison); err == nil || err.Error() != "order 2: card of c002 declined" {
		t.Fatalf("poison charge: %v, want declined", err)
	}
	if _, err := p.db.Collection("fixes").InsertOne(ctx, bson.D{{Key: "_id", Value: int64(2)}}); err != nil {
		t.Fatal(err)
	}
	if err := p.charge(ctx, poison); err != nil {
		t.Fatalf("charge after the fix: %v", err)
	}
	if n, _ := p.db.Collection("payments").CountDocuments(ctx, bson.D{{Key: "order", Value: int64(2)}}); n != 1 {
		t.Errorf("order 2 has %d payments after the fix, want 1", n)
	}
}

// TestCacheInvalidationKeepsNoOlderPrice: a change evicts an older cached price, not a newer one,
// and a read that raced the change cannot store the price it replaced.
func TestCacheInvalidationKeepsNoOlderPrice(t *testing.T) {
	_, client := startSim(t)
	ctx := context.Background()
	products := client.Database("cache_test").Collection("products")
	if _, err := products.InsertOne(ctx, Product{ID: 1, Price: 10, Version: 1}); err != nil {
		t.Fatal(err)
	}
	p := &pod{cache: newPriceCache(products)}
	if hit, err := p.cache.price(ctx, 1); err != nil || hit {
		t.Fatalf("first read: hit %v, %v; want a miss", hit, err)
	}
	change := func(v int64) {
		t.Helper()
		ev, err := watchtree.TestEvent[Product]{OperationType: watchtree.OpReplace, FullDocument: &Product{ID: 1, Price: float64(10 + v), Version: v}}.Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := p.invalidate(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	change(1) // the version cached: kept
	if hit, _ := p.cache.price(ctx, 1); !hit {
		t.Error("a change to the cached version evicted it")
	}
	change(2) // newer: evicted; the database still has version 1 (the read raced the write)
	if hit, _ := p.cache.price(ctx, 1); hit {
		t.Error("a newer change did not evict")
	}
	if _, cached := p.cache.entries[1]; cached {
		t.Error("a read of version 1 after the change to version 2 was cached")
	}
	if _, err := products.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 1}}, Product{ID: 1, Price: 12, Version: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.cache.price(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if cached, stale, err := p.cache.check(ctx); err != nil || cached != 1 || stale != 0 {
		t.Errorf("check: %d cached, %d stale, %v; want 1 fresh", cached, stale, err)
	}
	if !p.cache.seen(1, 2) || p.cache.seen(1, 3) {
		t.Error("seen does not follow the changes handled")
	}
}
