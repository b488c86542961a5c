package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree/console"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/mongostore"
)

// demo is one run: the pods, what they reported, and the load.
type demo struct {
	cfg  config
	uri  string
	exe  string
	db   *mongo.Database
	dls  *mongostore.Store // the orders stream's dead letters, read as the runtime stores them
	out  io.Writer
	pods []*podProc // every pod process started, killed ones included

	written       atomic.Int64 // orders inserted
	productWrites atomic.Int64 // product changes written

	mu          sync.Mutex
	leader      string // the pod leading orders, as last reported; "" between leaders
	restarts    int    // Restarted events of the orders stream
	backoffs    int    // non-terminal crashed Stopped events of the orders stream
	retries     int    // RetryScheduled events
	deadLetters int    // DeadLettered events
	killedAt    time.Time
	killedPod   string
	takeover    report // the first leader report after the kill
	takeoverPos string // where the new leader's orders stream started from
	catchUp     catchUp
}

// catchUp is the new leader's work-off of the orders written while no pod led: orders
// settled (backlog and those written meanwhile) in took.
type catchUp struct {
	orders, backlog int64
	took            time.Duration
}

func newDemo(cfg config, uri, exe string, db *mongo.Database, out io.Writer) (*demo, error) {
	dls, err := mongostore.New(db, mongostore.Options{})
	if err != nil {
		return nil, err
	}
	return &demo{cfg: cfg, uri: uri, exe: exe, db: db, dls: dls, out: out}, nil
}

func (d *demo) printf(format string, args ...any) { fmt.Fprintf(d.out, format, args...) }

// onReport handles a pod's report, on that pod's reader goroutine: lifecycle events are printed
// as they happen.
func (d *demo) onReport(p *podProc, rep report) {
	if rep.Kind == "fatal" {
		d.printf("  [%s] error: %s\n", p.name, rep.Error)
		return
	}
	if rep.Kind != "event" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	orders := rep.Stream == ordersStream
	show := true
	switch rep.Event {
	case "retry":
		d.retries++
		show = false
	case "dead-lettered":
		d.deadLetters++
		show = false
	case "backoff":
		if orders {
			d.backoffs++
		}
	case "restarted":
		if orders {
			d.restarts++
		}
	case "leader":
		if !orders {
			break
		}
		d.leader = p.name
		if !d.killedAt.IsZero() && d.takeover.Pod == "" {
			d.takeover = rep
			show = false
			d.printf("  [%s] %s: %v after the SIGKILL of %s (lease TTL %v)\n", p.name, rep.Message,
				rep.At.Sub(d.killedAt).Round(time.Millisecond), d.killedPod, d.cfg.leaseTTL)
		}
	case "started":
		if orders && d.takeover.Pod == p.name && d.takeoverPos == "" {
			d.takeoverPos = rep.Position
		}
	case "stopped", "standby":
		if orders && d.leader == p.name {
			d.leader = ""
		}
	}
	if show {
		d.printf("  [%s] %s\n", p.name, rep.Message)
	}
}

func (d *demo) currentLeader() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.leader
}

// startPod starts pod name's run-th process and waits until it is ready (its streams spawned).
func (d *demo) startPod(ctx context.Context, name string, run int) (*podProc, error) {
	p, err := startPodProc(d.exe, podConfig{Name: name, Run: run, URI: d.uri, DB: d.cfg.db, Lanes: d.cfg.lanes,
		LeaseTTL: d.cfg.leaseTTL, Verbose: d.cfg.verbose}, d.onReport)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.pods = append(d.pods, p)
	d.mu.Unlock()
	select {
	case rep := <-p.ready:
		if rep.Kind != "ready" {
			return nil, fmt.Errorf("pod %s: %s", name, rep.Error)
		}
		p.mu.Lock()
		p.console = rep.Console
		p.mu.Unlock()
		return p, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("pod %s not ready: %w", name, ctx.Err())
	}
}

// livePod returns the live process of pod name, nil when none.
func (d *demo) livePod(name string) *podProc {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := len(d.pods) - 1; i >= 0; i-- {
		if p := d.pods[i]; p.name == name && p.alive() {
			return p
		}
	}
	return nil
}

func (d *demo) livePods() []*podProc {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*podProc
	for _, p := range d.pods {
		if p.alive() {
			out = append(out, p)
		}
	}
	return out
}

// killPods kills what is still running (the demo failed or was interrupted).
func (d *demo) killPods() {
	for _, p := range d.livePods() {
		p.kill()
		<-p.done
	}
}

// waitFor polls cond every 10ms until it holds or ctx ends.
func waitFor(ctx context.Context, what string, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

func (d *demo) run(ctx, holdCtx context.Context) error {
	cfg := d.cfg
	if err := d.seedProducts(ctx); err != nil {
		return err
	}
	d.printf("starting pod-a and pod-b: a watchtree runtime each, streams orders (SingleLeader) and products (AllInstances)\n")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, name := range []string{"pod-a", "pod-b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = d.startPod(ctx, name, 1)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, p := range d.livePods() {
		d.printf("  %s console at %s; inspect it: go run -C cmd/watchtree . --addr %s streams   (or top)\n", p.name, p.console, p.console)
	}
	if err := waitFor(ctx, "a leader of orders", func() bool { return d.currentLeader() != "" }); err != nil {
		return err
	}

	start := time.Now()
	type loadResult struct {
		took time.Duration
		err  error
	}
	loadDone := make(chan loadResult, 1)
	go func() {
		err := d.load(ctx, start)
		loadDone <- loadResult{time.Since(start), err}
	}()
	stopProgress := d.progressLoop()
	defer stopProgress()
	waitWritten := func(n int64) error {
		return waitFor(ctx, fmt.Sprintf("%d orders written", n), func() bool { return d.written.Load() >= n })
	}

	// A quarter of the way in: kill the leader's cursor.
	if err := waitWritten(int64(cfg.orders) / 4); err != nil {
		return err
	}
	if cfg.noCursorKill {
		d.printf("  ... --no-cursor-kill: the leader's cursor is left alone\n")
	} else if err := d.killCursor(ctx); err != nil {
		return err
	}

	// Halfway: kill the leader pod, wait for the standby to take over, start the pod again.
	if err := waitWritten(int64(cfg.orders) / 2); err != nil {
		return err
	}
	if err := d.killLeader(ctx); err != nil {
		return err
	}
	lr := <-loadDone
	if lr.err != nil {
		return lr.err
	}
	loadTook := lr.took

	// Every order settles: charged or dead-lettered.
	if err := waitFor(ctx, "every order charged or dead-lettered", func() bool {
		n, err := d.settled(ctx)
		return err == nil && n >= d.written.Load()
	}); err != nil {
		return err
	}
	stopProgress()
	d.printProgress()

	replayed, err := d.replayOne(ctx)
	if err != nil {
		return err
	}
	caches, err := d.verifyCaches(ctx)
	if err != nil {
		return err
	}
	res, err := d.verify(ctx, replayed)
	if err != nil {
		return err
	}
	if cfg.hold {
		d.printSummary(res, replayed, caches, start, loadTook)
		d.printf("\n--hold: the pods keep running until Ctrl-C; inspect them:\n")
		for _, p := range d.livePods() {
			d.printf("  go run -C cmd/watchtree . --addr %s top   # %s\n", p.console, p.name)
		}
		if d.cfg.uri == "" {
			d.printf("  mongosh %q   # the embedded mongosim\n", d.uri)
		}
		<-holdCtx.Done()
	}
	d.printf("  ... stopping the pods gracefully (SIGTERM): drain, final checkpoint, lease released\n")
	stopErr := d.stopPods()
	if !cfg.hold {
		d.printSummary(res, replayed, caches, start, loadTook)
	}
	if res.lost > 0 || res.doubled > 0 {
		return fmt.Errorf("%d orders lost, %d charged more than once", res.lost, res.doubled)
	}
	for _, c := range caches {
		if c.Stale > 0 {
			return fmt.Errorf("pod %s holds %d stale prices after its products stream caught up", c.Pod, c.Stale)
		}
	}
	return stopErr
}

// seedProducts writes the products, version 0, before the pods start.
func (d *demo) seedProducts(ctx context.Context) error {
	docs := make([]any, 0, productCount+1)
	for id := int64(markerProduct); id <= productCount; id++ {
		docs = append(docs, Product{ID: id, Price: float64(10 + id)})
	}
	_, err := d.db.Collection("products").InsertMany(ctx, docs)
	return err
}

// load writes the orders, paced at --rate from start, in batches of 25, and --product-rate
// product changes meanwhile.
func (d *demo) load(ctx context.Context, start time.Time) error {
	orders, products := d.db.Collection("orders"), d.db.Collection("products")
	const batch = 25
	total := int64(d.cfg.orders)
	versions := make([]int64, productCount+1)
	for lo := int64(1); lo <= total; lo += batch {
		hi := min(lo+batch-1, total)
		docs := make([]any, 0, hi-lo+1)
		for i := lo; i <= hi; i++ {
			docs = append(docs, Order{ID: i, Customer: fmt.Sprintf("c%03d", i%89), Amount: float64(10 + i%90),
				Poison: d.cfg.poisonEvery > 0 && i%int64(d.cfg.poisonEvery) == 0})
		}
		// Unordered, so a retry after a lost reply skips the orders that landed (duplicate key).
		if _, err := orders.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false)); err != nil && !onlyDuplicates(err) {
			return fmt.Errorf("insert orders %d..%d: %w", lo, hi, err)
		}
		written := d.written.Add(hi - lo + 1)
		// The product changes due by now.
		elapsed := time.Since(start)
		for due := int64(elapsed.Seconds() * float64(d.cfg.productRate)); d.productWrites.Load() < due; {
			n := d.productWrites.Add(1)
			id := n%productCount + 1
			versions[id]++
			p := Product{ID: id, Price: float64(10+id) + float64(versions[id])/100, Version: versions[id]}
			if _, err := products.ReplaceOne(ctx, bson.D{{Key: "_id", Value: id}}, p); err != nil {
				return fmt.Errorf("change product %d: %w", id, err)
			}
		}
		if hi == total {
			break // done: no wait after the last orders
		}
		next := start.Add(time.Duration(float64(written) / float64(d.cfg.rate) * float64(time.Second)))
		select {
		case <-time.After(time.Until(next)):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// settled counts the orders charged or dead-lettered.
func (d *demo) settled(ctx context.Context) (int64, error) {
	paid, dl, err := d.outcomes(ctx)
	return paid + dl, err
}

// outcomes counts the payments and the orders stream's dead letters.
func (d *demo) outcomes(ctx context.Context) (paid, deadLetters int64, err error) {
	if paid, err = d.db.Collection("payments").CountDocuments(ctx, bson.D{}); err != nil {
		return 0, 0, err
	}
	deadLetters, err = d.dls.CountDeadLetters(ctx, store.Scope{Stream: ordersStream})
	return paid, deadLetters, err
}

// killCursor configures a fail point that fails the next getMore of the leader's orders cursor
// with HostUnreachable and no resumable label: the driver cannot resume it, the stream actor
// dies, and its supervisor restarts it after the RestartPolicy's backoff.
func (d *demo) killCursor(ctx context.Context) error {
	leader := d.currentLeader()
	d.printf("  ... killing the orders cursor of %s: a fail point fails its next getMore (HostUnreachable, not resumable)\n", leader)
	cmd := bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"getMore"}}, {Key: "errorCode", Value: 6},
			{Key: "errorLabels", Value: bson.A{}}, {Key: "appName", Value: ordersApp(leader)}}}}
	err := d.db.Client().Database("admin").RunCommand(ctx, cmd).Err()
	var se mongo.ServerError
	if errors.As(err, &se) {
		d.printf("  ... the server refused configureFailPoint (%v): start mongod with --setParameter enableTestCommands=1 to see the cursor kill; going on without it\n", err)
		return nil
	}
	if err != nil {
		return err
	}
	return waitFor(ctx, "the supervisor's restart of the orders cursor", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.restarts > 0
	})
}

// killLeader kills the leader pod with SIGKILL (nothing drained, no checkpoint flush, the lease
// not released), waits until the standby leads, and starts the killed pod again (run 2), as an
// orchestrator would.
func (d *demo) killLeader(ctx context.Context) error {
	var leader string
	if err := waitFor(ctx, "a leader to kill", func() bool { leader = d.currentLeader(); return leader != "" }); err != nil {
		return err
	}
	p := d.livePod(leader)
	if p == nil {
		return fmt.Errorf("leader %s has no live process", leader)
	}
	d.mu.Lock()
	d.killedAt, d.killedPod, d.leader = time.Now(), leader, ""
	d.mu.Unlock()
	p.kill()
	<-p.done
	d.printf("  ... SIGKILL of %s, the leader of orders: no drain, no final checkpoint, its lease left to expire; orders keep coming\n", leader)
	if err := waitFor(ctx, "the standby to take the lease over", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.takeover.Pod != "" && d.takeoverPos != ""
	}); err != nil {
		return err
	}
	d.mu.Lock()
	newLeader := d.takeover.Pod
	d.mu.Unlock()
	// The orders written while the lease was expiring wait for the new leader: how fast it
	// works them off is the stream's throughput, measured.
	t0, target := time.Now(), d.written.Load()
	h0, err := d.settled(ctx)
	if err != nil {
		return err
	}
	var h1 int64
	if err := waitFor(ctx, "the new leader to work off the backlog", func() bool {
		h1, err = d.settled(ctx)
		return err == nil && h1 >= target
	}); err != nil {
		return err
	}
	took := time.Since(t0)
	d.mu.Lock()
	d.catchUp = catchUp{orders: h1 - h0, backlog: target - h0, took: took}
	d.mu.Unlock()
	d.printf("  [%s] worked off the backlog of %d orders in %v: %.0f orders/s\n", newLeader, target-h0,
		took.Round(10*time.Millisecond), float64(h1-h0)/took.Seconds())
	d.printf("  ... starting %s again (its second process): it stands by for orders and resumes products from its own checkpoint\n", leader)
	_, err = d.startPod(ctx, leader, 2)
	return err
}

// replayOne fixes the first dead letter's order and replays it through the leader's console, as
// `watchtree replay orders --id ID` does; it returns the order replayed (0 when there was no
// dead letter).
func (d *demo) replayOne(ctx context.Context) (int64, error) {
	list, err := d.dls.ListDeadLetters(ctx, store.Scope{Stream: ordersStream}, 1)
	if err != nil || len(list) == 0 {
		return 0, err
	}
	dl := list[0]
	order, _ := bson.Raw(dl.DocumentKey).Lookup("_id").AsInt64OK()
	if _, err := d.db.Collection("fixes").InsertOne(ctx, bson.D{{Key: "_id", Value: order}}); err != nil {
		return 0, err
	}
	leader := d.livePod(d.currentLeader())
	if leader == nil {
		return 0, errors.New("no live leader to replay the dead letter on")
	}
	c, err := console.Dial(leader.console, console.ClientOptions{RequestedBy: "demo"})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if _, err := c.Control(ctx, messages.ControlAction_CONTROL_ACTION_REPLAY, ordersStream, dl.ID, 10*time.Second); err != nil {
		return 0, fmt.Errorf("replay the dead letter of order %d: %w", order, err)
	}
	n, err := d.db.Collection("payments").CountDocuments(ctx, bson.D{{Key: "order", Value: order}})
	if err != nil {
		return 0, err
	}
	if _, gerr := d.dls.GetDeadLetter(ctx, store.Scope{Stream: ordersStream}, dl.ID); n != 1 || !errors.Is(gerr, store.ErrNotFound) {
		return 0, fmt.Errorf("replay of order %d: %d payments, dead letter lookup %v; want 1 payment and the dead letter gone", order, n, gerr)
	}
	d.printf("  ... replayed the dead letter of order %d (%d attempts: %q) on %s's console, after fixing its card:\n"+
		"      charged, dead letter deleted (go run -C cmd/watchtree . --addr %s replay orders --id %s)\n",
		order, dl.Attempts, dl.Error, leader.name, leader.console, abbreviate(dl.ID))
	return order, nil
}

func abbreviate(id string) string {
	if len(id) > 16 {
		return id[:16] + "…"
	}
	return id
}

// verifyCaches changes the marker product, then asks every live pod to wait until its products
// stream has handled that change and to compare its cached prices with the database.
func (d *demo) verifyCaches(ctx context.Context) ([]report, error) {
	const marker = 1
	if _, err := d.db.Collection("products").ReplaceOne(ctx, bson.D{{Key: "_id", Value: markerProduct}},
		Product{ID: markerProduct, Price: 1, Version: marker}); err != nil {
		return nil, err
	}
	d.productWrites.Add(1)
	pods := d.livePods()
	for _, p := range pods {
		if err := p.send(fmt.Sprintf("verify %d", marker)); err != nil {
			return nil, fmt.Errorf("pod %s: %w", p.name, err)
		}
	}
	out := make([]report, 0, len(pods))
	for _, p := range pods {
		select {
		case rep := <-p.verified:
			if rep.Error != "" {
				return nil, fmt.Errorf("pod %s could not check its cache: %s", p.name, rep.Error)
			}
			out = append(out, rep)
		case <-p.done:
			return nil, fmt.Errorf("pod %s exited before its cache check: %v", p.name, p.exit())
		case <-ctx.Done():
			return nil, fmt.Errorf("pod %s did not check its cache: %w", p.name, ctx.Err())
		}
	}
	return out, nil
}

// stopPods stops the live pods gracefully (SIGTERM), together.
func (d *demo) stopPods() error {
	pods := d.livePods()
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.stop(20 * time.Second)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// progressLoop prints a progress line every --progress until the returned stop.
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
				d.printProgress()
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// printProgress prints the bar of orders handled (charged or dead-lettered) against written.
func (d *demo) printProgress() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	paid, dls, err := d.outcomes(ctx)
	if err != nil {
		return
	}
	handled := paid + dls
	written := d.written.Load()
	const width = 30
	filled := 0
	if written > 0 {
		filled = int(min(handled, written) * width / written)
	}
	leader := d.currentLeader()
	if leader == "" {
		leader = "none (lease free)"
	}
	d.mu.Lock()
	restarts := d.restarts
	d.mu.Unlock()
	d.printf("  [%s%s] handled %5d / %5d written   leader %-17s dead letters %3d   restarts %d\n",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), handled, written, leader, dls, restarts)
}
