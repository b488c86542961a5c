package main

import (
	"bytes"
	"context"
	"errors"
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

	"github.com/watchtree/watchtree/test/mongosim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDemoEmbeddedChargesEveryOrderOnce runs the demo small: every order is charged once or
// dead-lettered (the poison ones), nothing is lost, and the summary says so.
func TestDemoEmbeddedChargesEveryOrderOnce(t *testing.T) {
	var out bytes.Buffer
	cfg := config{db: defaultDB, orders: 400, poisonEvery: 50, lanes: 4, rate: 2000,
		timeout: 50 * time.Second, progress: 50 * time.Millisecond}
	if err := run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{
		`started the embedded mongosim`,
		`database watchtree_demo holds no collections: nothing to drop`,
		`written\s+\d+ orders, charged\s+\d+`, // a progress line
		`crash: runtime stopped after \d+ charges \(cut short`,
		`restart: a new runtime resumes the stream from its checkpoint`,
		`written\s+400\s`,
		`charged\s+392\s+orders with a payment, 0 of them charged twice`,
		`dead letters\s+8\s`,
		`lost\s+0\s`,
		`replays absorbed\s+\d+\s`,
		`events/s\s+\d+\s`,
		`first dead letter \(rt.DeadLetters\): order \d+, 3 attempts, error "order \d+: card declined"`,
	} {
		if !regexp.MustCompile(want).MatchString(s) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	// Every handler call is accounted for.
	m := regexp.MustCompile(`handled\s+(\d+)\s+handler calls: (\d+) charges, (\d+) replays, (\d+) declined attempts, (\d+) failed`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no handled row:\n%s", s)
	}
	n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
	if n(1) != n(2)+n(3)+n(4)+n(5) || n(4) < 8*3 {
		t.Errorf("handled %d = %d charges + %d replays + %d declined + %d failed: want the sum, and 3 declined attempts per poison order", n(1), n(2), n(3), n(4), n(5))
	}
	t.Logf("demo output:\n%s", s)
}

func TestDemoRejectsBadFlags(t *testing.T) {
	if err := run(context.Background(), config{orders: 0, lanes: 1, progress: time.Second}, &bytes.Buffer{}); err == nil {
		t.Fatal("want an error for --orders 0")
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

// With --hold the embedded mongosim keeps serving after the summary, at the address asked for,
// so that a user can look at the demo's data (with mongosh, here with the driver), until the
// run's context ends.
func TestDemoHoldKeepsTheSimulatorServing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &lockedBuffer{}
	cfg := config{db: defaultDB, orders: 200, poisonEvery: 50, lanes: 2, rate: 2000,
		timeout: 50 * time.Second, progress: time.Second, hold: true, simAddr: "127.0.0.1:0"}
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, out) }()
	holdLine := regexp.MustCompile(`--hold: the embedded mongosim serves until Ctrl-C: mongosh "(mongodb://[^"]+)"`)
	var uri string
	deadline := time.Now().Add(50 * time.Second)
	for uri == "" {
		if m := holdLine.FindStringSubmatch(out.String()); m != nil {
			uri = m[1]
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
	if !strings.Contains(out.String(), `look inside while it runs: mongosh "`+uri+`"`) {
		t.Errorf("the start-up line does not give the mongosh command:\n%s", out.String())
	}
	cl, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	qctx, qcancel := context.WithTimeout(ctx, 10*time.Second)
	n, err := cl.Database(defaultDB).Collection("payments").CountDocuments(qctx, bson.D{})
	qcancel()
	_ = cl.Disconnect(context.Background())
	if err != nil || n != 196 {
		t.Fatalf("payments while held = %d, %v; want 196", n, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run after the hold: %v", err)
	}
	if err := run(context.Background(), config{uri: "mongodb://127.0.0.1:1", db: defaultDB, orders: 1, lanes: 1, progress: time.Second, hold: true}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "--hold") {
		t.Fatalf("--hold with MONGODB_URI = %v", err)
	}
}
