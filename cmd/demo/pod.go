package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
)

// envPod holds a pod's podConfig (JSON): set, the demo's binary runs as that pod instead of as
// the demo (the demo starts its pods by re-executing itself).
const envPod = "WATCHTREE_DEMO_POD"

// podConfig is what the demo hands a pod process.
type podConfig struct {
	Name     string        `json:"name"` // the pod's InstanceName: "pod-a", "pod-b"
	Run      int           `json:"run"`  // 1 for the first process of the pod, 2 after a restart
	URI      string        `json:"uri"`
	DB       string        `json:"db"`
	Lanes    int           `json:"lanes"`
	LeaseTTL time.Duration `json:"lease_ttl"`
	Verbose  bool          `json:"verbose"`
}

// chargeAttempts is the orders stream's RetryPolicy.MaxAttempts: a poison order is declined
// this many times before its dead letter.
const chargeAttempts = 3

// ordersApp is the application name of a pod's client for the orders cursor: the demo's fail
// point is scoped to it, so that it kills that pod's orders cursor and nothing else.
func ordersApp(pod string) string { return "watchtree-demo-" + pod + "-orders" }

// leasePolicy is the pods' lease: short, so that the failover after a SIGKILL (about TTL) fits
// in the demo. RenewEvery TTL/4 and Margin TTL/6 leave room for two renewals before a leader
// that cannot renew stops.
func leasePolicy(ttl time.Duration) watchtree.LeasePolicy {
	return watchtree.LeasePolicy{TTL: ttl, RenewEvery: ttl / 4, StandbyPoll: ttl / 3, Margin: ttl / 6}
}

// report is one line a pod writes on its stdout for the demo (JSON); the demo reads them as
// they come. A line written before a SIGKILL is in the pipe already, so the demo still gets it.
type report struct {
	Kind string    `json:"kind"` // ready, event, counts, verified, fatal
	Pod  string    `json:"pod"`
	Run  int       `json:"run"`
	At   time.Time `json:"at"`

	// ready
	Console  string `json:"console,omitempty"`
	Instance string `json:"instance,omitempty"`
	// event: an Observer event
	Event   string `json:"event,omitempty"` // started, backoff, restarted, leader, standby, retry, dead-lettered, stopped
	Stream  string `json:"stream,omitempty"`
	Message string `json:"message,omitempty"`
	// Position is where a started stream began (watchtree.Started.Position).
	Position string `json:"position,omitempty"`
	// counts: the pod's handler counters so far (cumulative for this process)
	Counts *podCounts `json:"counts,omitempty"`
	// verified: the cache check
	Cached int `json:"cached,omitempty"`
	Stale  int `json:"stale,omitempty"`
	// fatal, or a verified that could not check
	Error string `json:"error,omitempty"`
}

// podCounts are a pod process's handler counters.
type podCounts struct {
	Calls         int64 `json:"calls"`         // orders handler calls, retries and replays included
	Charged       int64 `json:"charged"`       // payments written
	Absorbed      int64 `json:"absorbed"`      // redeliveries whose payment existed
	Declined      int64 `json:"declined"`      // attempts on poison orders
	Failed        int64 `json:"failed"`        // payment writes that failed (retried)
	Invalidations int64 `json:"invalidations"` // product cache entries invalidated
	CacheHits     int64 `json:"cache_hits"`
	CacheMisses   int64 `json:"cache_misses"`
}

// reporter writes reports, one JSON line each, from any goroutine.
type reporter struct {
	mu  sync.Mutex
	enc *json.Encoder
	pod string
	run int
}

func (r *reporter) send(rep report) {
	rep.Pod, rep.Run, rep.At = r.pod, r.run, time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.enc.Encode(rep)
}

// podObserver passes the runtime's lifecycle events to the demo as they happen.
type podObserver struct {
	rep *reporter
}

func (o podObserver) OnEvent(ev observe.Event) {
	kind, position := "", ""
	switch e := ev.(type) {
	case observe.Started:
		kind, position = "started", e.Position
	case observe.Stopped:
		kind = "stopped"
		if e.Reason == observe.Crashed && !e.Terminal {
			kind = "backoff"
		}
	case observe.Restarted:
		kind = "restarted"
	case observe.LeadershipChanged:
		kind = "standby"
		if e.Leader {
			kind = "leader"
		}
	case observe.RetryScheduled:
		kind = "retry"
	case observe.DeadLettered:
		kind = "dead-lettered"
	default:
		return
	}
	o.rep.send(report{Kind: "event", Event: kind, Stream: ev.EventMeta().Stream, Message: ev.String(), Position: position})
}

// podMain runs one pod: a watchtree runtime with its console open, the orders stream
// (SingleLeader) charging orders into payments and the products stream (AllInstances)
// invalidating the pod's cache, until SIGTERM (a graceful stop) or SIGKILL. Its reports go to
// stdout; it reads commands on stdin ("verify <marker>"), and stops gracefully when stdin
// closes (the demo ended, whichever way).
func podMain(raw string) int {
	var cfg podConfig
	rep := &reporter{enc: json.NewEncoder(os.Stdout)}
	fatal := func(err error) int {
		rep.send(report{Kind: "fatal", Error: err.Error()})
		fmt.Fprintf(os.Stderr, "demo pod %s: %v\n", cfg.Name, err)
		return 2
	}
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return fatal(fmt.Errorf("%s: %w", envPod, err))
	}
	rep.pod, rep.run = cfg.Name, cfg.Run
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	p, err := startPod(ctx, cfg, rep)
	if err != nil {
		return fatal(err)
	}
	go func() {
		p.commands(ctx, os.Stdin)
		stop() // stdin closed: the demo is gone, so is its pod
	}()
	<-ctx.Done()
	if err := p.stop(); err != nil {
		return fatal(err)
	}
	return 0
}

// pod is one pod process's state.
type pod struct {
	cfg      podConfig
	rep      *reporter
	rt       *watchtree.Runtime
	clients  []*mongo.Client
	db       *mongo.Database
	cache    *priceCache
	counts   counters
	stopLoop func()
}

// counters are podCounts, updated by the handlers.
type counters struct {
	mu sync.Mutex
	c  podCounts
}

func (c *counters) add(f func(*podCounts)) {
	c.mu.Lock()
	f(&c.c)
	c.mu.Unlock()
}

func (c *counters) get() podCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c
}

func connect(uri, app string) (*mongo.Client, error) {
	return mongo.Connect(options.Client().ApplyURI(uri).SetAppName(app).SetHeartbeatInterval(500 * time.Millisecond))
}

func startPod(ctx context.Context, cfg podConfig, rep *reporter) (*pod, error) {
	main, err := connect(cfg.URI, "watchtree-demo-"+cfg.Name)
	if err != nil {
		return nil, err
	}
	orders, err := connect(cfg.URI, ordersApp(cfg.Name))
	if err != nil {
		disconnect(main)
		return nil, err
	}
	p := &pod{cfg: cfg, rep: rep, clients: []*mongo.Client{main, orders}, db: main.Database(cfg.DB)}
	p.cache = newPriceCache(p.db.Collection("products"))
	logger := zap.NewNop()
	if cfg.Verbose {
		logger, _ = zap.NewDevelopment()
		logger = logger.Named(cfg.Name)
	}
	rt, err := watchtree.New(watchtree.Config{
		Client:       main,
		Database:     cfg.DB,
		InstanceName: cfg.Name, // the stable name: the products stream's checkpoint is this pod's own
		Logger:       logger,
		Observer:     podObserver{rep},
		Lease:        leasePolicy(cfg.LeaseTTL),
		Console:      watchtree.ConsoleConfig{Addr: "127.0.0.1:0"},
	})
	if err != nil {
		p.close()
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := rt.Start(sctx); err != nil {
		p.close()
		return nil, err
	}
	p.rt = rt
	if _, err := rt.Spawn(sctx, watchtree.Stream[Order]{
		Name:       ordersStream,
		Collection: "orders",
		Client:     orders, // its own client, so that the fail point can single out this cursor
		// A cursor of its own (the opt-out of shared cursors): the demo kills it to show the
		// supervisor's restart. A shared cursor's death would detach the stream instead, to
		// catch up on a cursor of its own, with no restart; products shares (the default).
		Cursor:     watchtree.Dedicated,
		Mode:       watchtree.SingleLeader,
		Lanes:      cfg.Lanes,
		Retry:      watchtree.RetryPolicy{MaxAttempts: chargeAttempts, InitialDelay: 20 * time.Millisecond, MaxDelay: 100 * time.Millisecond},
		Restart:    watchtree.RestartPolicy{InitialDelay: 250 * time.Millisecond, MaxDelay: 2 * time.Second},
		Checkpoint: watchtree.CheckpointPolicy{SaveEvery: 100, SaveInterval: 250 * time.Millisecond},
		OnInsert:   p.charge,
	}); err != nil {
		_ = p.stop()
		return nil, err
	}
	if _, err := rt.Spawn(sctx, watchtree.Stream[Product]{
		Name:       productsStream,
		Collection: "products",
		Mode:       watchtree.AllInstances,
		Checkpoint: watchtree.CheckpointPolicy{SaveInterval: 250 * time.Millisecond},
		OnChange:   p.invalidate,
	}); err != nil {
		_ = p.stop()
		return nil, err
	}
	p.stopLoop = p.loop()
	rep.send(report{Kind: "ready", Console: rt.ConsoleAddr()})
	return p, nil
}

// charge is the orders handler: it charges an order exactly once, keyed by the event ID, which
// is the same on every redelivery; a redelivery finds its payment and is absorbed (counted on
// the payment). A poison order's card is declined until the demo fixes it (a document in
// fixes), so its attempts run out and it becomes a dead letter.
func (p *pod) charge(ctx context.Context, ev *watchtree.Event[Order]) error {
	p.counts.add(func(c *podCounts) { c.Calls++ })
	o := ev.FullDocument
	if o.Poison {
		err := p.db.Collection("fixes").FindOne(ctx, bson.D{{Key: "_id", Value: o.ID}}).Err()
		if errors.Is(err, mongo.ErrNoDocuments) {
			p.counts.add(func(c *podCounts) { c.Declined++ })
			return fmt.Errorf("order %d: card of %s declined", o.ID, o.Customer)
		}
		if err != nil {
			return err
		}
	}
	payments := p.db.Collection("payments")
	_, err := payments.InsertOne(ctx, Payment{ID: ev.ID(), Order: o.ID, Amount: o.Amount, Pod: p.cfg.Name, At: time.Now()})
	switch {
	case err == nil:
		p.counts.add(func(c *podCounts) { c.Charged++ })
		return nil
	case mongo.IsDuplicateKeyError(err):
		// Charged already, by this pod or by the one that led before: absorb the redelivery.
		_, err = payments.UpdateByID(ctx, ev.ID(), bson.D{{Key: "$inc", Value: bson.D{{Key: "redeliveries", Value: 1}}}})
		if err == nil {
			p.counts.add(func(c *podCounts) { c.Absorbed++ })
		}
		return err
	}
	p.counts.add(func(c *podCounts) { c.Failed++ })
	return err // retried by the RetryPolicy
}

// invalidate is the products handler: every change of a product evicts the pod's cached price
// of it, older than the change's version.
func (p *pod) invalidate(_ context.Context, ev *watchtree.Event[Product]) error {
	id, ok := ev.DocumentID().AsInt64OK()
	if !ok {
		return watchtree.Permanent(fmt.Errorf("product key %v is not an integer", ev.DocumentID()))
	}
	version := int64(-1) // a delete, or an update without the document: evict whatever is cached
	if ev.FullDocument != nil {
		version = ev.FullDocument.Version
	}
	if p.cache.invalidate(id, version) {
		p.counts.add(func(c *podCounts) { c.Invalidations++ })
	}
	return nil
}

// loop reads prices through the cache (the pod's "requests") and reports the counters, until
// the returned stop.
func (p *pod) loop() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		var n int64
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			n++
			hit, err := p.cache.price(ctx, n%productCount+1)
			if err == nil {
				p.counts.add(func(c *podCounts) {
					if hit {
						c.CacheHits++
					} else {
						c.CacheMisses++
					}
				})
			}
			if n%40 == 0 { // every 200ms
				c := p.counts.get()
				p.rep.send(report{Kind: "counts", Counts: &c})
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// commands serves the demo's commands on r: "verify <marker>" waits until the products stream
// has handled the change of product 0 to version marker (the stream has one lane, so every
// earlier change is handled too), then compares every cached price with the database.
func (p *pod) commands(ctx context.Context, r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || f[0] != "verify" {
			continue
		}
		marker, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		cached, stale, err := p.verifyCache(ctx, marker)
		rep := report{Kind: "verified", Cached: cached, Stale: stale}
		if err != nil {
			rep.Error = err.Error()
		}
		p.rep.send(rep)
	}
}

func (p *pod) verifyCache(ctx context.Context, marker int64) (cached, stale int, err error) {
	vctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for !p.cache.seen(markerProduct, marker) {
		select {
		case <-vctx.Done():
			return 0, 0, fmt.Errorf("the products stream did not reach the marker version %d: %w", marker, vctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return p.cache.check(vctx)
}

// stop stops the runtime gracefully (drain, final checkpoints, leases released) and closes the
// pod's clients.
func (p *pod) stop() error {
	if p.stopLoop != nil {
		p.stopLoop()
	}
	var err error
	if p.rt != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err = p.rt.Stop(ctx)
		cancel()
	}
	c := p.counts.get()
	p.rep.send(report{Kind: "counts", Counts: &c})
	p.close()
	return err
}

func (p *pod) close() {
	for _, c := range p.clients {
		disconnect(c)
	}
}

// priceCache is a pod's in-memory cache of product prices, read through from the database and
// invalidated by the products stream. Each product's eviction floor (the newest version a change
// event announced) keeps a read that raced an eviction from storing an older price.
type priceCache struct {
	products *mongo.Collection
	mu       sync.Mutex
	entries  map[int64]Product
	floor    map[int64]int64 // product → newest version seen in a change event
}

func newPriceCache(products *mongo.Collection) *priceCache {
	return &priceCache{products: products, entries: map[int64]Product{}, floor: map[int64]int64{}}
}

// price returns whether product id was served from the cache; a miss reads it and caches it
// unless a change event announced a newer version meanwhile.
func (c *priceCache) price(ctx context.Context, id int64) (hit bool, err error) {
	c.mu.Lock()
	_, ok := c.entries[id]
	c.mu.Unlock()
	if ok {
		return true, nil
	}
	var doc Product
	if err := c.products.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&doc); err != nil {
		return false, err
	}
	c.mu.Lock()
	if doc.Version >= c.floor[id] {
		c.entries[id] = doc
	}
	c.mu.Unlock()
	return false, nil
}

// invalidate evicts product id when its cached version is older than version (-1: always), and
// reports whether an entry was evicted.
func (c *priceCache) invalidate(id, version int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if version > c.floor[id] {
		c.floor[id] = version
	}
	e, ok := c.entries[id]
	if !ok || (version >= 0 && e.Version >= version) {
		return false
	}
	delete(c.entries, id)
	return true
}

// seen reports whether a change of product id to version (or later) was handled.
func (c *priceCache) seen(id, version int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.floor[id] >= version
}

// check compares every cached price with the database: stale counts the entries that differ.
func (c *priceCache) check(ctx context.Context) (cached, stale int, err error) {
	c.mu.Lock()
	entries := make(map[int64]Product, len(c.entries))
	for k, v := range c.entries {
		entries[k] = v
	}
	c.mu.Unlock()
	for id, e := range entries {
		var doc Product
		if err := c.products.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&doc); err != nil {
			return 0, 0, err
		}
		if doc.Price != e.Price || doc.Version != e.Version {
			stale++
		}
	}
	return len(entries), stale, nil
}
