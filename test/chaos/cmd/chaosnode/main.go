// Command chaosnode is one node of the chaos soak (test/chaos): two watchtree runtimes in one
// process, one with MongoDB leases and one with Redis leases, running the soak's three streams
// on the collection the load writes, and recording every handler call, lease change,
// checkpoint, dead letter and cursor start to its history file (package history).
//
//	chaosnode -name n1 -mongo mongodb://127.0.0.1:40001/?directConnection=true \
//	    -redis 127.0.0.1:40002 -redis-prefix chaos-123: -history /tmp/n1-1.jsonl
//
// It prints "ready" once every stream is spawned, and stops gracefully on SIGTERM or SIGINT,
// within -stop-timeout (1s; -slow-stop-timeout while its handlers are slow, see slow); a
// second signal, or the timeout, makes it exit at once. With -lifeline it exits at once when
// its stdin reaches EOF: the soak holds the pipe's other end, so the node dies with the soak.
// The soak reaches MongoDB and Redis through its own proxies, so the addresses are theirs.
package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/store/redisstore"
	"github.com/watchtree/watchtree/test/chaos/history"
)

type flags struct {
	name, mongoURI, redisAddr, redisPrefix, db, coll, historyPath, logPath string
	ttl, renew, poll, connectTimeout                                       time.Duration
	saveEvery, maxUnflushed                                                int
	saveInterval                                                           time.Duration
	dynamic                                                                int
	stopTimeout, slowStopTimeout                                           time.Duration
	lifeline                                                               bool
	cursor                                                                 string
	clockFile                                                              string
}

// slow makes every handler call take 100ms (SIGUSR1 toggles it), so that a backlog builds up
// before a graceful stop and the drain outlasts the lease (the soak's stop-partitioned fault):
// a slow node's stop is bounded by -slow-stop-timeout instead of -stop-timeout.
var slow atomic.Bool

func main() {
	var f flags
	flag.StringVar(&f.name, "name", "", "the node's InstanceName (stable across restarts); required")
	flag.StringVar(&f.mongoURI, "mongo", "", "MongoDB URI (the soak's proxy); required")
	flag.StringVar(&f.redisAddr, "redis", "", "Redis address (the soak's proxy); required")
	flag.StringVar(&f.redisPrefix, "redis-prefix", "", "Redis key prefix of this soak; required")
	flag.StringVar(&f.db, "db", "chaos", "database of the watched collection and the stores")
	flag.StringVar(&f.coll, "coll", "items", "the watched collection")
	flag.StringVar(&f.historyPath, "history", "", "history file to append to; required")
	flag.StringVar(&f.logPath, "log", "", "log file (default: no logs)")
	flag.DurationVar(&f.ttl, "lease-ttl", 4*time.Second, "LeasePolicy.TTL")
	flag.DurationVar(&f.renew, "lease-renew", time.Second, "LeasePolicy.RenewEvery")
	flag.DurationVar(&f.poll, "lease-poll", time.Second, "LeasePolicy.StandbyPoll")
	flag.DurationVar(&f.connectTimeout, "connect-timeout", 3*time.Second, "Config.ConnectTimeout")
	flag.IntVar(&f.saveEvery, "save-every", 20, "CheckpointPolicy.SaveEvery")
	flag.IntVar(&f.maxUnflushed, "max-unflushed", 100, "CheckpointPolicy.MaxUnflushed")
	flag.DurationVar(&f.saveInterval, "save-interval", 500*time.Millisecond, "CheckpointPolicy.SaveInterval")
	flag.StringVar(&f.clockFile, "clock-file", "", "the nemesis's clock skew: \"<offset> <rate>\", re-read every 50ms (default: the real clock)")
	flag.IntVar(&f.dynamic, "dynamic", 0, "spawn the SingleLeader streams dyn-1 … dyn-N at start (the soak spawns more with SIGUSR2)")
	flag.DurationVar(&f.stopTimeout, "stop-timeout", time.Second, "how long a graceful stop may take before the node exits at once")
	flag.DurationVar(&f.slowStopTimeout, "slow-stop-timeout", 15*time.Second, "-stop-timeout while the handlers are slow (SIGUSR1): the drain is meant to outlast the lease")
	flag.StringVar(&f.cursor, "cursor", "", `Stream.Cursor: "dedicated", "shared", or "" (the library's default)`)
	flag.BoolVar(&f.lifeline, "lifeline", false, "exit at once when stdin reaches EOF (the soak's end of the pipe closed: the soak is gone)")
	flag.Parse()
	if f.name == "" || f.mongoURI == "" || f.redisAddr == "" || f.redisPrefix == "" || f.historyPath == "" {
		fmt.Fprintln(os.Stderr, "chaosnode: -name, -mongo, -redis, -redis-prefix and -history are required")
		os.Exit(2)
	}
	if f.lifeline {
		go lifeline() // ends with the process
	}
	ctx, stopping := context.WithCancel(context.Background())
	defer stopping()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	// The first signal begins the graceful stop (run returns, its deferred stops drain); the
	// second, or the stop's deadline, ends the process there, so that a node asked to stop is
	// gone within the deadline whatever its drain is waiting for (a cut link, a slow handler).
	// The goroutine ends with the process.
	go func() {
		<-sigs
		d := f.stopTimeout
		if slow.Load() {
			d = f.slowStopTimeout
		}
		stopBy.Store(time.Now().Add(d).UnixNano())
		stopping()
		t := time.NewTimer(d)
		why := "the stop took longer than " + d.String()
		select {
		case <-t.C:
		case s := <-sigs:
			why = "a second " + s.String()
		}
		fmt.Fprintf(os.Stderr, "chaosnode: %s: exiting without finishing the stop\n", why)
		os.Exit(1)
	}()
	if err := run(ctx, f); err != nil {
		fmt.Fprintln(os.Stderr, "chaosnode:", err)
		os.Exit(1)
	}
}

// stopBy is when the graceful stop must be over (Unix nanoseconds), set by the first signal;
// the runtimes' stops take it as their deadline.
var stopBy atomic.Int64

// stopContext is the context of the graceful stop: until stopBy (or -stop-timeout from now
// when the node stops for another reason, e.g. a Start that failed).
func stopContext(f flags) (context.Context, context.CancelFunc) {
	by := time.Unix(0, stopBy.Load())
	if stopBy.Load() == 0 {
		by = time.Now().Add(f.stopTimeout)
	}
	return context.WithDeadline(context.Background(), by)
}

// lifeline reads stdin until EOF (or an error), then exits: the soak that started the node
// is gone, and nobody will stop it or read its history any more.
func lifeline() {
	_, _ = io.Copy(io.Discard, os.Stdin)
	fmt.Fprintln(os.Stderr, "chaosnode: stdin closed (the soak is gone): exiting")
	os.Exit(1)
}

// Streams are the soak's streams: name, mode, lanes, and which runtime runs them.
var Streams = []struct {
	Name   string
	Single bool
	Lanes  int
	Redis  bool // on the runtime with Redis leases
}{
	{"sl-mongo", true, 2, false},
	{"all", false, 4, false},
	{"sl-redis", true, 1, true},
}

func run(ctx context.Context, f flags) error {
	h, err := history.Create(f.historyPath)
	if err != nil {
		return err
	}
	defer h.Close()
	log := zap.NewNop()
	if f.logPath != "" {
		cfg := zap.NewProductionConfig()
		cfg.OutputPaths = []string{f.logPath}
		cfg.Level = zap.NewAtomicLevelAt(zap.InfoLevel)
		if log, err = cfg.Build(); err != nil {
			return err
		}
		defer func() { _ = log.Sync() }()
	}
	h.Add(history.Record{Type: history.Node, Node: f.name, Detail: fmt.Sprintf("start pid %d", os.Getpid()), Start: time.Now()})

	copts := options.Client().ApplyURI(f.mongoURI).SetAppName(f.name).
		SetHeartbeatInterval(500 * time.Millisecond).SetServerSelectionTimeout(3 * time.Second).
		SetConnectTimeout(2 * time.Second).SetMaxPoolSize(64)
	client, err := mongo.Connect(copts)
	if err != nil {
		return err
	}
	defer func() {
		dctx, cancel := stopContext(f)
		defer cancel()
		_ = client.Disconnect(dctx)
	}()
	rdb := redis.NewClient(&redis.Options{Addr: f.redisAddr, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
	defer rdb.Close()
	leases, err := redisstore.New(rdb, redisstore.Options{Prefix: f.redisPrefix})
	if err != nil {
		return err
	}

	// The clock of both runtimes: the real one, or skewed as the nemesis's file says.
	var clk *skewClock
	if f.clockFile != "" {
		clk = newSkewClock(f.clockFile, func(raw string) { // on the history, for the analysis
			h.Add(history.Record{Type: history.Note, Kind: "clock", Node: f.name, Detail: "skew " + strconv.Quote(raw), Start: time.Now()})
		})
		cctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); clk.run(cctx) }()
		defer func() { cancel(); <-done }() // after the runtimes' stops (deferred later)
	}

	var rts []*watchtree.Runtime
	var ids []string
	var rts0ID string // the InstanceID of the runtime with MongoDB leases
	// A graceful stop of both runtimes at once, as an operator's rollout would, within the
	// stop's deadline.
	defer func() {
		sctx, cancel := stopContext(f)
		defer cancel()
		var wg sync.WaitGroup
		for i, rt := range rts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := rt.Stop(sctx); err != nil {
					h.Add(history.Record{Type: history.Note, Node: f.name, Instance: ids[i], Detail: "stop: " + err.Error(), Start: time.Now()})
				}
				st := rt.ObserverStats()
				h.Add(history.Record{Type: history.Note, Node: f.name, Instance: ids[i], Kind: "observer", Detail: fmt.Sprintf("delivered %d dropped %d", st.Delivered, st.Dropped), Start: time.Now()})
			}()
		}
		wg.Wait()
	}()
	for _, kind := range []string{"m", "r"} {
		id := instanceID(f.name, kind)
		if kind == "m" {
			rts0ID = id
		}
		o := &observer{h: h, node: f.name, instance: id, epochs: map[string]int64{}, clk: clk}
		cfg := watchtree.Config{
			Client: client, Database: f.db, Logger: log.With(zap.String("rt", kind)), Observer: o,
			InstanceID: id, InstanceName: f.name, ShutdownTimeout: 10 * time.Second, ConnectTimeout: f.connectTimeout,
			Lease: watchtree.LeasePolicy{TTL: f.ttl, RenewEvery: f.renew, StandbyPoll: f.poll},
		}
		if kind == "r" {
			cfg.Leases = leases
		}
		if clk != nil {
			cfg.Clock = clk
		}
		rt, err := watchtree.New(cfg)
		if err != nil {
			return err
		}
		if err := startWithin(ctx, rt, 30*time.Second); err != nil {
			return err
		}
		rts, ids = append(rts, rt), append(ids, id)
		for _, s := range Streams {
			if s.Redis != (kind == "r") {
				continue
			}
			spec := stream(f, s.Name, s.Single, s.Lanes, h, id)
			if err := spawnWithin(ctx, rt, spec, 60*time.Second); err != nil {
				// The node runs on without it: the checker then finds what it never handled.
				h.Add(history.Record{Type: history.Note, Kind: "spawn-failed", Node: f.name, Instance: id, Stream: s.Name, Err: err.Error(), Start: time.Now()})
				fmt.Fprintf(os.Stderr, "chaosnode: spawn %s: %v\n", s.Name, err)
			}
		}
	}
	// SIGUSR2 spawns the next dynamic stream (a new SingleLeader stream under load), and
	// records when Spawn returned: from then on its position is fixed, and every later write
	// must reach it.
	spawnDyn := func(k int) {
		name := fmt.Sprintf("dyn-%d", k)
		err := spawnWithin(ctx, rts[0], stream(f, name, true, 1, h, rts0ID), 60*time.Second)
		r := history.Record{Type: history.Note, Kind: "spawned", Node: f.name, Instance: rts0ID, Stream: name, Start: time.Now()}
		if err != nil {
			r.Err = err.Error()
		}
		h.Add(r)
	}
	dyn := f.dynamic
	for k := 1; k <= dyn; k++ {
		spawnDyn(k)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigs)
	fmt.Println("ready")
	for {
		select {
		case <-ctx.Done():
			return nil
		case sig := <-sigs:
			if sig == syscall.SIGUSR1 {
				slow.Store(!slow.Load())
				continue
			}
			dyn++
			spawnDyn(dyn)
		}
	}
}

// startWithin retries Start until it succeeds: a restarted node may come up while its links
// are cut or the server steps down.
func startWithin(ctx context.Context, rt *watchtree.Runtime, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		err := rt.Start(ctx)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond) // a retry period, not a wait for a condition
	}
}

func spawnWithin(ctx context.Context, rt *watchtree.Runtime, spec watchtree.Spec, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		_, err := rt.Spawn(ctx, spec)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil || !errors.Is(err, watchtree.ErrUnreachable) {
			return err // only an unreachable server is worth another try: a crashed stream stays registered
		}
		time.Sleep(200 * time.Millisecond) // a retry period
	}
}

func instanceID(name, kind string) string {
	var b [3]byte
	_, _ = cryptoRead(b[:])
	return fmt.Sprintf("%s-%s-%d-%s", name, kind, os.Getpid(), hex.EncodeToString(b[:]))
}

var cryptoRead = crand.Read

// stream is one of the soak's streams: each handler call is recorded; a poison document fails
// permanently (a dead letter); the work takes 1-8ms.
func stream(f flags, name string, single bool, lanes int, h *history.Writer, instance string) watchtree.Stream[bson.Raw] {
	mode, modeName := watchtree.AllInstances, "all"
	if single {
		mode, modeName = watchtree.SingleLeader, "single"
	}
	handle := func(ctx context.Context, ev *watchtree.Event[bson.Raw]) error {
		start := time.Now()
		rec := history.Record{Type: history.Call, Node: f.name, Instance: instance, Stream: name, Mode: modeName,
			EventID: ev.ID(), Attempt: ev.Attempt(), Op: history.Op(ev.OperationType()), Start: start}
		if k, ok := ev.DocumentID().StringValueOK(); ok {
			rec.Key = k
		}
		var doc bson.Raw
		switch {
		case ev.FullDocument != nil:
			doc = *ev.FullDocument
		case ev.UpdateDescription != nil:
			doc = ev.UpdateDescription.UpdatedFields
		}
		if doc != nil {
			rec.Seq, _ = doc.Lookup("seq").AsInt64OK()
			rec.Poison, _ = doc.Lookup("poison").BooleanOK()
		}
		var err error
		if rec.Poison {
			err = watchtree.Permanent(errors.New("poison"))
		} else {
			d := time.Duration(1+mrand.IntN(8)) * time.Millisecond
			if slow.Load() {
				d = 100 * time.Millisecond
			}
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				err = ctx.Err()
			}
		}
		rec.End = time.Now()
		if err != nil {
			rec.Err = err.Error()
		}
		h.Add(rec)
		return err
	}
	var cursor watchtree.CursorMode // the library's default
	switch f.cursor {
	case "shared":
		cursor = watchtree.Shared
	case "dedicated":
		cursor = watchtree.Dedicated
	}
	return watchtree.Stream[bson.Raw]{
		Name: name, Database: f.db, Collection: f.coll, Mode: mode, Lanes: lanes, Cursor: cursor,
		Checkpoint:    watchtree.CheckpointPolicy{SaveEvery: f.saveEvery, SaveInterval: f.saveInterval, MaxUnflushed: f.maxUnflushed},
		Retry:         watchtree.RetryPolicy{MaxAttempts: 2, InitialDelay: 50 * time.Millisecond, MaxDelay: 200 * time.Millisecond},
		Restart:       watchtree.RestartPolicy{InitialDelay: 200 * time.Millisecond, MaxDelay: 2 * time.Second},
		OnHistoryLost: watchtree.ResumeFromNow,
		OnInsert:      handle, OnUpdate: handle, OnDelete: handle,
	}
}

// observer records the events the checker needs. The runtime calls it on one goroutine, in
// order, so epochs needs no lock.
type observer struct {
	h        *history.Writer
	node     string
	instance string
	epochs   map[string]int64 // stream → the epoch last acquired
	clk      *skewClock       // the runtime's clock when skewed (its event times are mapped back); nil: real
}

func (o *observer) OnEvent(ev observe.Event) {
	m := ev.EventMeta()
	r := history.Record{Node: o.node, Instance: o.instance, Stream: m.Stream, Start: m.Time}
	if o.clk != nil {
		r.Start = o.clk.unskew(m.Time) // the history's times are the real clock's
	}
	switch e := ev.(type) {
	case observe.LeadershipChanged:
		r.Type, r.Change, r.Epoch, r.Owner, r.Expires, r.Detail = history.Lease, string(e.Change), e.Epoch, e.Owner, e.ExpiresAt, e.Why
		if e.Change == observe.LeadershipAcquired {
			o.epochs[m.Stream] = e.Epoch
		}
	case observe.Checkpointed:
		r.Type, r.Epoch = history.Checkpoint, o.epochs[m.Stream]
		r.Pos, _ = e.Token.Lookup("_data").StringValueOK()
	case observe.DeadLettered:
		r.Type, r.EventID, r.Err = history.DeadLetter, e.EventID, fmt.Sprint(e.Err)
	case observe.Started:
		r.Type, r.Detail = history.Started, e.Position
	case observe.Stopped:
		r.Type, r.Terminal, r.Detail = history.Stopped, e.Terminal, e.Reason.String()
		if e.Cause != nil {
			r.Err = e.Cause.Error()
		}
	case observe.GapRecorded:
		r.Type, r.Detail = history.Gap, fmt.Sprint(e.Policy)
	case observe.HistoryLost:
		r.Type, r.Kind, r.Err = history.Note, "history-lost", fmt.Sprint(e.Err)
	default:
		return
	}
	o.h.Add(r)
}
