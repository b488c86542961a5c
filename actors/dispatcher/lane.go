package dispatcher

import (
	"context"
	"errors"
	"github.com/watchtree/watchtree/internal/policyx"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/treekit"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/policy"
	"github.com/watchtree/watchtree/store"
)

// event is one accepted event: a change event of an EventBatch, or a snapshot event.
type event struct {
	seq uint64
	raw []byte // the event document
	// token is the resume token: a snapshot or window event's own, or nil for a change event,
	// whose _id is read only when needed: on a failure (logs, dead letter) and, by the actor,
	// for the last settlement of each run it sends (one per run, not one per event).
	token      []byte
	invalidate bool // an invalidate event: its token is a startAfter position only
}

// snapshotEvent is the event of a snapshot (or window) row.
func snapshotEvent(ev *wire.Event) event {
	return event{seq: ev.GetSeq(), raw: ev.GetRaw(), token: ev.GetResumeToken(), invalidate: ev.GetInvalidate()}
}

// item is one accepted event queued on a lane.
type item struct {
	ev          event
	incarnation uint64 // of a stream batch; the run of a snapshot batch
	snap        bool   // a snapshot event: settled back to the snapshot source, never to the checkpointer
}

// attemptState is how far the lane's current event got: the attempt in progress (0 before the
// first), whether that attempt ended its goroutine with runtime.Goexit, and when the first
// attempt failed. It lives in the lane, not in every queued item, and passes to the successor
// goroutine with the event.
type attemptState struct {
	attempt int
	goexit  bool
	first   time.Time
}

// ErrHandlerGoexit is the error of an attempt whose handler (or Filter) called runtime.Goexit,
// as testing's t.FailNow does. It cannot be recovered like a panic; the lane goes on in a new
// goroutine and the attempt counts as failed (retryable).
var ErrHandlerGoexit = errors.New("dispatcher: the handler called runtime.Goexit")

// laneShared is what the lanes of one dispatcher instance share. Read-only once the lanes run,
// but for current.
type laneShared struct {
	// current is the incarnation of the latest Subscribe, which the actor stores. A lane skips a
	// queued change event of an older incarnation (see superseded).
	current atomic.Uint64

	stream    string
	instance  string
	router    Router
	retry     policy.Retry
	rnd       func() float64
	clk       clock.Clock
	log       *zap.Logger
	obs       observe.Observer
	dl        DeadLetterWriter
	dlTimeout time.Duration
	retention time.Duration
	settle    *settleBuf
	mayStart  func(mono time.Duration) bool // Config.MayStart; nil allows
	// ctx ends the lanes (cancelled by the actor); wg counts the lane goroutines running.
	ctx context.Context
	wg  *sync.WaitGroup
}

// laneLinger is how long a lane's goroutine waits for more events once its queue is empty
// before it ends. A busy lane keeps its goroutine (starting one per batch costs more than
// waking a parked one); a lane idle for longer holds none.
const laneLinger = time.Second

// lane processes its queue strictly in order, on a goroutine that exists only while the lane
// is busy: the actor appends to q under mu, then wakes the goroutine, or starts one when none
// runs; the goroutine swaps q with spare, works through it without the lock, and ends once q
// has stayed empty for laneLinger. An idle lane therefore holds no goroutine (an idle stream
// costs no stack for it).
type lane struct {
	id      int
	sh      *laneShared
	mu      sync.Mutex
	q       []item
	sp      []item // spare queue, owned by whoever holds it: the lane between swaps
	running bool   // a goroutine owns the lane; set by push, cleared by the goroutine as it ends
	wake    chan struct{}
	idle    *time.Timer // the linger timer, owned by the lane's goroutine

	// cur[pos] is the event being processed. They belong to the lane's goroutine and pass to its
	// successor when a handler ends that goroutine with runtime.Goexit.
	cur []item
	pos int
	st  attemptState // of cur[pos]
	// batch is the batching state (batch.go), used when the router is a Batcher.
	batch batchState
}

func newLane(id int, sh *laneShared) *lane {
	return &lane{id: id, sh: sh, wake: make(chan struct{}, 1)}
}

// push appends items to the lane's queue and starts the lane's goroutine if none runs (actor
// goroutine). Once the lanes are cancelled nothing starts: the items stay unsettled, as those
// a cancelled goroutine leaves behind.
func (l *lane) push(items []item) {
	l.mu.Lock()
	l.q = append(l.q, items...)
	running := l.running
	start := !running && l.sh.ctx.Err() == nil
	l.running = running || start
	l.mu.Unlock()
	switch {
	case start:
		l.sh.wg.Add(1)
		treekit.Go(l.run) // a goroutine that ran a lane before keeps its grown stack
	case running:
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// linger waits up to laneLinger for a push. It reports false when none came or ctx ended.
func (l *lane) linger(ctx context.Context) bool {
	if l.idle == nil {
		l.idle = time.NewTimer(laneLinger)
	} else {
		l.idle.Reset(laneLinger)
	}
	select {
	case <-l.wake:
		l.idle.Stop()
		return true
	case <-l.idle.C:
		return false
	case <-ctx.Done():
		l.idle.Stop()
		return false
	}
}

// run processes the queue until it has stayed empty for laneLinger or ctx is cancelled. An event interrupted by the
// cancellation stays unsettled (it is redelivered after the next start).
//
// A handler that calls runtime.Goexit ends this goroutine (deferred calls run, nothing can stop
// it). The deferred hand-over then marks the attempt failed with ErrHandlerGoexit and continues the
// lane, from that same event, in a new goroutine that takes over its count in sh.wg: the lane
// never stalls.
func (l *lane) run() {
	ctx := l.sh.ctx
	returned := false
	defer func() {
		if returned {
			l.sh.wg.Done()
			return
		}
		it := &l.cur[l.pos]
		l.st.goexit = true
		l.sh.log.Error("handler called runtime.Goexit; the lane goes on in a new goroutine",
			zap.Uint64("seq", it.ev.seq), zap.Int("lane", l.id), zap.Int("attempt", l.st.attempt))
		go l.run()
	}()
	for {
		if l.cur == nil {
			l.mu.Lock()
			batch := l.q
			if len(batch) == 0 {
				l.mu.Unlock()
				l.sh.settle.laneIdle()
				if l.linger(ctx) {
					continue
				}
				l.mu.Lock()
				if len(l.q) == 0 || ctx.Err() != nil {
					l.running = false // the next push starts a new goroutine
					if len(l.q) == 0 {
						// An idle lane keeps no queue sized to the last burst, nor a timer.
						l.q, l.sp, l.idle = nil, nil, nil
					}
					l.mu.Unlock()
					returned = true
					return
				}
				l.mu.Unlock()
				continue // a push came as the wait ended
			}
			l.q = l.sp[:0]
			l.sp = nil
			l.mu.Unlock()
			l.cur, l.pos = batch, 0
		}
		for ; l.pos < len(l.cur); l.pos++ {
			if l.superseded(&l.cur[l.pos]) {
				it := &l.cur[l.pos]
				l.sh.settle.publish(settlement{seq: it.ev.seq, incarnation: it.incarnation, superseded: true})
				continue
			}
			if b, maxEvents, maxBytes := l.batcher(); b != nil {
				n, ok := l.tryBatch(ctx, b, maxEvents, maxBytes)
				if !ok {
					returned = true
					return
				}
				if n > 0 {
					l.pos += n - 1
					continue
				}
			}
			s, ok := l.process(ctx, &l.cur[l.pos])
			if !ok {
				returned = true
				return
			}
			l.st = attemptState{}
			l.sh.settle.publish(s)
		}
		batch := l.cur
		l.cur, l.pos, l.batch.single = nil, 0, 0
		clear(batch) // drop the event references for the GC
		l.mu.Lock()
		l.sp = batch[:0]
		l.mu.Unlock()
	}
}

// superseded reports whether it is a change event of an incarnation older than the current
// one whose processing has not begun. A new incarnation's cursor resumes from the newest
// settled position, so it reads such an event again, and the checkpointer drops an older
// incarnation's settlements: handling it would be a certain duplicate and, worse, would run
// before the new cursor's earlier events of the same key (a handler would see seqs 4, 5
// handled, then 5, 4, 5). An event whose first attempt began runs to its end: a call cannot be
// taken back, and its retries and dead letter keep their order on the lane.
func (l *lane) superseded(it *item) bool {
	return !it.snap && l.st.attempt == 0 && !l.st.goexit && it.incarnation < l.sh.current.Load()
}

// process runs one event to its settlement. ok is false when ctx was cancelled first.
func (l *lane) process(ctx context.Context, it *item) (s settlement, ok bool) {
	ev := &it.ev
	// A change event's token is read from raw only when it is needed: by a failure's logs and
	// dead letter here, or by the actor for a run's last settlement.
	s = settlement{seq: ev.seq, incarnation: it.incarnation, token: ev.token, raw: ev.raw, invalidate: ev.invalidate, snap: it.snap}
	sh := l.sh
	var (
		inv Invocation
		f   failure
	)
	defer func() { // after the last attempt, whatever ended it (Goexit included)
		if r, ok := inv.(Releaser); ok {
			r.Release()
		}
	}()
	st := &l.st
	f.first = st.first
	for attempt := max(st.attempt, 1); ; attempt++ {
		if ctx.Err() != nil {
			// The lanes were cancelled (a stop, a restart, a lost lease): nothing starts on a
			// cancelled context, even after a handler that ignored it returned.
			return s, false
		}
		if sh.mayStart != nil && !sh.mayStart(clock.Mono(sh.clk)) {
			// The lease may be gone (its validity passed before the leader actor could say so):
			// withhold the call; the lost lease restarts the dispatcher.
			sh.log.Warn("handler call withheld: the lease's validity has passed", zap.Uint64("seq", ev.seq),
				zap.Int("lane", l.id))
			return s, false
		}
		var err error
		routeErr := false
		if st.goexit {
			// The previous goroutine died in this attempt's handler: it failed, retryably.
			st.goexit = false
			err = ErrHandlerGoexit
		} else if inv == nil {
			var outcome messages.Outcome
			inv, outcome, err = l.route(ev.raw)
			switch {
			case err != nil:
				var pe *panicError
				routeErr = !errors.As(err, &pe) // a decode error, not a panic of the Filter
			case inv == nil && (outcome == messages.Outcome_OUTCOME_UNHANDLED || outcome == messages.Outcome_OUTCOME_FILTERED):
				s.outcome = outcome
				return s, true
			case inv == nil:
				err, routeErr = errors.New("dispatcher: Router.Route returned no invocation, no error and outcome "+outcome.String()), true
			}
		}
		st.attempt = attempt
		if err == nil {
			if err = callHandler(ctx, inv, attempt); err == nil {
				s.outcome = messages.Outcome_OUTCOME_HANDLED
				return s, true
			}
		}
		if ctx.Err() != nil {
			return s, false
		}
		if ev.token == nil && !it.snap {
			ev.token = tokenOf(ev.raw)
			s.token = ev.token
		}
		now := sh.clk.Now()
		if f.first.IsZero() {
			f.first, st.first = now, now
		}
		f.last, f.err, f.attempts = now, err, attempt
		if routeErr {
			// The event did not decode, so this attempt made no handler call.
			f.attempts = attempt - 1
		}
		var pe *panicError
		if errors.As(err, &pe) {
			l.panicked(ev, attempt, pe)
		}
		class, detail := Permanent, ""
		if !routeErr {
			class, detail = sh.router.Classify(err)
		}
		switch {
		case class == Skipped:
			id := eventID(ev.token, ev.raw)
			sh.log.Info("event skipped by its handler", zap.Uint64("seq", ev.seq), zap.String("id", id),
				zap.Int("lane", l.id), zap.String("reason", err.Error()))
			sh.report(func(m observe.Meta) observe.Event {
				return observe.Skipped{Meta: m, EventID: id, Reason: observe.SkipByHandler, Detail: detail}
			})
			s.outcome = messages.Outcome_OUTCOME_SKIPPED
			return s, true
		case class == Retryable && attempt < sh.retry.MaxAttempts:
			delay := policyx.Delay(sh.retry, attempt, sh.rnd)
			id := eventID(ev.token, ev.raw)
			sh.log.Info("handler failed; retrying", zap.Uint64("seq", ev.seq), zap.String("id", id),
				zap.Int("lane", l.id), zap.Int("attempt", attempt), zap.Duration("delay", delay), zap.Error(err))
			sh.report(func(m observe.Meta) observe.Event {
				return observe.RetryScheduled{Meta: m, EventID: id, Attempt: attempt, Delay: delay, Err: err}
			})
			if !l.sleep(ctx, delay) {
				return s, false
			}
			continue
		}
		f.permanent = class == Permanent
		f.decode = routeErr
		return l.deadLetter(ctx, s, ev, f)
	}
}

// route calls Router.Route, recovering a panic (of the Filter) into a *panicError.
func (l *lane) route(raw []byte) (inv Invocation, outcome messages.Outcome, err error) {
	defer func() {
		if r := recover(); r != nil {
			inv, outcome, err = nil, messages.Outcome_OUTCOME_UNSPECIFIED, newPanicError(r)
		}
	}()
	return l.sh.router.Route(bson.Raw(raw))
}

// callHandler runs one attempt, recovering a panic into a *panicError.
func callHandler(ctx context.Context, inv Invocation, attempt int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = newPanicError(r)
		}
	}()
	return inv.Call(ctx, attempt)
}

func (l *lane) panicked(ev *event, attempt int, pe *panicError) {
	sh := l.sh
	id := eventID(ev.token, ev.raw)
	sh.log.Error("handler panicked", zap.Uint64("seq", ev.seq), zap.String("id", id), zap.Int("lane", l.id),
		zap.Int("attempt", attempt), zap.Any("panic", pe.Value), zap.ByteString("stack", pe.Stack))
}

// deadLetter writes the event's dead letter, retrying the write until it succeeds or ctx ends.
// The event settles only after a successful write; with dead letters disabled it is dropped.
func (l *lane) deadLetter(ctx context.Context, s settlement, ev *event, f failure) (settlement, bool) {
	sh := l.sh
	id := eventID(ev.token, ev.raw)
	fields := []zap.Field{zap.Uint64("seq", ev.seq), zap.String("id", id), zap.Int("lane", l.id),
		zap.Int("attempts", f.attempts), zap.Bool("permanent", f.permanent), zap.Error(f.err)}
	s.outcome = messages.Outcome_OUTCOME_DEAD_LETTERED
	if sh.dl == nil {
		sh.log.Error("event dropped: its attempts ran out and dead letters are disabled", fields...)
		sh.report(func(m observe.Meta) observe.Event {
			return observe.DeadLettered{Meta: m, EventID: id, OperationType: rawOperationType(ev.raw),
				Attempts: f.attempts, Err: f.err, Dropped: true}
		})
		s.dropped = true
		return s, true
	}
	for write := 1; ; write++ {
		dl := newDeadLetter(store.Scope{Stream: sh.stream, Instance: sh.instance}, id, ev.token, ev.raw, f, sh.clk.Now(), sh.retention)
		err := treekit.Bounded(ctx, sh.dlTimeout, func(ctx context.Context) error { return putDeadLetter(ctx, sh.dl, dl) })
		if err == nil {
			sh.log.Warn("event dead-lettered", fields...)
			sh.report(func(m observe.Meta) observe.Event {
				return observe.DeadLettered{Meta: m, EventID: id, OperationType: dl.OperationType,
					Attempts: f.attempts, Err: f.err}
			})
			return s, true
		}
		if ctx.Err() != nil {
			return s, false
		}
		delay := policyx.Delay(sh.retry, write, sh.rnd)
		sh.log.Error("dead-letter write failed; the event stays unsettled and the write is retried",
			append(fields[:len(fields):len(fields)], zap.Int("write", write), zap.Duration("delay", delay),
				zap.NamedError("writeError", err))...)
		sh.report(func(m observe.Meta) observe.Event {
			return observe.DeadLetterFailed{Meta: m, EventID: id, Err: err}
		})
		if !l.sleep(ctx, delay) {
			return s, false
		}
	}
}

// sleep waits d on the injected clock, first asking the actor to send what settled so far, so
// that a blocked lane holds nothing back. It reports false when ctx ended first.
func (l *lane) sleep(ctx context.Context, d time.Duration) bool {
	l.sh.settle.flushUrgently()
	return treekit.Sleep(ctx, l.sh.clk, d)
}
