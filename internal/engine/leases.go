package engine

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/watchtree/watchtree/actors/leader"
	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/treekit"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/policy"
	"github.com/watchtree/watchtree/store"
)

var _ leader.Balancer = (*balancer)(nil)

// fencedDeadLetters guards a SingleLeader stream's dead-letter writes: a write goes through only
// while this instance holds the lease under the stream's current epoch, as the lease store
// judges it right before the write; otherwise it fails with store.ErrFenced (the event stays
// unsettled, so nothing is lost) and Fence is called, which tells the supervisor to stop the
// stream at once.
type fencedDeadLetters struct {
	store.DeadLetterStore
	// Leases is the stream's lease store; Stream its name (the lease's) and Owner this
	// instance's ID (Config.InstanceID).
	Leases        store.LeaseStore
	Stream, Owner string
	// Epoch returns the epoch of the term under way.
	Epoch func() int64
	// Fence reports a refused write (the supervisor gets a wire.Fenced).
	Fence func(f *wire.Fenced)
}

// PutDeadLetter checks the lease, then writes dl (store.DeadLetterStore.PutDeadLetter).
func (f fencedDeadLetters) PutDeadLetter(ctx context.Context, dl store.DeadLetter) error {
	epoch := f.Epoch()
	l, ok, err := f.Leases.GetLease(ctx, f.Stream)
	if err != nil {
		return fmt.Errorf("watchtree: dead letter of stream %q: check the lease: %w", f.Stream, err)
	}
	if !ok || !l.Held() || l.Owner != f.Owner || l.Epoch != epoch {
		why := fmt.Sprintf("dead-letter write under epoch %d refused: the lease is held by %q under epoch %d", epoch, l.Owner, l.Epoch)
		f.Fence(&wire.Fenced{Epoch: epoch, Why: why})
		return fmt.Errorf("watchtree: stream %q: %s: %w", f.Stream, why, store.ErrFenced)
	}
	return f.DeadLetterStore.PutDeadLetter(ctx, dl)
}

// balancer shares the runtime's SingleLeader leaderships out over the live instances: it keeps
// this instance's heartbeat in the lease store (every RenewEvery, for TTL) and counts the live
// instances; the leader actors ask it before they take a free lease and after each renewal.
type balancer struct {
	clk     clock.Clock // times the heartbeats (Config.Clock)
	leases  store.LeaseStore
	policy  policy.Lease
	id      string        // this instance (Config.InstanceID)
	name    string        // and its Config.InstanceName
	connect time.Duration // bound of each store call (Config.ConnectTimeout, at most RenewEvery)
	log     *zap.Logger

	mu        sync.Mutex
	streams   map[string]bool // the runtime's SingleLeader streams → led by this instance
	handing   map[string]bool // led streams being handed over
	instances int             // live instances, this one included (≥ 1)
	dups      []string        // the other live instances with this one's InstanceName, by ID

	cancel context.CancelFunc
	done   chan struct{}
	// leave bounds the Leave that ends the heartbeat: Stop's context, set by stop.
	leave context.Context
}

// newBalancer starts the balancer of instance id (named name) on leases, with the runtime's
// lease policy p (resolved by the root, Config.Lease) and each store call bounded by connect; Stop ends it.
func newBalancer(leases store.LeaseStore, p policy.Lease, id, name string, connect time.Duration, clk clock.Clock, log *zap.Logger) *balancer {
	ctx, cancel := context.WithCancel(context.Background())
	b := &balancer{clk: clk, leases: leases, policy: p, id: id, name: name, connect: connect, log: log, streams: map[string]bool{},
		handing: map[string]bool{}, instances: 1, cancel: cancel, done: make(chan struct{})}
	go b.run(ctx)
	return b
}

// run beats and counts the instances every RenewEvery until stop.
func (b *balancer) run(ctx context.Context) {
	defer close(b.done)
	id := b.id
	for {
		cctx, cancel := context.WithTimeout(ctx, min(b.connect, b.policy.RenewEvery))
		err := b.leases.Heartbeat(cctx, id, b.policy.TTL)
		var in []store.Instance
		if err == nil {
			in, err = b.leases.Instances(cctx)
		}
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			b.log.Warn("instance heartbeat failed", zap.Error(err))
		} else {
			n := len(in)
			found := false
			for _, i := range in {
				found = found || i.ID == id
			}
			if !found {
				n++
			}
			dups := sameName(in, id, b.name)
			b.mu.Lock()
			b.instances = max(n, 1)
			changed := !slices.Equal(dups, b.dups)
			b.dups = dups
			b.mu.Unlock()
			if changed && len(dups) > 0 {
				b.log.Warn("another live instance has this instance's InstanceName: they share the positions and dead letters of the AllInstances streams; give each process its own InstanceName",
					zap.String("instance_name", b.name), zap.Strings("same_name", dups))
			}
		}
		if treekit.Sleep(ctx, b.clk, b.policy.RenewEvery) {
			continue
		}
		break
	}
	b.mu.Lock()
	leave := b.leave
	b.mu.Unlock()
	if leave == nil {
		leave = context.Background()
	}
	lctx, cancel := context.WithTimeout(leave, min(b.connect, time.Second))
	defer cancel()
	_ = b.leases.Leave(lctx, id)
}

// instanceIDName parses the InstanceName out of an InstanceID of the default form
// "<InstanceName>-<pid>-<6 hex digits>"; ok is false for an ID of another form.
var instanceIDName = regexp.MustCompile(`^(.+)-[0-9]+-[0-9a-f]{6}$`)

// sameName returns the IDs, sorted, of the instances other than self whose InstanceID has the
// default form with InstanceName name: another process running under the same name. An
// instance whose InstanceID was set by hand cannot be told.
func sameName(in []store.Instance, self, name string) []string {
	var out []string
	for _, i := range in {
		if m := instanceIDName.FindStringSubmatch(i.ID); i.ID != self && m != nil && m[1] == name {
			out = append(out, i.ID)
		}
	}
	sort.Strings(out)
	return out
}

// duplicates returns the other live instances with this instance's InstanceName, as of the
// last heartbeat.
func (b *balancer) duplicates() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dups
}

// stop ends the heartbeat and removes this instance's record (Leave, bounded by ctx and 1s:
// an unreachable store must not hold Runtime.Stop past its bound).
func (b *balancer) stop(ctx context.Context) {
	b.mu.Lock()
	b.leave = ctx
	b.mu.Unlock()
	b.cancel()
	<-b.done
}

// add counts stream among the runtime's SingleLeader streams, not led yet.
func (b *balancer) add(stream string) {
	b.mu.Lock()
	b.streams[stream] = false
	b.mu.Unlock()
}

// remove forgets stream (unregistered).
func (b *balancer) remove(stream string) {
	b.mu.Lock()
	delete(b.streams, stream)
	delete(b.handing, stream)
	b.mu.Unlock()
}

// share is ⌈M/N⌉, under b.mu.
func (b *balancer) share() (leading, share int) {
	for _, l := range b.streams {
		if l {
			leading++
		}
	}
	m := len(b.streams)
	return leading, (m + b.instances - 1) / b.instances
}

// MayAcquire implements leader.Balancer: this instance leads fewer than its share.
func (b *balancer) MayAcquire() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	leading, share := b.share()
	return leading < share
}

// Leading implements leader.Balancer.
func (b *balancer) Leading(stream string, leading bool) {
	b.mu.Lock()
	if _, ok := b.streams[stream]; ok {
		b.streams[stream] = leading
	}
	if !leading {
		delete(b.handing, stream)
	}
	b.mu.Unlock()
}

// ShouldHandOver implements leader.Balancer: one handover at a time, only above the share.
func (b *balancer) ShouldHandOver(stream string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	leading, share := b.share()
	if b.handing[stream] || leading-len(b.handing) <= share {
		return false
	}
	b.handing[stream] = true
	return true
}
