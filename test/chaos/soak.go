// Package chaos is a soak in the manner of Jepsen: three watchtree nodes (test/chaos/cmd/
// chaosnode, each a separate process with two runtimes, MongoDB and Redis leases) and a
// mongosim server process, a keyed write load with transactions and poison documents, a seeded
// nemesis that injects one fault after another (kills, pauses longer than the lease TTL,
// partitions from the server or Redis, symmetric or not, cursor-killing fail points,
// step-downs, checkpoint- and dead-letter-store outages, corrupt resume tokens, graceful stops
// cut off, streams spawned under load, clock skew), in shuffled rounds of every kind (schedule),
// then heals everything, waits for the streams to catch up and judges the recorded history
// (package checker).
//
// Where it may (root, ip(8)), each node runs in a network namespace of the soak's own making,
// joined to the host by a veth pair, and a partition is a blackhole route at one end of a link
// (node → server) or the other (server → node), so the kernel drops the segments. Otherwise the
// nodes run on loopback and the TCP proxy of each link (node → MongoDB, node → Redis; present
// in both modes) stalls the bytes of a partitioned direction. Report.Network says which ran.
//
// A seed fixes the fault schedule and the load's choices; the timing is real, so a rerun
// repeats the same fault kinds and durations in the same order, not the same interleaving.
package chaos

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree/test/chaos/checker"
	"github.com/watchtree/watchtree/test/chaos/history"
)

// StreamSpec is one stream the nodes run (as chaosnode defines them).
type StreamSpec struct {
	Name        string // Stream.Name
	Single      bool   // Mode SingleLeader (else AllInstances)
	Lanes       int    // Stream.Lanes
	RedisLeases bool   // on the node's runtime with Redis leases (store/redisstore)
}

// Options configures a soak. Zero values mean the defaults given.
type Options struct {
	Seed     uint64        // the nemesis's and the load's seed; 0: a fresh one
	Duration time.Duration // how long the nemesis runs; default 60s
	Nodes    int           // default 3
	Dir      string        // where histories and logs go; default the soak's temporary folder (wtc<pid>-*), removed unless it found violations
	Redis    string        // default $WATCHTREE_REDIS_ADDR, else 127.0.0.1:6379
	Rate     float64       // writes a second; default 40
	// Faults are the kinds the nemesis draws from; default FaultKinds(). An entry "-kind"
	// removes kind from the default set instead (ParseFaults reads the CHAOS_FAULTS syntax).
	Faults   []string
	Database string        // default "chaos"
	LeaseTTL time.Duration // default 4s
	// CatchUp bounds the wait, after everything is healed, for every committed write to be
	// handled; default 60s.
	CatchUp time.Duration
	// Network is how nodes are partitioned: "netns" (a network namespace per node, partitions
	// by blackhole routes; needs root), "proxy" (loopback, the proxies stall the bytes), or
	// "" (the default): netns when it can be set up, else proxy.
	Network string
	// Cursor is the nodes' Stream.Cursor: "dedicated", "shared", or "" (the library's
	// default). With "shared" every node's streams of the watched collection share one cursor.
	Cursor string
	// Streams are the nodes' streams (chaosnode's table); set by Run.
	Streams []StreamSpec
	Log     io.Writer // progress lines; default none
}

func (o *Options) defaults() {
	if o.Seed == 0 {
		o.Seed = rand.Uint64()
	}
	if o.Duration == 0 {
		o.Duration = 60 * time.Second
	}
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Redis == "" {
		o.Redis = cmp.Or(os.Getenv("WATCHTREE_REDIS_ADDR"), "127.0.0.1:6379")
	}
	if o.Rate == 0 {
		o.Rate = 40
	}
	o.Faults = selectFaults(o.Faults)
	if o.Database == "" {
		o.Database = "chaos"
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 4 * time.Second
	}
	if o.CatchUp == 0 {
		o.CatchUp = 60 * time.Second
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	o.Streams = []StreamSpec{
		{Name: "sl-mongo", Single: true, Lanes: 2},
		{Name: "all", Lanes: 4},
		{Name: "sl-redis", Single: true, Lanes: 1, RedisLeases: true},
	}
}

// maxUnflushed and saveInterval are the nodes' CheckpointPolicy (chaosnode's defaults).
const (
	maxUnflushed = 100
	saveInterval = 500 * time.Millisecond
)

// Report is a soak's outcome.
type Report struct {
	Seed     uint64 // the seed that reproduces the run (CHAOS_SEED)
	Network  string // how partitions were made: network namespaces, or proxies on loopback
	Duration time.Duration
	Dir      string   // the histories and logs (kept when there are violations)
	CaughtUp bool     // every committed write was handled within Options.CatchUp
	Faults   []string // the faults applied, in order
	Kinds    []string // the kinds the nemesis drew from
	// Rounds is how many full rounds the schedule planned: every kind of Kinds at least
	// Rounds times (see Undercovered).
	Rounds int
	*checker.Report
}

type soak struct {
	opts    Options
	dir     string   // histories and logs
	work    string   // the soak's tagged temporary folder (its binaries; dir too by default)
	own     *owner   // the soak's tag and lock (cleanup.go)
	sp      *spawner // starts every child process (procs.go)
	nodeBin string
	mongo   *proc
	uri     string
	client  *mongo.Client
	admin   *mongo.Database
	rdb     *redis.Client
	prefix  string
	nodes   []*node
	h       *history.Writer

	mu      sync.Mutex
	dynamic int // dynamic streams spawned (dyn-1 … dyn-N)
}

// Run runs one soak. An error means the soak could not run (a build, the server, a node that
// never came up); violations are in the report.
func Run(ctx context.Context, opts Options) (rep *Report, err error) {
	opts.defaults()
	// The Redis keys carry the soak's tag too (cleanup.go).
	s := &soak{opts: opts, prefix: fmt.Sprintf("%s-%d:", tagOf(os.Getpid()), opts.Seed)}
	rep = &Report{Seed: opts.Seed}
	// What an earlier soak left when it was killed goes first; then this soak's own tag.
	if err := Cleanup(opts.Log, opts.Redis); err != nil {
		fmt.Fprintf(opts.Log, "chaos: cleanup of dead soaks: %v\n", err)
	}
	if s.own, err = claim(); err != nil {
		return nil, err
	}
	if s.work, err = os.MkdirTemp("", tagOf(s.own.pid)+"-"); err != nil {
		s.own.release()
		return nil, err
	}
	s.dir = opts.Dir
	if s.dir == "" {
		s.dir = s.work
	} else if err = os.MkdirAll(s.dir, 0o755); err != nil {
		_ = os.RemoveAll(s.work)
		s.own.release()
		return nil, err
	}
	s.sp = newSpawner()
	rep.Dir, rep.Kinds = s.dir, opts.Faults
	defer func() {
		s.cleanup()
		s.sp.close()
		// A failed run's temporary folder stays for the seed's analysis, marked so that no
		// cleanup takes it; otherwise it goes.
		if s.dir == s.work && err == nil && rep != nil && rep.Report != nil && rep.Failed() {
			_ = os.WriteFile(filepath.Join(s.work, keptMarker), nil, 0o644)
		} else {
			_ = os.RemoveAll(s.work)
		}
		s.own.release()
	}()
	fmt.Fprintf(opts.Log, "chaos: seed %d, %v, histories in %s\n", opts.Seed, opts.Duration, s.dir)

	mongosimBin, nodeBin, err := build(ctx, s.work)
	if err != nil {
		return nil, err
	}
	s.nodeBin = nodeBin
	if err := s.startServer(mongosimBin); err != nil {
		return nil, err
	}
	if s.h, err = history.Create(filepath.Join(s.dir, "soak.jsonl")); err != nil {
		return nil, err
	}
	if rep.Network, err = s.makeNodes(); err != nil {
		return nil, err
	}
	fmt.Fprintf(opts.Log, "chaos: network: %s\n", rep.Network)
	for _, n := range s.nodes {
		if err := s.startNode(n); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(opts.Log, "chaos: %d nodes ready\n", len(s.nodes))

	// The load, and the nemesis alongside.
	loadCtx, stopLoad := context.WithCancel(ctx)
	coll := s.client.Database(opts.Database).Collection("items")
	loadDone := runLoad(loadCtx, s.client, coll, s.h, opts.Seed, 4, opts.Rate)
	plan := schedule(opts)
	rep.Rounds = rounds(plan, opts.Faults)
	fmt.Fprintf(opts.Log, "chaos: %d faults planned: %d full rounds of the %d kinds, and %d faults of one more\n",
		len(plan), rep.Rounds, len(opts.Faults), len(plan)-rep.Rounds*len(opts.Faults))
	start := time.Now()
	for _, f := range plan {
		// On time, or late when the faults before ran longer than estimated: then at once.
		sleep(ctx, f.at-time.Since(start))
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(opts.Log, "chaos: +%4.0fs %s %s %v\n", time.Since(start).Seconds(), f.kind, s.target(f), f.dur.Round(time.Millisecond))
		if err := s.apply(ctx, f); err != nil {
			fmt.Fprintf(opts.Log, "chaos: %s: %v\n", f.kind, err)
		}
		rep.Faults = append(rep.Faults, f.kind)
		if ctx.Err() == nil && time.Since(start) > opts.Duration+2*time.Minute {
			stopLoad()
			<-loadDone
			return nil, fmt.Errorf("the nemesis overran its %v by 2 minutes (the last fault: %s)", opts.Duration, f.kind)
		}
	}
	// Heal: every link open, no fail point, every node running; the load goes on a little so
	// that the streams are seen to work afterwards.
	s.healAll(ctx)
	sleep(ctx, 3*time.Second)
	stopLoad()
	<-loadDone
	rep.Duration = time.Since(start)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	// Catching up: until nothing is missing, CatchUp has passed, or 20s without progress (a
	// stream that stopped terminally will not come back).
	fmt.Fprintf(opts.Log, "chaos: +%4.0fs healed, load stopped; waiting for the streams to catch up\n", time.Since(start).Seconds())
	params := s.params()
	deadline := time.Now().Add(opts.CatchUp)
	lastLost, progressAt := -1, time.Now()
	for {
		recs, err := history.ReadDir(s.dir)
		if err != nil {
			return nil, err
		}
		r := checker.Check(recs, params)
		lost := 0
		for _, v := range r.Views {
			lost += r.Writes[history.Committed] - v.Handled
		}
		if r.Count(checker.Lost) == 0 {
			rep.CaughtUp = true
			break
		}
		if lost != lastLost {
			lastLost, progressAt = lost, time.Now()
		}
		if time.Now().After(deadline) || time.Since(progressAt) > 20*time.Second {
			break
		}
		sleep(ctx, time.Second)
	}
	// A graceful stop of every node, then the final read of the histories.
	for _, n := range s.nodes {
		n.mu.Lock()
		p := n.p
		n.mu.Unlock()
		if p != nil {
			_ = p.stop(20 * time.Second)
		}
	}
	_ = s.h.Close()
	recs, err := history.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	rep.Report = checker.Check(recs, params)
	return rep, nil
}

// selectFaults applies the entries of sel to FaultKinds(): kinds named alone are the set,
// "-kind" entries remove from it (from the full set when no kind is named alone).
func selectFaults(sel []string) []string {
	var only, minus []string
	for _, k := range sel {
		if k = strings.TrimSpace(k); strings.HasPrefix(k, "-") {
			minus = append(minus, k[1:])
		} else if k != "" {
			only = append(only, k)
		}
	}
	if len(only) == 0 {
		only = FaultKinds()
	}
	var out []string
	for _, k := range only {
		if !slices.Contains(minus, k) {
			out = append(out, k)
		}
	}
	return out
}

// CheckFaults returns an error naming the first entry of sel that is no fault kind.
func CheckFaults(sel []string) error {
	for _, k := range sel {
		if k = strings.TrimPrefix(strings.TrimSpace(k), "-"); k != "" && !slices.Contains(FaultKinds(), k) {
			return fmt.Errorf("unknown fault kind %q (the kinds: %s)", k, strings.Join(FaultKinds(), ", "))
		}
	}
	return nil
}

const (
	netnsNetwork = "network namespaces: a netns and veth pair per node; partitions are blackhole routes at either end (one end: asymmetric)"
	proxyNetwork = "loopback: a TCP proxy per node and link (node→MongoDB, node→Redis) stalls the bytes"
)

// makeNodes makes the nodes' networks (namespaces when possible and allowed) and proxies.
func (s *soak) makeNodes() (string, error) {
	mongoAddr := strings.TrimPrefix(strings.Split(s.uri, "/?")[0], "mongodb://")
	var hosts []*netHost
	var why error
	if s.opts.Network != "proxy" {
		hosts, why = newNetHosts(s.own, s.opts.Nodes)
		if why != nil {
			if s.opts.Network == "netns" {
				return "", fmt.Errorf("network namespaces: %w", why)
			}
		}
	}
	for i := range s.opts.Nodes {
		n := &node{name: fmt.Sprintf("n%d", i+1)}
		mongoOn, redisOn := "127.0.0.1", "127.0.0.1"
		if hosts != nil {
			n.net = hosts[i]
			mongoOn, redisOn = n.net.hostMongo, n.net.hostRedis
		}
		s.nodes = append(s.nodes, n) // before the errors below, so that cleanup finds what was made
		var err error
		if n.mongo, err = NewProxyOn(mongoOn, mongoAddr); err != nil {
			return "", err
		}
		if n.redis, err = NewProxyOn(redisOn, s.opts.Redis); err != nil {
			return "", err
		}
	}
	if hosts != nil {
		return netnsNetwork, nil
	}
	if why != nil {
		return proxyNetwork + " (no namespaces: " + why.Error() + ")", nil
	}
	return proxyNetwork, nil
}

func (s *soak) params() checker.Params {
	p := checker.Params{MaxUnflushed: maxUnflushed, GapSlack: 4 * saveInterval}
	for _, sp := range s.opts.Streams {
		p.Streams = append(p.Streams, checker.Stream{Name: sp.Name, Single: sp.Single, Lanes: sp.Lanes})
	}
	for _, n := range s.nodes {
		p.Nodes = append(p.Nodes, n.name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := 1; k <= s.dynamic; k++ {
		p.Streams = append(p.Streams, checker.Stream{Name: fmt.Sprintf("dyn-%d", k), Single: true, Lanes: 1, Dynamic: true})
	}
	return p
}

func (s *soak) startServer(bin string) error {
	logf, err := os.Create(filepath.Join(s.dir, "mongosim.log"))
	if err != nil {
		return err
	}
	p, rd, err := startProc(s.sp, bin, []string{"--port", "0"}, nil, logf, false)
	if err != nil {
		return err
	}
	s.mongo = p
	if s.uri, err = readLine(rd, 30*time.Second, func(l string) bool { return strings.HasPrefix(l, "mongodb://") }); err != nil {
		return fmt.Errorf("mongosim did not print its URI: %w", err)
	}
	go func() { _, _ = io.Copy(io.Discard, rd) }()
	if s.client, err = mongo.Connect(options.Client().ApplyURI(s.uri).SetRetryWrites(true)); err != nil {
		return err
	}
	s.admin = s.client.Database("admin")
	s.rdb = redis.NewClient(&redis.Options{Addr: s.opts.Redis})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis at %s: %w", s.opts.Redis, err)
	}
	return s.client.Ping(ctx, nil)
}

// startNode starts (or restarts) n's process and waits for it to spawn its streams.
func (s *soak) startNode(n *node) error {
	n.mu.Lock()
	n.runs++
	run := n.runs
	n.mu.Unlock()
	base := filepath.Join(s.dir, fmt.Sprintf("%s-%02d", n.name, run))
	logf, err := os.Create(base + ".log")
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{"-name", n.name, "-mongo", "mongodb://" + n.mongo.Addr() + "/?directConnection=true",
		"-redis", n.redis.Addr(), "-redis-prefix", s.prefix, "-db", s.opts.Database,
		"-history", base + ".jsonl", "-log", base + ".zap.log", "-lease-ttl", s.opts.LeaseTTL.String(),
		"-max-unflushed", fmt.Sprint(maxUnflushed), "-save-interval", saveInterval.String(), "-lifeline",
		"-clock-file", s.clockFile(n)}
	if s.opts.Cursor != "" {
		args = append(args, "-cursor", s.opts.Cursor)
	}
	s.mu.Lock()
	args = append(args, "-dynamic", fmt.Sprint(s.dynamic))
	s.mu.Unlock()
	bin := s.nodeBin
	if n.net != nil { // ip netns exec execs the node: the pid signalled is the node's
		args = append([]string{"netns", "exec", n.net.ns, bin}, args...)
		bin = "ip"
	}
	p, rd, err := startProc(s.sp, bin, args, nil, logf, true)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.p = p
	n.mu.Unlock()
	// A restarted node may start while the server steps down: Start and Spawn retry inside.
	if _, err := readLine(rd, 90*time.Second, func(l string) bool { return l == "ready" }); err != nil {
		return fmt.Errorf("node %s run %d not ready: %w (see %s.log)", n.name, run, err, base)
	}
	go func() { _, _ = io.Copy(io.Discard, rd) }()
	return nil
}

// healAll undoes every fault.
func (s *soak) healAll(ctx context.Context) {
	_ = s.failPoint(ctx, "off", nil)
	s.waitPrimary(ctx, 30*time.Second)
	for _, n := range s.nodes {
		_ = n.heal()
		_ = s.setClock(n, "")
		n.resume()
		n.mu.Lock()
		dead := n.p == nil || n.p.exited()
		n.mu.Unlock()
		if dead {
			_ = s.startNode(n)
		}
	}
}

// cleanup stops every process the soak started and deletes its Redis keys; the directory is
// removed only when it was a temporary one and the caller did not ask to keep it.
func (s *soak) cleanup() {
	for _, n := range s.nodes {
		n.kill()
		if n.mongo != nil {
			_ = n.mongo.Close()
		}
		if n.redis != nil {
			_ = n.redis.Close()
		}
		if n.net != nil {
			n.net.close()
		}
	}
	if s.client != nil {
		_ = s.client.Disconnect(context.Background())
	}
	if s.mongo != nil {
		_ = s.mongo.stop(10 * time.Second)
	}
	if s.rdb != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if keys, err := s.rdb.Keys(ctx, s.prefix+"*").Result(); err == nil && len(keys) > 0 {
			_ = s.rdb.Del(ctx, keys...).Err()
		}
		_ = s.rdb.Close()
	}
}

// Print writes the report: figures, faults by kind, and every violation with the seed.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "chaos soak: seed %d, %v, network: %s\n", r.Seed, r.Duration.Round(time.Second), r.Network)
	counts := r.Counts()
	var fs []string
	for _, k := range r.Kinds {
		fs = append(fs, fmt.Sprintf("%s %d", k, counts[k]))
	}
	fmt.Fprintf(w, "faults: %d (%s)\n", len(r.Faults), strings.Join(fs, ", "))
	fmt.Fprintf(w, "coverage: %d full rounds planned; kinds under %d: %s", r.Rounds, r.Rounds, orNone(r.Undercovered(r.Rounds), counts))
	if r.Duration >= 10*time.Minute-10*time.Second { // a 600-second run: issue 37's minimum
		fmt.Fprintf(w, "; under %d: %s", MinPerKind600, orNone(r.Undercovered(MinPerKind600), counts))
	}
	fmt.Fprintln(w)
	if under := r.Undercovered(r.Rounds); len(under) > 0 {
		fmt.Fprintf(w, "  the nemesis stopped before its plan's end (cancelled or overran)\n")
	}
	fmt.Fprintf(w, "writes: %d committed (%d poison), %d aborted on purpose, %d uncertain; handler calls: %d\n",
		r.Writes[history.Committed], r.Poison, r.Writes[history.Aborted], r.Writes[history.Uncertain], r.Calls)
	fmt.Fprintf(w, "duplicates: %d; worst failover: %v (%s); caught up after healing: %v\n",
		r.Report.Duplicates, r.WorstFailover.Round(time.Millisecond), r.WorstFailoverStream, r.CaughtUp)
	for _, t := range r.Terminal {
		fmt.Fprintf(w, "  terminal stop: %s\n", t)
	}
	for _, v := range r.Views {
		fmt.Fprintf(w, "  %-14s handled %5d  duplicates %4d  sessions %3d  worst delay %v\n", v.View, v.Handled, v.Duplicates, v.Sessions, v.WorstDelay.Round(time.Millisecond))
	}
	if len(r.Violations) == 0 {
		fmt.Fprintf(w, "violations: 0\n")
		return
	}
	vcounts := map[checker.Kind]int{}
	for _, v := range r.Violations {
		vcounts[v.Kind]++
	}
	var cs []string
	for _, k := range checker.Kinds() {
		if vcounts[k] > 0 {
			cs = append(cs, fmt.Sprintf("%s %d", k, vcounts[k]))
		}
	}
	fmt.Fprintf(w, "violations: %d (%s) — rerun with CHAOS_SEED=%d; histories in %s\n", len(r.Violations), strings.Join(cs, ", "), r.Seed, r.Dir)
	shown := map[checker.Kind]int{}
	for _, v := range r.Violations {
		if shown[v.Kind]++; shown[v.Kind] <= 8 {
			fmt.Fprintf(w, "  %v\n", v)
		}
	}
}

// MinPerKind600 is how many times, at least, a 600-second run applies each fault kind (every
// kind enabled): issue 37's coverage, which schedule guarantees whatever the seed.
const MinPerKind600 = 5

// Counts returns how many faults of each kind ran, by kind (a kind of Kinds that never ran is
// absent: zero).
func (r *Report) Counts() map[string]int {
	n := map[string]int{}
	for _, k := range r.Faults {
		n[k]++
	}
	return n
}

// Undercovered returns the kinds of Kinds that ran fewer than min times, in Kinds' order; none
// when every kind ran at least min times.
func (r *Report) Undercovered(min int) []string {
	counts := r.Counts()
	var out []string
	for _, k := range r.Kinds {
		if counts[k] < min {
			out = append(out, k)
		}
	}
	return out
}

// orNone lists kinds with their counts, or says none.
func orNone(kinds []string, counts map[string]int) string {
	if len(kinds) == 0 {
		return "none"
	}
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = fmt.Sprintf("%s %d", k, counts[k])
	}
	return strings.Join(out, ", ")
}

// Failed reports whether the soak found a violation.
func (r *Report) Failed() bool { return len(r.Violations) > 0 }
