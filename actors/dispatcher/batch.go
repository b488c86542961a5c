package dispatcher

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
)

// Batcher is implemented by a Router whose invocations can run several at a time as one unit:
// consecutive events of one lane that commit together (a Transactional stream's TxBatch). A
// lane that finds its router to be a Batcher with MaxEvents above 1 offers it the events queued
// behind the current one, up to those bounds; events the Router does not hand an Invocation
// (unhandled, filtered, undecodable) end a batch and are processed alone.
type Batcher interface {
	// BatchLimits returns the most events, and the most bytes of raw events, of one batch. A
	// batch always takes its first event, whatever its size; maxEvents <= 1 turns batching off.
	BatchLimits() (maxEvents, maxBytes int)
	// CallBatch runs invs, in order, as one unit. On success it returns n >= 1: invs[:n]
	// completed, with their outcomes in out[:n] (n < len(invs): the unit closed early; the
	// lane offers the rest again). On error none completed: with split, the unit was too large
	// and the lane offers halves (down to one event, which then runs alone); without, the lane
	// runs each event of the batch alone, with its retries and dead letter, so that a poison
	// event is dead-lettered alone. Panics are recovered by the lane, as errors without split.
	CallBatch(ctx context.Context, invs []Invocation, out []BatchOutcome) (n int, split bool, err error)
}

// BatchOutcome is how one event of a completed batch settled.
type BatchOutcome struct {
	// Skipped: the event settles OUTCOME_SKIPPED (reported as observe.Skipped with Detail);
	// otherwise OUTCOME_HANDLED.
	Skipped bool
	Detail  string
}

// errBatchCount is the error of a CallBatch that returned no error and a count out of range.
var errBatchCount = errors.New("dispatcher: Batcher.CallBatch completed no event, or more than it was given")

// batchState is the lane's batching state across its loop's iterations.
type batchState struct {
	// limit is the current batch bound: halved by a split, doubled (up to the maximum) by a
	// success. Each failure halves it and each success settles events, so a lane never loops:
	// a run of events too large together goes down to single events, which run alone.
	limit  int
	single int // events at cur[pos] .. cur[single-1] run alone (a batch of them failed)
}

// batcher returns the router's Batcher when batching is on, with its bounds.
func (l *lane) batcher() (Batcher, int, int) {
	b, ok := l.sh.router.(Batcher)
	if !ok {
		return nil, 0, 0
	}
	maxEvents, maxBytes := b.BatchLimits()
	if maxEvents <= 1 {
		return nil, 0, 0
	}
	return b, maxEvents, maxBytes
}

// tryBatch runs the events from cur[pos] as one batch when it can. It returns the events
// settled (0: the lane processes cur[pos] alone, as without batching) and ok false when ctx
// was cancelled or the lease's validity passed first.
func (l *lane) tryBatch(ctx context.Context, b Batcher, maxEvents, maxBytes int) (settled int, ok bool) {
	for {
		n, again, ok := l.tryBatchOnce(ctx, b, maxEvents, maxBytes)
		if !again || !ok {
			return n, ok
		}
	}
}

// tryBatchOnce is one try of tryBatch; again reports a split: try the halved bound now.
func (l *lane) tryBatchOnce(ctx context.Context, b Batcher, maxEvents, maxBytes int) (settled int, again, ok bool) {
	bs := &l.batch
	if l.pos < bs.single || l.st.attempt != 0 || l.st.goexit {
		return 0, false, true
	}
	if bs.limit <= 0 || bs.limit > maxEvents {
		bs.limit = maxEvents
	}
	if bs.limit <= 1 {
		bs.limit = 2 // this event runs alone; the next batch tries two
		return 0, false, true
	}
	sh := l.sh
	current := sh.current.Load()
	var invs []Invocation
	release := func() {
		for _, inv := range invs {
			if r, ok := inv.(Releaser); ok {
				r.Release()
			}
		}
	}
	bytes := 0
	for j := l.pos; len(invs) < bs.limit; j++ {
		if j == len(l.cur) && !l.takeQueued() {
			break
		}
		it := &l.cur[j]
		if !it.snap && it.incarnation < current {
			break // superseded: the loop skips it
		}
		if len(invs) > 0 && bytes+len(it.ev.raw) > maxBytes {
			break
		}
		inv, _, err := l.route(it.ev.raw)
		if err != nil || inv == nil {
			break // processed alone, routed again there (routing is cheap and allocation-free)
		}
		invs = append(invs, inv)
		bytes += len(it.ev.raw)
	}
	if len(invs) < 2 {
		release()
		return 0, false, true
	}
	if ctx.Err() != nil {
		release()
		return 0, false, false
	}
	if sh.mayStart != nil && !sh.mayStart(clock.Mono(sh.clk)) {
		release()
		sh.log.Warn("handler call withheld: the lease's validity has passed", zap.Uint64("seq", l.cur[l.pos].ev.seq),
			zap.Int("lane", l.id))
		return 0, false, false
	}
	out := make([]BatchOutcome, len(invs))
	n, split, err := callBatch(ctx, b, invs, out)
	release()
	if ctx.Err() != nil {
		return 0, false, false
	}
	if err != nil || n < 1 || n > len(invs) {
		if err == nil {
			err = errBatchCount
		}
		sh.log.Info("batch failed; its events run again", zap.Uint64("seq", l.cur[l.pos].ev.seq), zap.Int("lane", l.id),
			zap.Int("events", len(invs)), zap.Bool("split", split), zap.Error(err))
		if split {
			bs.limit = len(invs) / 2
			return 0, true, true
		}
		bs.single = l.pos + len(invs)
		return 0, false, true
	}
	bs.limit = min(maxEvents, 2*bs.limit)
	for i := range n {
		it := &l.cur[l.pos+i]
		ev := &it.ev
		s := settlement{seq: ev.seq, incarnation: it.incarnation, token: ev.token, raw: ev.raw, invalidate: ev.invalidate,
			snap: it.snap, outcome: messages.Outcome_OUTCOME_HANDLED}
		if out[i].Skipped {
			s.outcome = messages.Outcome_OUTCOME_SKIPPED
			id, detail := eventID(ev.token, ev.raw), out[i].Detail
			sh.log.Info("event skipped", zap.Uint64("seq", ev.seq), zap.String("id", id), zap.Int("lane", l.id),
				zap.String("reason", detail))
			sh.report(func(m observe.Meta) observe.Event {
				return observe.Skipped{Meta: m, EventID: id, Reason: observe.SkipByHandler, Detail: detail}
			})
		}
		sh.settle.publish(s)
	}
	return n, false, true
}

// takeQueued moves the events pushed since the lane took its current slice to the end of it,
// so that a batch may take them too. It reports whether there were any.
func (l *lane) takeQueued() bool {
	l.mu.Lock()
	more := l.q
	l.q = nil
	l.mu.Unlock()
	if len(more) == 0 {
		return false
	}
	l.cur = append(l.cur, more...)
	return true
}

// callBatch runs one batch, recovering a panic into a *panicError (no split).
func callBatch(ctx context.Context, b Batcher, invs []Invocation, out []BatchOutcome) (n int, split bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			n, split, err = 0, false, newPanicError(r)
		}
	}()
	return b.CallBatch(ctx, invs, out)
}
