package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/test/chaos/history"
)

// The fault kinds of the nemesis.
const (
	FaultKill           = "sigkill"          // SIGKILL a node, restart it after 0.5-2s
	FaultPause          = "sigstop"          // SIGSTOP a node for longer than the lease TTL
	FaultPartMongo      = "partition-mongo"  // a node cut from the server, both ways
	FaultPartRedis      = "partition-redis"  // a node cut from Redis, both ways
	FaultPartBoth       = "partition-both"   // a node cut from both
	FaultPartAsym       = "partition-asym"   // one direction of one of its links
	FaultCursorKill     = "cursor-kill"      // getMore fails (CursorNotFound or a closed connection)
	FaultStepDown       = "stepdown"         // replSetStepDown of the server
	FaultCheckpointDown = "checkpoint-store" // checkpoint reads and writes fail
	FaultDeadLetterDown = "deadletter-store" // dead-letter writes fail
	FaultCorruptToken   = "corrupt-token"    // a saved resume token overwritten with garbage
	// FaultStopPartitioned is a graceful stop of a leader with a backlog (slow handlers), cut
	// from the server and Redis while it drains, for longer than the lease TTL.
	FaultStopPartitioned = "stop-partitioned"
	// FaultSpawn spawns a new SingleLeader stream on every node under load.
	FaultSpawn = "spawn-stream"
	// FaultClockSkew steps a node's clock (its runtimes' Config.Clock) forward by more than
	// the lease TTL, then backward by as much, then makes it drift, then back to the real time.
	// Leases are judged by the store's clock, so it must change nothing.
	FaultClockSkew = "clock-skew"
)

// FaultKinds lists the kinds the nemesis draws from. Clock skew reaches a node through its
// -clock-file (the nemesis writes it, the node's clock re-reads it): a runtime's clock cannot be
// skewed from outside its process otherwise (Go reads the kernel's clocks through the vDSO, and
// a time namespace offsets only the monotonic clock).
func FaultKinds() []string {
	return []string{FaultKill, FaultPause, FaultPartMongo, FaultPartRedis, FaultPartBoth, FaultPartAsym,
		FaultCursorKill, FaultStepDown, FaultCheckpointDown, FaultDeadLetterDown, FaultCorruptToken,
		FaultStopPartitioned, FaultSpawn, FaultClockSkew}
}

// fault is one planned fault.
type fault struct {
	kind   string
	at     time.Duration // planned start, counted from the nemesis's start
	node   int           // target node; -1 for the server or every node
	dur    time.Duration // how long until healed
	dir    Direction     // partition-asym: the direction
	redis  bool          // partition-asym: the Redis link (else MongoDB)
	stream string        // corrupt-token: the stream
	code   int           // cursor-kill: the error code (0: close the connection)
	skew   time.Duration // clock-skew: the step, forward then backward
	rate   float64       // clock-skew: the drift, seconds gained a second (negative: lost)
}

// The schedule's timing: the warm-up before the first fault, the pause between two faults
// (drawn between the bounds), and what a fault costs beyond its dur (a node's restart until it
// is ready, a step-down's election, a graceful stop's slow start).
const (
	warmUp     = 2 * time.Second
	minGap     = time.Second
	maxGap     = 3 * time.Second
	restartEst = 3 * time.Second
)

// schedule plans the whole nemesis of opts (defaulted), a pure function of its seed, Duration,
// Faults, Nodes, LeaseTTL and Streams: shuffled rounds, each of which runs every kind of
// opts.Faults once in an order drawn from the seed, one fault after another, each planned to
// start at its at: the previous one's start, plus its estimated length (estimate), plus a pause
// of 1-3 s. Faults are planned while their start falls within Duration, so every kind runs
// either as often as the completed rounds or once more: a 600-second run of every kind plans
// at least 6 rounds (TestScheduleCoversEveryKind), a shorter one fewer, still a balanced mix.
// The nemesis runs the plan to its end whatever the real lengths, so the coverage holds even
// when the faults run late.
func schedule(opts Options) []fault {
	rng := rand.New(rand.NewPCG(opts.Seed, 0x6e656d65736973))
	var out []fault
	at := warmUp
	for len(opts.Faults) > 0 {
		round := slices.Clone(opts.Faults)
		rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		for _, kind := range round {
			if at >= opts.Duration {
				return out
			}
			f := planFault(rng, kind, opts)
			f.at = at
			out = append(out, f)
			at += estimate(f, opts) + minGap + time.Duration(rng.Int64N(int64(maxGap-minGap)+1))
		}
	}
	return out
}

// rounds reports how many full rounds of kinds plan holds: the fewest faults of any kind.
func rounds(plan []fault, kinds []string) int {
	n := map[string]int{}
	for _, f := range plan {
		n[f.kind]++
	}
	least := -1
	for _, k := range kinds {
		if least < 0 || n[k] < least {
			least = n[k]
		}
	}
	return max(least, 0)
}

// estimate is how long f is expected to take, from its start until it is healed.
func estimate(f fault, opts Options) time.Duration {
	switch f.kind {
	case FaultKill, FaultCorruptToken:
		return f.dur + restartEst
	case FaultStepDown:
		return f.dur + time.Second
	case FaultStopPartitioned:
		return 2200*time.Millisecond + f.dur + restartEst
	case FaultSpawn:
		return time.Second
	}
	return f.dur
}

// planFault draws the parameters of a fault of kind from rng.
func planFault(rng *rand.Rand, kind string, opts Options) fault {
	f := fault{kind: kind, node: rng.IntN(opts.Nodes)}
	between := func(a, b time.Duration) time.Duration { return a + time.Duration(rng.Int64N(int64(b-a)+1)) }
	switch f.kind {
	case FaultKill:
		f.dur = between(500*time.Millisecond, 2*time.Second)
	case FaultPause:
		f.dur = opts.LeaseTTL + between(time.Second, 2*time.Second)
	case FaultPartMongo, FaultPartRedis, FaultPartBoth:
		f.dur = between(2*time.Second, 8*time.Second)
	case FaultPartAsym:
		f.dur = between(2*time.Second, 8*time.Second)
		f.dir = []Direction{Up, Down}[rng.IntN(2)]
		f.redis = rng.IntN(2) == 0
	case FaultCursorKill:
		f.dur = between(300*time.Millisecond, 2*time.Second)
		f.code = []int{0, 43}[rng.IntN(2)]
		if rng.IntN(2) == 0 {
			f.node = -1
		}
	case FaultStepDown:
		f.node, f.dur = -1, between(time.Second, 3*time.Second)
	case FaultCheckpointDown, FaultDeadLetterDown:
		f.dur = between(2*time.Second, 6*time.Second)
		if rng.IntN(2) == 0 {
			f.node = -1
		}
	case FaultCorruptToken:
		f.dur = between(500*time.Millisecond, 2*time.Second)
		f.stream = opts.Streams[rng.IntN(len(opts.Streams))].Name
	case FaultStopPartitioned:
		f.dur = opts.LeaseTTL + between(time.Second, 3*time.Second)
		f.stream = []string{"sl-mongo", "sl-redis"}[rng.IntN(2)]
	case FaultSpawn:
		f.node = -1
	case FaultClockSkew:
		f.dur = between(3*time.Second, 9*time.Second)
		f.skew = opts.LeaseTTL + between(time.Second, 4*time.Second)
		f.rate = float64(between(200*time.Millisecond, 500*time.Millisecond)) / float64(time.Second)
		if rng.IntN(2) == 0 {
			f.rate = -f.rate
		}
	}
	return f
}

func (s *soak) target(f fault) string {
	if f.node < 0 {
		return ""
	}
	return s.nodes[f.node].name
}

// apply runs fault f to its end (healed), recording it.
func (s *soak) apply(ctx context.Context, f fault) error {
	rec := history.Record{Type: history.Fault, Kind: f.kind, Node: s.target(f), Stream: f.stream, Start: time.Now()}
	var err error
	switch f.kind {
	case FaultKill:
		n := s.nodes[f.node]
		n.kill()
		sleep(ctx, f.dur)
		err = s.startNode(n)
	case FaultPause:
		n := s.nodes[f.node]
		n.pause()
		sleep(ctx, f.dur)
		n.resume()
	case FaultPartMongo, FaultPartRedis, FaultPartBoth:
		n := s.nodes[f.node]
		if f.kind != FaultPartRedis {
			err = n.cut(false, Both)
		}
		if f.kind != FaultPartMongo && err == nil {
			err = n.cut(true, Both)
		}
		sleep(ctx, f.dur)
		if herr := n.heal(); err == nil {
			err = herr
		}
	case FaultPartAsym:
		n := s.nodes[f.node]
		link := "mongo"
		if f.redis {
			link = "redis"
		}
		dir := "node→server"
		if f.dir == Down {
			dir = "server→node"
		}
		rec.Detail = link + " " + dir
		err = n.cut(f.redis, f.dir)
		sleep(ctx, f.dur)
		if herr := n.heal(); err == nil {
			err = herr
		}
	case FaultCursorKill:
		data := bson.D{{Key: "failCommands", Value: bson.A{"getMore"}}}
		if f.code == 0 {
			data = append(data, bson.E{Key: "closeConnection", Value: true})
			rec.Detail = "closeConnection"
		} else {
			data = append(data, bson.E{Key: "errorCode", Value: f.code})
			rec.Detail = fmt.Sprintf("errorCode %d", f.code)
		}
		if f.node >= 0 {
			data = append(data, bson.E{Key: "appName", Value: s.nodes[f.node].name})
		}
		if err = s.failPoint(ctx, "alwaysOn", data); err == nil {
			sleep(ctx, f.dur)
			err = s.failPoint(ctx, "off", nil)
		}
	case FaultStepDown:
		err = s.admin.RunCommand(ctx, bson.D{{Key: "replSetStepDown", Value: f.dur.Seconds()}, {Key: "force", Value: true}}).Err()
		s.waitPrimary(ctx, f.dur+30*time.Second)
	case FaultCheckpointDown, FaultDeadLetterDown:
		coll := "_wt_checkpoints"
		if f.kind == FaultDeadLetterDown {
			coll = "_wt_dead_letters"
		}
		data := bson.D{
			{Key: "failCommands", Value: bson.A{"find", "insert", "update", "findAndModify", "delete", "aggregate"}},
			{Key: "namespace", Value: s.opts.Database + "." + coll},
			{Key: "errorCode", Value: 6}, // HostUnreachable: retryable, not a state change of the server
		}
		if f.node >= 0 {
			data = append(data, bson.E{Key: "appName", Value: s.nodes[f.node].name})
		}
		if err = s.failPoint(ctx, "alwaysOn", data); err == nil {
			sleep(ctx, f.dur)
			err = s.failPoint(ctx, "off", nil)
		}
	case FaultCorruptToken:
		rec.Node, err = s.corruptToken(ctx, f)
	case FaultStopPartitioned:
		rec.Node, err = s.stopPartitioned(ctx, f)
	case FaultClockSkew:
		n := s.nodes[f.node]
		rec.Detail = fmt.Sprintf("+%v, -%v, drift %+.0f%%", f.skew, f.skew, 100*f.rate)
		for _, step := range []string{f.skew.String() + " 0", (-f.skew).String() + " 0", fmt.Sprintf("0s %g", f.rate)} {
			if err = s.setClock(n, step); err != nil {
				break
			}
			sleep(ctx, f.dur/3)
		}
		if herr := s.setClock(n, ""); err == nil {
			err = herr
		}
	case FaultSpawn:
		s.mu.Lock()
		s.dynamic++
		rec.Stream = fmt.Sprintf("dyn-%d", s.dynamic)
		s.mu.Unlock()
		for _, n := range s.nodes {
			n.mu.Lock()
			if n.p != nil {
				n.p.signal(syscall.SIGUSR2)
			}
			n.mu.Unlock()
		}
	}
	rec.End = time.Now()
	if err != nil {
		rec.Err = err.Error()
	}
	s.h.Add(rec)
	return err
}

func (s *soak) failPoint(ctx context.Context, mode string, data bson.D) error {
	cmd := bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: mode}}
	if data != nil {
		cmd = append(cmd, bson.E{Key: "data", Value: data})
	}
	return s.admin.RunCommand(ctx, cmd).Err()
}

// waitPrimary polls hello until the server is writable again.
func (s *soak) waitPrimary(ctx context.Context, within time.Duration) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var h struct {
			IsWritablePrimary bool `bson:"isWritablePrimary"`
		}
		if err := s.admin.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&h); err == nil && h.IsWritablePrimary {
			return
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

// corruptToken overwrites a saved resume token with garbage where a stream must read it: it
// freezes the node that would overwrite it (the leader of a SingleLeader stream; the instance
// for an AllInstances one), writes the garbage, then kills and restarts that node, so that the
// next start (a standby's takeover, or the instance's own restart) loads the corrupt token.
func (s *soak) corruptToken(ctx context.Context, f fault) (string, error) {
	var sp StreamSpec
	for _, x := range s.opts.Streams {
		if x.Name == f.stream {
			sp = x
		}
	}
	n := s.nodes[f.node]
	var id any = f.stream
	if sp.Single {
		// No holder (the stream may have stopped for good): the planned node stands in.
		owner, _ := s.leaseOwner(ctx, sp)
		for _, x := range s.nodes {
			if strings.HasPrefix(owner, x.name+"-") {
				n = x
			}
		}
	} else {
		id = bson.D{{Key: "stream", Value: f.stream}, {Key: "instance", Value: n.name}}
	}
	n.pause()
	// The garbage sorts after every real token (their _data is upper-case hex): a checkpoint
	// write of the node still in flight (sent before a partition, delivered late) is refused
	// as behind it instead of quietly repairing it, so the restart meets the corruption.
	garbage := bson.D{{Key: "_data", Value: "zz-chaos-corrupt-token"}}
	_, err := s.client.Database(s.opts.Database).Collection("_wt_checkpoints").UpdateOne(ctx,
		bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$set", Value: bson.D{{Key: "token", Value: garbage}}}})
	n.kill()
	sleep(ctx, f.dur)
	if serr := s.startNode(n); err == nil {
		err = serr
	}
	return n.name, err
}

// stopPartitioned makes the leader of f.stream slow (a backlog builds up), stops it
// gracefully, and cuts it from the server and Redis while it drains, for f.dur; then heals,
// waits for it to exit and starts it again.
func (s *soak) stopPartitioned(ctx context.Context, f fault) (string, error) {
	n := s.nodes[f.node]
	for _, sp := range s.opts.Streams {
		if sp.Name != f.stream {
			continue
		}
		// No holder (the stream may have stopped for good): the planned node stands in.
		owner, _ := s.leaseOwner(ctx, sp)
		for _, x := range s.nodes {
			if strings.HasPrefix(owner, x.name+"-") {
				n = x
			}
		}
	}
	n.mu.Lock()
	p := n.p
	n.mu.Unlock()
	if p == nil {
		return n.name, errors.New("node not running")
	}
	p.signal(syscall.SIGUSR1) // slow handlers
	sleep(ctx, 2*time.Second)
	p.signal(syscall.SIGTERM)
	sleep(ctx, 200*time.Millisecond) // the stop has begun
	err := n.cut(false, Both)
	if err == nil {
		err = n.cut(true, Both)
	}
	sleep(ctx, f.dur)
	if herr := n.heal(); err == nil {
		err = herr
	}
	if err != nil {
		return n.name, err
	}
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
	}
	n.kill()
	return n.name, s.startNode(n)
}

// leaseOwner reads the owner of a SingleLeader stream's lease from its store.
func (s *soak) leaseOwner(ctx context.Context, sp StreamSpec) (string, error) {
	if sp.RedisLeases {
		keys, err := s.rdb.Keys(ctx, s.prefix+"*").Result()
		if err != nil {
			return "", err
		}
		for _, k := range keys {
			if !strings.Contains(k, sp.Name) {
				continue
			}
			if v, err := s.rdb.HGet(ctx, k, "owner").Result(); err == nil {
				return v, nil
			}
		}
		return "", fmt.Errorf("no Redis lease of %s under %s", sp.Name, s.prefix)
	}
	var d struct {
		Owner string `bson:"owner"`
	}
	err := s.client.Database(s.opts.Database).Collection("_wt_leases").FindOne(ctx, bson.D{{Key: "_id", Value: sp.Name}}).Decode(&d)
	return d.Owner, err
}

// cut partitions direction d of n's link to Redis (redis) or MongoDB: by blackhole routes
// when n has a namespace, else by its proxy.
func (n *node) cut(redis bool, d Direction) error {
	if n.net != nil {
		return n.net.cut(redis, d)
	}
	if redis {
		n.redis.Partition(d)
	} else {
		n.mongo.Partition(d)
	}
	return nil
}

// clockFile is n's -clock-file.
func (s *soak) clockFile(n *node) string { return filepath.Join(s.dir, n.name+".clock") }

// setClock writes n's clock file ("<offset> <rate>"; "" is the real time), which its node
// re-reads within 50ms; the rename makes the write whole for the reader.
func (s *soak) setClock(n *node, skew string) error {
	tmp := s.clockFile(n) + ".tmp"
	if err := os.WriteFile(tmp, []byte(skew+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, s.clockFile(n))
}

// heal undoes every cut of n's links.
func (n *node) heal() error {
	n.mongo.Heal()
	n.redis.Heal()
	if n.net != nil {
		return n.net.heal()
	}
	return nil
}

func (n *node) pause() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.p != nil {
		n.p.signal(syscall.SIGSTOP)
		n.stopped = true
	}
}

func (n *node) resume() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.p != nil {
		n.p.signal(syscall.SIGCONT)
		n.stopped = false
	}
}

func (n *node) kill() {
	n.mu.Lock()
	p := n.p
	n.p, n.stopped = nil, false
	n.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
