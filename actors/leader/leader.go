package leader

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/statusx"
	"github.com/watchtree/watchtree/internal/treekit"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/store"
)

// New validates cfg and returns the props of the leader actor. Spawn it as a child of the
// stream's supervisor: it reports to its parent.
func New(cfg Config) (*actor.Props, error) {
	return treekit.New(cfg, Config.validate, Config.withDefaults, func(c *Config) actor.Actor {
		return &leaderActor{cfg: *c, log: c.Logger}
	})
}

// op is a lease store call.
type op uint8

const (
	opAcquire op = iota
	opRenew
	opRelease
	opProbe // a read of the lease (GetLease) during a release window
)

func (o op) String() string { return [...]string{"acquire", "renew", "release", "probe"}[o] }

// ioResult is a lease store call's outcome, sent by the I/O goroutine to the actor (plain Go:
// it never leaves the actor). gen is the actor's generation when the call was made; sentAt
// and sentMono are the actor's clock then, its wall time (for the record) and its monotonic
// reading (clock.Mono: the term is measured on it, so that a jump of the wall time moves no
// deadline).
type ioResult struct {
	op       op
	gen      uint64
	epoch    int64 // the epoch the call named (renew, release)
	sentAt   time.Time
	sentMono time.Duration
	lease    store.Lease
	err      error
}

// tick is one of the actor's timers firing; a tick of an older generation is dropped.
type tick struct {
	kind tickKind
	gen  uint64
}

type tickKind uint8

const (
	tickRenew    tickKind = iota // leader: time to renew (or retry a failed renewal)
	tickDemote                   // leader: lastRenewOk + TTL - Margin passed
	tickPoll                     // standby: the periodic attempt
	tickExpiry                   // standby: the lease seen has just expired
	tickDeferred                 // standby: a deferred attempt (balance, cooldown)
)

// watchFired: the lease store reported a change of the lease.
type watchFired struct{}

type job struct {
	op    op
	gen   uint64
	epoch int64
	at    time.Time
	mono  time.Duration // clock.Mono at submission
}

// leaderActor holds one stream's lease. Every lease store call runs on its I/O goroutine,
// never on the mailbox goroutine; the results come back as ioResult messages stamped with the
// generation, which changes with every change of role, so a late answer cannot act on a role
// the actor has left.
type leaderActor struct {
	cfg  Config
	log  *zap.Logger
	self *actor.PID
	root *actor.RootContext
	sup  *actor.PID

	role        messages.LeaseRole
	why         string
	gen         uint64
	epoch       int64       // own epoch while leader
	expiresAt   time.Time   // own lease's expiry while leader (store clock)
	seen        store.Lease // the lease as last seen
	lastRenewOk time.Time   // when the latest successful renewal (or the acquisition) was sent
	handingOver bool
	deferUntil  time.Time // no acquisition before (balance, cooldown after a handover)
	// yielded is the epoch this instance released while its release window runs (deferUntil):
	// it leaves the lease to the others until then, unless it sees that another instance took
	// it (an epoch above yielded), which ends the window. 0: no window.
	yielded int64
	probing bool // a probe (GetLease) of the release window is in flight
	reprobe bool // a change notice came while probing: probe again after that answer

	acquiring, renewing bool
	// answered: the lease store answered an acquisition attempt of this campaign (reported as
	// LeaseState.answered, so that the supervisor knows a standby from a campaign's start).
	answered bool
	resign   *pendingResign

	timers map[tickKind]clock.Timer

	jobs        chan job
	cancel      context.CancelFunc
	watchCancel context.CancelFunc
	done        chan struct{}

	acquisitions, losses, handovers, fenced uint64
}

type pendingResign struct {
	to       []*actor.PID // every requester of the release under way
	again    bool
	cooldown time.Duration
	handover bool
	epoch    int64
}

// Receive handles the lifecycle, the supervisor's requests and the actor's own reports.
func (a *leaderActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.onStarted(ctx)
	case *actor.Stopping, *actor.Restarting:
		a.shutdown()
	case *wire.Campaign:
		a.onCampaign(m.GetReason())
	case *wire.Resign:
		a.onResign(ctx, m)
	case *wire.Fenced:
		a.onFenced(m)
	case *ioResult:
		a.onResult(m)
	case *tick:
		a.onTick(m)
	case *watchFired:
		if a.role == messages.LeaseRole_LEASE_ROLE_STANDBY {
			if a.inWindow() {
				a.probe()
				return
			}
			a.attempt("the lease changed")
		}
	}
}

func (a *leaderActor) onStarted(ctx actor.Context) {
	a.self, a.root, a.sup = ctx.Self(), ctx.ActorSystem().Root, ctx.Parent()
	a.role, a.why = messages.LeaseRole_LEASE_ROLE_IDLE, "not campaigning"
	a.timers = map[tickKind]clock.Timer{}
	ioctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	a.jobs = make(chan job, 8)
	a.done = make(chan struct{})
	go a.worker(ioctx, a.jobs, a.done)
}

// worker runs the lease store calls in order, each bounded by IOTimeout, and sends each result
// to the actor. It ends when the actor stops.
func (a *leaderActor) worker(ctx context.Context, jobs <-chan job, done chan<- struct{}) {
	defer close(done)
	cfg, root, self := a.cfg, a.root, a.self
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-jobs:
			cctx, cancel := context.WithTimeout(ctx, cfg.IOTimeout)
			r := &ioResult{op: j.op, gen: j.gen, epoch: j.epoch, sentAt: j.at, sentMono: j.mono}
			switch j.op {
			case opAcquire:
				r.lease, r.err = cfg.Store.Acquire(cctx, cfg.Stream, cfg.Owner, cfg.Policy.TTL)
			case opRenew:
				r.lease, r.err = cfg.Store.Renew(cctx, cfg.Stream, cfg.Owner, j.epoch, cfg.Policy.TTL)
			case opRelease:
				r.err = cfg.Store.Release(cctx, cfg.Stream, cfg.Owner, j.epoch)
			case opProbe:
				r.lease, _, r.err = cfg.Store.GetLease(cctx, cfg.Stream)
			}
			cancel()
			if ctx.Err() != nil {
				return
			}
			root.Send(self, r)
		}
	}
}

func (a *leaderActor) submit(o op, epoch int64) {
	j := job{op: o, gen: a.gen, epoch: epoch, at: a.cfg.Clock.Now(), mono: clock.Mono(a.cfg.Clock)}
	select {
	case a.jobs <- j:
	default:
		// The queue holds at most a few calls (one of each kind); a full one means the store
		// hangs, and the timers retry.
		a.log.Warn("lease store calls backed up; call dropped", zap.Stringer("op", j.op))
		switch o {
		case opAcquire:
			a.acquiring = false
		case opRenew:
			a.renewing = false
		case opProbe:
			a.probing, a.reprobe = false, false
		}
	}
}

// validUntil reports until which clock.Mono reading this instance may act as the leader
// (Config.OnValidUntil; 0: not leading).
func (a *leaderActor) validUntil(mono time.Duration) {
	if a.cfg.OnValidUntil != nil {
		a.cfg.OnValidUntil(mono)
	}
}

func (a *leaderActor) shutdown() {
	a.stopTimers()
	if a.watchCancel != nil {
		a.watchCancel()
		a.watchCancel = nil
	}
	if a.cancel != nil {
		a.cancel()
		<-a.done // the worker ends within IOTimeout: its call's context is cancelled
		a.cancel = nil
	}
	if a.role == messages.LeaseRole_LEASE_ROLE_LEADER {
		a.validUntil(0)
		if a.cfg.Balancer != nil {
			a.cfg.Balancer.Leading(a.cfg.Stream, false)
		}
	}
}

func (a *leaderActor) arm(kind tickKind, d time.Duration) {
	if t := a.timers[kind]; t != nil {
		t.Stop()
	}
	root, self, gen := a.root, a.self, a.gen
	a.timers[kind] = a.cfg.Clock.AfterFunc(max(d, 0), func() { root.Send(self, &tick{kind: kind, gen: gen}) })
}

func (a *leaderActor) stopTimers() {
	for k, t := range a.timers {
		t.Stop()
		delete(a.timers, k)
	}
}

// become changes the role: a new generation (late results and ticks of the old role are
// dropped), no timers, a LeaseState to the supervisor.
func (a *leaderActor) become(role messages.LeaseRole, why string) {
	if a.role == messages.LeaseRole_LEASE_ROLE_LEADER && role != messages.LeaseRole_LEASE_ROLE_LEADER {
		a.validUntil(0)
		if a.cfg.Balancer != nil {
			a.cfg.Balancer.Leading(a.cfg.Stream, false)
		}
	}
	a.gen++
	a.stopTimers()
	a.acquiring, a.renewing, a.handingOver, a.probing, a.reprobe = false, false, false, false, false
	a.role, a.why = role, why
	a.log.Info("lease role "+roleName(role), zap.String("why", why), zap.Int64("epoch", a.epoch))
	a.report()
}

// roleName is r's name in the logs: package status's names, and "unspecified" for the zero
// value the actor starts from.
func roleName(r messages.LeaseRole) string {
	if r == messages.LeaseRole_LEASE_ROLE_UNSPECIFIED {
		return "unspecified"
	}
	return statusx.RoleOf(r)
}

func (a *leaderActor) report() {
	st := &messages.LeaseState{Role: a.role, Owner: a.cfg.Owner, Holder: a.seen.Owner, Epoch: a.seen.Epoch, Why: a.why,
		Acquisitions: a.acquisitions, Losses: a.losses, Handovers: a.handovers, Fenced: a.fenced, Answered: a.answered}
	if a.role == messages.LeaseRole_LEASE_ROLE_LEADER {
		st.Holder, st.Epoch = a.cfg.Owner, a.epoch
		if !a.expiresAt.IsZero() {
			st.ExpiresAt = timestamppb.New(a.expiresAt)
		}
	} else if !a.seen.ExpiresAt.IsZero() && a.seen.Owner != "" {
		st.ExpiresAt = timestamppb.New(a.seen.ExpiresAt)
	}
	a.root.Send(a.sup, st)
}

// announce hands the Observer a LeadershipChanged of this instance: the lease as last seen (the
// holder, epoch and expiry), epoch the one concerned. A panic of the Observer is recovered.
func (a *leaderActor) announce(change observe.LeadershipChange, epoch int64, why string) {
	owner := a.seen.Owner
	if change == observe.LeadershipAcquired {
		owner = a.cfg.Owner
	}
	ev := observe.LeadershipChanged{Meta: observe.Meta{Stream: a.cfg.Stream, Time: a.cfg.Clock.Now()},
		Leader: change == observe.LeadershipAcquired, Change: change, Instance: a.cfg.Owner, Owner: owner,
		Epoch: epoch, ExpiresAt: a.expiresAt, Why: why}
	treekit.Report(a.cfg.Observer, a.log, "leader", ev)
}

func (a *leaderActor) watch() {
	if a.watchCancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.watchCancel = cancel
	ch := a.cfg.Store.WatchLease(ctx, a.cfg.Stream)
	root, self := a.root, a.self
	go func() {
		for range ch {
			root.Send(self, &watchFired{})
		}
	}()
}

func (a *leaderActor) onCampaign(reason string) {
	if a.resign != nil {
		// A release is under way (a stop just before this start): campaign once it is written.
		a.resign.again = true
		return
	}
	if a.role != messages.LeaseRole_LEASE_ROLE_IDLE {
		return
	}
	a.standby("campaigning: " + reason)
}

// standby enters the standby role and attempts at once.
func (a *leaderActor) standby(why string) {
	a.answered = false
	a.become(messages.LeaseRole_LEASE_ROLE_STANDBY, why)
	a.watch()
	a.attempt(why)
}

// attempt tries to acquire, unless an attempt is in flight or acquisitions are deferred.
func (a *leaderActor) attempt(why string) {
	if a.role != messages.LeaseRole_LEASE_ROLE_STANDBY || a.acquiring {
		return
	}
	now := a.cfg.Clock.Now()
	if a.deferUntil.IsZero() && a.cfg.Balancer != nil && !a.cfg.Balancer.MayAcquire() {
		// At or above the fair share: let instances below it take a free lease first.
		a.deferUntil = now.Add(a.cfg.Policy.RenewEvery)
	}
	if now.Before(a.deferUntil) {
		a.arm(tickDeferred, a.deferUntil.Sub(now))
		return
	}
	a.yielded = 0 // a release window, if any, is over
	a.acquiring = true
	a.log.Debug("acquiring the lease", zap.String("trigger", why))
	a.submit(opAcquire, 0)
}

func (a *leaderActor) onTick(t *tick) {
	if t.gen != a.gen {
		return
	}
	delete(a.timers, t.kind)
	switch t.kind {
	case tickRenew:
		if a.role == messages.LeaseRole_LEASE_ROLE_LEADER && !a.renewing {
			a.renewing = true
			a.submit(opRenew, a.epoch)
		}
	case tickDemote:
		if a.role == messages.LeaseRole_LEASE_ROLE_LEADER {
			a.lose(fmt.Sprintf("no renewal succeeded since %s; stopping %v before the lease can expire",
				a.lastRenewOk.Format(time.RFC3339Nano), a.cfg.Policy.Margin))
		}
	case tickPoll:
		a.attempt("standby poll")
	case tickExpiry:
		a.attempt("the lease seen expired")
	case tickDeferred:
		a.attempt("deferred attempt")
	}
}

func (a *leaderActor) onResult(r *ioResult) {
	switch r.op {
	case opAcquire:
		if r.gen != a.gen {
			if r.err == nil {
				// A role change overtook a successful acquisition: give that epoch back.
				a.log.Info("late acquisition released", zap.Int64("epoch", r.lease.Epoch))
				a.submit(opRelease, r.lease.Epoch)
			}
			return
		}
		a.acquiring = false
		a.onAcquired(r)
	case opRenew:
		if r.gen != a.gen {
			if r.err == nil && a.role != messages.LeaseRole_LEASE_ROLE_LEADER {
				a.submit(opRelease, r.epoch) // renewed after the demotion: free it for the others
			}
			return
		}
		a.renewing = false
		a.onRenewed(r)
	case opRelease:
		if a.resign != nil && r.epoch == a.resign.epoch {
			a.onReleased(r)
		}
	case opProbe:
		if r.gen != a.gen {
			return
		}
		a.probing = false
		a.onProbed(r)
		if a.reprobe && a.inWindow() {
			a.probe()
		}
	}
}

// inWindow reports whether a release window runs: this standby released the lease and leaves
// it to the others until deferUntil.
func (a *leaderActor) inWindow() bool {
	return a.yielded != 0 && a.cfg.Clock.Now().Before(a.deferUntil)
}

// probe reads the lease (on the I/O goroutine) during a release window, on a change notice: it
// tells whether another instance took the lease, which ends the window.
func (a *leaderActor) probe() {
	if a.probing {
		// The answer under way may predate this change: read again once it is in.
		a.reprobe = true
		return
	}
	a.probing, a.reprobe = true, false
	a.submit(opProbe, a.yielded)
}

// onProbed ends the release window once another instance acquired the lease after this one
// released it (an epoch above the released one): the handover happened, so this instance is a
// plain standby from now on. If the new holder holds it, the standby retries when that lease
// expires (and at once on the next change notice, its release); if the lease is free again
// (the new holder left already), it competes at once. While nobody took it, the window runs
// on, and the instance competes at its end.
func (a *leaderActor) onProbed(r *ioResult) {
	if r.err != nil {
		a.log.Debug("lease probe failed; the release window runs on", zap.Error(r.err))
		return
	}
	if !a.inWindow() || r.lease.Epoch <= a.yielded {
		return
	}
	l := r.lease
	a.log.Info("the released lease was taken over; release window ended",
		zap.String("holder", l.Owner), zap.Int64("epoch", l.Epoch))
	a.yielded, a.deferUntil = 0, time.Time{}
	if t := a.timers[tickDeferred]; t != nil {
		t.Stop()
		delete(a.timers, tickDeferred)
	}
	if !l.Held() {
		a.attempt("the lease was taken over and freed again")
		return
	}
	a.seen = l
	a.arm(tickExpiry, l.Remaining+time.Millisecond)
	a.arm(tickPoll, a.cfg.Policy.StandbyPoll)
	a.why = fmt.Sprintf("standby: %s leads (epoch %d)", l.Owner, l.Epoch)
	a.report()
}

func (a *leaderActor) onAcquired(r *ioResult) {
	first := !a.answered
	a.answered = true
	if r.err != nil {
		if errors.Is(r.err, store.ErrLeaseHeld) {
			changed := r.lease.Owner != a.seen.Owner || r.lease.Epoch != a.seen.Epoch
			a.seen = r.lease
			a.deferUntil = time.Time{}
			a.arm(tickExpiry, r.lease.Remaining+time.Millisecond)
			if changed || first {
				a.why = fmt.Sprintf("standby: %s leads (epoch %d)", r.lease.Owner, r.lease.Epoch)
				a.report()
			}
		} else {
			a.log.Warn("lease acquisition failed", zap.Error(r.err))
			if first {
				a.why = "standby: the lease store failed: " + r.err.Error()
				a.report()
			}
		}
		a.arm(tickPoll, a.cfg.Policy.StandbyPoll)
		return
	}
	l := r.lease
	a.seen, a.epoch, a.expiresAt, a.lastRenewOk = l, l.Epoch, l.ExpiresAt, r.sentAt
	a.validUntil(r.sentMono + a.cfg.Policy.TTL - a.cfg.Policy.Margin)
	a.deferUntil = time.Time{}
	a.acquisitions++
	if a.cfg.Balancer != nil {
		a.cfg.Balancer.Leading(a.cfg.Stream, true)
	}
	if a.cfg.OnAcquired != nil {
		a.cfg.OnAcquired(l.Epoch) // before the supervisor hears of it: every write of the term carries it
	}
	a.log.Info("leadership acquired", zap.Int64("epoch", l.Epoch), zap.Time("expires_at", l.ExpiresAt))
	a.announce(observe.LeadershipAcquired, l.Epoch, "")
	a.become(messages.LeaseRole_LEASE_ROLE_LEADER, fmt.Sprintf("leader (epoch %d)", l.Epoch))
	a.armLeaderTimers(r.sentMono)
	a.root.Send(a.sup, &wire.LeaseGranted{Epoch: l.Epoch, ExpiresAt: timestamppb.New(l.ExpiresAt), Owner: a.cfg.Owner})
}

// armLeaderTimers schedules the next renewal RenewEvery after the successful call sent at
// sentMono and the demotion at sentMono + TTL - Margin, both measured on the monotonic reading
// (clock.Mono): the wall time (Now) may have jumped since the call was sent, and a backward
// jump measured on it would keep a leader past its lease.
func (a *leaderActor) armLeaderTimers(sentMono time.Duration) {
	now := clock.Mono(a.cfg.Clock)
	p := a.cfg.Policy
	a.arm(tickRenew, sentMono+p.RenewEvery-now)
	a.arm(tickDemote, sentMono+p.TTL-p.Margin-now)
}

func (a *leaderActor) onRenewed(r *ioResult) {
	if a.role != messages.LeaseRole_LEASE_ROLE_LEADER || r.epoch != a.epoch {
		return
	}
	if r.err != nil {
		if errors.Is(r.err, store.ErrLeaseLost) {
			a.lose("renewal refused: " + r.err.Error())
			return
		}
		// The store failed: retry soon, until the demotion deadline.
		a.log.Warn("lease renewal failed; retrying", zap.Error(r.err))
		a.arm(tickRenew, max(a.cfg.Policy.RenewEvery/4, 10*time.Millisecond))
		return
	}
	a.lastRenewOk, a.expiresAt, a.seen = r.sentAt, r.lease.ExpiresAt, r.lease
	a.validUntil(r.sentMono + a.cfg.Policy.TTL - a.cfg.Policy.Margin)
	a.armLeaderTimers(r.sentMono)
	a.report() // the supervisor's LeaseState (Status().Lease, describe) shows the renewed expiry
	if a.cfg.Balancer != nil && !a.handingOver && a.resign == nil && a.cfg.Balancer.ShouldHandOver(a.cfg.Stream) {
		a.handingOver = true
		why := "this instance leads more than its fair share"
		a.log.Info("handing the lease over for balance", zap.Int64("epoch", a.epoch))
		a.root.Send(a.sup, &wire.HandOver{Epoch: a.epoch, Why: why})
	}
}

// lose demotes the leader: the supervisor stops the stream at once, the actor campaigns again.
func (a *leaderActor) lose(why string) {
	a.losses++
	a.log.Warn("leadership lost", zap.Int64("epoch", a.epoch), zap.String("why", why))
	a.announce(observe.LeadershipLost, a.epoch, why)
	// No handler call starts from now on, even before the supervisor hears of the loss (and a
	// test that heard of it sees the term ended).
	a.validUntil(0)
	a.root.Send(a.sup, &wire.LeaseLost{Epoch: a.epoch, Why: why})
	a.standby("lost the lease: " + why)
}

func (a *leaderActor) onFenced(m *wire.Fenced) {
	a.fenced++
	a.log.Error("write fenced by a newer epoch", zap.Int64("epoch", m.GetEpoch()), zap.String("why", m.GetWhy()))
	a.announce(observe.LeadershipFenced, m.GetEpoch(), m.GetWhy())
	if a.role == messages.LeaseRole_LEASE_ROLE_LEADER {
		a.losses++
		a.standby("fenced: " + m.GetWhy())
		return
	}
	a.report()
}

func (a *leaderActor) onResign(ctx actor.Context, m *wire.Resign) {
	if a.resign != nil {
		// Joins the release under way; the latest request decides what follows it.
		if ctx.Sender() != nil {
			a.resign.to = append(a.resign.to, ctx.Sender())
		}
		a.resign.again = m.GetCampaignAgain()
		return
	}
	pr := &pendingResign{again: m.GetCampaignAgain(), cooldown: time.Duration(m.GetCooldownMs()) * time.Millisecond,
		handover: a.handingOver, epoch: a.epoch}
	if ctx.Sender() != nil {
		pr.to = append(pr.to, ctx.Sender())
	}
	if a.role != messages.LeaseRole_LEASE_ROLE_LEADER {
		a.finishResign(pr, &wire.Resigned{Epoch: a.epoch}, m.GetReason())
		return
	}
	// Stop renewing (new generation) and release; the answer goes out with the release's result.
	a.validUntil(0)
	a.gen++
	a.stopTimers()
	a.resign = pr
	a.submit(opRelease, a.epoch)
}

func (a *leaderActor) onReleased(r *ioResult) {
	pr := a.resign
	a.resign = nil
	ans := &wire.Resigned{Epoch: pr.epoch, Released: r.err == nil}
	if r.err != nil {
		ans.Error = r.err.Error()
		a.log.Warn("lease release failed; it lapses at its expiry", zap.Error(r.err))
	} else if pr.handover {
		a.handovers++
		a.log.Info("lease handed over for balance", zap.Int64("epoch", a.epoch))
		a.announce(observe.LeadershipHandedOver, a.epoch, "")
	} else {
		a.log.Info("lease released", zap.Int64("epoch", a.epoch))
		a.announce(observe.LeadershipReleased, a.epoch, "")
	}
	a.seen = store.Lease{Name: a.cfg.Stream, Epoch: pr.epoch}
	a.finishResign(pr, ans, "released")
}

func (a *leaderActor) finishResign(pr *pendingResign, ans *wire.Resigned, why string) {
	for _, to := range pr.to {
		a.root.Send(to, ans)
	}
	if pr.again {
		a.deferUntil, a.yielded = time.Time{}, 0
		switch {
		case pr.handover:
			// A balance handover: leave the lease to the others for at least one renew period.
			a.deferUntil = a.cfg.Clock.Now().Add(max(pr.cooldown, a.cfg.Policy.RenewEvery))
		case pr.cooldown > 0:
			// An operator's release: leave the lease to the others for the cooldown (the
			// release window), unless one of them is seen to take it first.
			a.deferUntil = a.cfg.Clock.Now().Add(pr.cooldown)
		}
		if !a.deferUntil.IsZero() {
			a.yielded = pr.epoch
		}
		a.standby("handed over: " + why)
		return
	}
	if a.watchCancel != nil {
		a.watchCancel()
		a.watchCancel = nil
	}
	a.become(messages.LeaseRole_LEASE_ROLE_IDLE, "not campaigning: "+why)
}
