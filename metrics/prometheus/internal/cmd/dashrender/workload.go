package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/health"
	wtprom "github.com/watchtree/watchtree/metrics/prometheus"
	"github.com/watchtree/watchtree/test/mongosim"
)

// database is the database the workload writes and the runtimes watch.
const database = "shop"

// doc is every document the workload writes.
type doc struct {
	ID int64 `bson:"_id"`
}

// node is one watchtree instance of the run: its runtime, its Prometheus adapter and the HTTP
// server of its /metrics (health.Handler, as an application mounts it).
type node struct {
	name   string
	client *mongo.Client
	rt     *watchtree.Runtime
	addr   string // host:port of /metrics
	hs     map[string]*watchtree.Handle
}

// workload is the run the dashboard shows: mongosim, two instances sharing its lease store, and
// streams that see steady inserts, retries, dead letters, bursts that build lag, restarts of a
// dedicated cursor, a stream whose restarts give up, and leader changes of a SingleLeader
// stream.
type workload struct {
	sim     *mongosim.Server
	writer  *mongo.Client
	nodes   []*node
	closers []func() // what close undoes, in start order
}

// Application names of the clients that fail points target: a fail point with appName hits
// that client's commands only.
const (
	paymentsApp = "dash-payments"
	auditApp    = "dash-audit"
)

// startWorkload starts mongosim and both instances, spawns the streams and serves /metrics.
// On error everything started so far is closed.
func startWorkload(ctx context.Context) (w *workload, err error) {
	w = &workload{}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	if w.sim, err = mongosim.Start(ctx, mongosim.Options{}); err != nil {
		return nil, fmt.Errorf("mongosim: %w", err)
	}
	w.closers = append(w.closers, func() { _ = w.sim.Close() })
	if w.writer, err = w.connect("dash-writer"); err != nil {
		return nil, err
	}
	for _, name := range []string{"node-a", "node-b"} {
		n, err := w.startNode(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		w.nodes = append(w.nodes, n)
	}
	if err := w.spawn(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// connect returns a client of mongosim with an application name, closed by close.
func (w *workload) connect(app string) (*mongo.Client, error) {
	c, err := mongo.Connect(options.Client().ApplyURI(w.sim.URI()).SetAppName(app))
	if err != nil {
		return nil, err
	}
	w.closers = append(w.closers, func() { _ = c.Disconnect(context.Background()) })
	return c, nil
}

// startNode starts one instance with the Prometheus adapter and serves its /metrics.
func (w *workload) startNode(ctx context.Context, name string) (*node, error) {
	client, err := w.connect("dash-" + name)
	if err != nil {
		return nil, err
	}
	m := wtprom.New(wtprom.Options{})
	rt, err := watchtree.New(watchtree.Config{Client: client, Database: database, Observer: m,
		InstanceName: name, ShutdownTimeout: 5 * time.Second,
		// Short leases, so that a released lease is taken over within a second or two.
		Lease: watchtree.LeasePolicy{TTL: 6 * time.Second, RenewEvery: time.Second, StandbyPoll: time.Second,
			Balance: watchtree.BalanceOff}})
	if err != nil {
		return nil, err
	}
	if err := rt.Start(ctx); err != nil {
		return nil, err
	}
	w.closers = append(w.closers, func() { _ = rt.Stop(context.Background()) })
	if err := m.Attach(rt); err != nil {
		return nil, err
	}
	reg := prom.NewRegistry()
	reg.MustRegister(m)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: health.Handler(rt, health.Options{Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}),
		ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	w.closers = append(w.closers, func() { _ = srv.Close() })
	return &node{name: name, client: client, rt: rt, addr: l.Addr().String(), hs: map[string]*watchtree.Handle{}}, nil
}

// targets returns the /metrics addresses Prometheus scrapes.
func (w *workload) targets() []string {
	out := make([]string, len(w.nodes))
	for i, n := range w.nodes {
		out[i] = n.addr
	}
	return out
}

// spawn starts the streams: orders, payments, reports and audit on node-a, invoices (a
// SingleLeader stream) on both.
func (w *workload) spawn(ctx context.Context) error {
	a := w.nodes[0]
	payments, err := w.connect(paymentsApp)
	if err != nil {
		return err
	}
	audit, err := w.connect(auditApp)
	if err != nil {
		return err
	}
	quick := func(context.Context, *watchtree.Event[doc]) error { return nil }
	specs := []struct {
		n    *node
		spec watchtree.Spec
	}{
		// Steady traffic with handler latency spread over milliseconds; one in seven orders
		// fails its first attempt (a retry), one in forty every attempt (a dead letter).
		{a, watchtree.Stream[doc]{Name: "orders", Collection: "orders",
			Retry:    watchtree.RetryPolicy{MaxAttempts: 3, InitialDelay: 50 * time.Millisecond},
			OnInsert: w.handleOrder}},
		// A cursor of its own on its own client: a getMore fail point kills it, the
		// RestartPolicy brings it back.
		{a, watchtree.Stream[doc]{Name: "payments", Collection: "payments", Client: payments, Cursor: watchtree.Dedicated,
			Restart:  watchtree.RestartPolicy{InitialDelay: 500 * time.Millisecond, MaxDelay: 4 * time.Second},
			OnInsert: quick}},
		// A slow handler on one lane: a burst builds lag that drains at ~8 events/s.
		{a, watchtree.Stream[doc]{Name: "reports", Collection: "reports", Lanes: 1,
			OnInsert: func(ctx context.Context, _ *watchtree.Event[doc]) error { return pause(ctx, 120*time.Millisecond) }}},
		// Watches orders too, on a cursor of its own; its RestartPolicy gives up after two
		// restarts, so a crash loop ends crashed (a terminal stop).
		{a, watchtree.Stream[doc]{Name: "audit", Collection: "orders", Client: audit, Cursor: watchtree.Dedicated,
			Restart:  watchtree.RestartPolicy{MaxAttempts: 2, InitialDelay: 300 * time.Millisecond},
			OnInsert: quick}},
	}
	for _, n := range w.nodes {
		specs = append(specs, struct {
			n    *node
			spec watchtree.Spec
		}{n, watchtree.Stream[doc]{Name: "invoices", Collection: "invoices", Mode: watchtree.SingleLeader, OnInsert: quick}})
	}
	for _, s := range specs {
		h, err := s.n.rt.Spawn(ctx, s.spec)
		if err != nil {
			return fmt.Errorf("%s: spawn: %w", s.n.name, err)
		}
		s.n.hs[h.Name()] = h
	}
	return nil
}

// handleOrder takes a few milliseconds (log-normal, median 6ms), fails the first attempt of
// every seventh order and every attempt of every fortieth.
func (w *workload) handleOrder(ctx context.Context, ev *watchtree.Event[doc]) error {
	id := ev.FullDocument.ID
	if err := pause(ctx, time.Duration(6e6*math.Exp(0.8*rand.NormFloat64()))); err != nil {
		return err
	}
	switch {
	case id%40 == 0:
		return errors.New("order refused: no such customer")
	case id%7 == 0 && ev.Attempt() == 1:
		return errors.New("inventory service timed out")
	}
	return nil
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run drives the workload for d: inserts all along, and the scripted faults at fixed
// fractions of d. It returns early with ctx's error.
func (w *workload) run(ctx context.Context, d time.Duration, logf func(string, ...any)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- w.insert(ctx) }()
	start := time.Now()
	script := []struct {
		at   float64
		what string
		do   func(context.Context) error
	}{
		{0.12, "burst of 40 reports", func(ctx context.Context) error { return w.burst(ctx, "reports", 40) }},
		{0.25, "payments: getMore fails once (restart)", func(ctx context.Context) error { return w.failCommands(ctx, paymentsApp, 1, 6, "getMore") }},
		{0.35, "invoices: the leader hands over", w.handover},
		{0.45, "burst of 60 reports", func(ctx context.Context) error { return w.burst(ctx, "reports", 60) }},
		{0.55, "payments: getMore fails 3 times (restarts with backoff)", func(ctx context.Context) error { return w.failCommands(ctx, paymentsApp, 3, 6, "getMore") }},
		{0.70, "invoices: the leader hands over", w.handover},
		{0.78, "audit: getMore and aggregate keep failing (its RestartPolicy gives up)", func(ctx context.Context) error {
			return w.failCommands(ctx, auditApp, 10, 50, "getMore", "aggregate")
		}},
		{0.85, "burst of 40 reports", func(ctx context.Context) error { return w.burst(ctx, "reports", 40) }},
	}
	for _, s := range script {
		if err := pause(ctx, time.Until(start.Add(time.Duration(s.at*float64(d))))); err != nil {
			return err
		}
		logf("%s: %s", time.Since(start).Round(time.Second), s.what)
		if err := s.do(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
	}
	select {
	case err := <-errc:
		return err
	case <-time.After(time.Until(start.Add(d))):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// insert writes an order every 100ms, a payment every 200ms and an invoice every 300ms until
// ctx ends.
func (w *workload) insert(ctx context.Context) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	db := w.writer.Database(database)
	for i := int64(1); ; i++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		writes := []string{"orders"}
		if i%2 == 0 {
			writes = append(writes, "payments")
		}
		if i%3 == 0 {
			writes = append(writes, "invoices")
		}
		for _, coll := range writes {
			if _, err := db.Collection(coll).InsertOne(ctx, doc{ID: i}); err != nil && ctx.Err() == nil {
				return fmt.Errorf("insert into %s: %w", coll, err)
			}
		}
	}
}

// burst inserts n documents into coll at once.
func (w *workload) burst(ctx context.Context, coll string, n int) error {
	base := time.Now().UnixNano()
	docs := make([]any, n)
	for i := range docs {
		docs[i] = doc{ID: base + int64(i)}
	}
	_, err := w.writer.Database(database).Collection(coll).InsertMany(ctx, docs)
	return err
}

// failCommands makes the next times commands named cmds of the client named app fail with
// code, without error labels. HostUnreachable (6) on a getMore kills the change stream's
// cursor (its supervisor restarts it); MaxTimeMSExpired (50) is neither a retryable read nor
// resumable, so a failed aggregate also fails the restart: a restart that resubscribes resets
// the RestartPolicy's attempt count, one that cannot does not.
func (w *workload) failCommands(ctx context.Context, app string, times, code int, cmds ...string) error {
	names := bson.A{}
	for _, c := range cmds {
		names = append(names, c)
	}
	fp := bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: times}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: names}, {Key: "errorCode", Value: code},
			{Key: "errorLabels", Value: bson.A{}}, {Key: "appName", Value: app}}}}
	return w.writer.Database("admin").RunCommand(ctx, fp).Err()
}

// handover stops invoices on the instance that leads it (which releases the lease), waits until
// the other instance leads, then starts it again on the first, where it stands by.
func (w *workload) handover(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	leader := -1
	for i, n := range w.nodes {
		st, err := n.hs["invoices"].Status(ctx)
		if err != nil {
			return err
		}
		if st.Lease != nil && st.Lease.Role == watchtree.RoleLeader {
			leader = i
		}
	}
	if leader < 0 {
		return errors.New("no instance leads invoices")
	}
	from, to := w.nodes[leader], w.nodes[1-leader]
	if err := from.hs["invoices"].Stop(ctx); err != nil {
		return err
	}
	for {
		st, err := to.hs["invoices"].Status(ctx)
		if err != nil {
			return err
		}
		if st.Lease != nil && st.Lease.Role == watchtree.RoleLeader {
			break
		}
		if err := pause(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("%s did not take invoices over: %w", to.name, err)
		}
	}
	return from.hs["invoices"].Start(ctx)
}

// close stops everything startWorkload started, the latest first.
func (w *workload) close() {
	for i := len(w.closers) - 1; i >= 0; i-- {
		w.closers[i]()
	}
	w.closers = nil
}
