package dispatcher

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
)

// settlement is one finished event, as a lane hands it back to the actor.
type settlement struct {
	seq         uint64
	incarnation uint64 // of the EventBatch the event came in
	// token is the resume token when the event came with one (snapshot and window events) or a
	// failure read it; otherwise it is read from raw's _id by lastToken, for the one settlement
	// per run whose token is sent.
	token      []byte
	raw        []byte
	outcome    messages.Outcome
	dropped    bool // dead letters disabled: settled without a record
	invalidate bool // an invalidate event: its token is a startAfter position only
	snap       bool // a snapshot event (incarnation is its run)
	// superseded: a change event of an older incarnation, skipped unhandled (lane.superseded).
	// It only frees its place in the dispatcher: it is neither counted nor sent on.
	superseded bool
}

// settleBuf is where the lanes leave settlements for the actor. Lanes append under mu, one
// settlement at a time as soon as it settles, and wake the actor with a LanesSettled message
// when the buffer holds wakeAt settlements (a batch's worth), when a lane has nothing left to
// process, or before a lane blocks (flushUrgently). While events are in the lanes, the actor
// also takes the buffer on its flush tick (SettleFlushInterval), so a settlement waits at most
// that long even when the next handler of its lane blocks. poked is true from the first wake
// after a take until the next take, so at most one LanesSettled is outstanding. The hot path
// costs a lock and an append per event; a catch-up wakes the actor about once per batch, not
// each time a lane finds it asleep.
type settleBuf struct {
	mu     sync.Mutex
	buf    []settlement
	wakeAt int // buffer length at which a publish wakes the actor; < 1 means every publish
	poked  atomic.Bool
	urgent atomic.Bool // a lane is about to block: send everything now, do not wait for the timer
	notify func()      // sends LanesSettled to the actor
}

// publish hands one settlement over to the actor.
func (s *settleBuf) publish(st settlement) {
	s.mu.Lock()
	s.buf = append(s.buf, st)
	full := len(s.buf) >= s.wakeAt
	s.mu.Unlock()
	if full {
		s.poke()
	}
}

// laneIdle wakes the actor for what the lanes settled: a lane's queue ran empty, so nothing
// more from it follows soon.
func (s *settleBuf) laneIdle() {
	s.mu.Lock()
	held := len(s.buf) > 0
	s.mu.Unlock()
	if held {
		s.poke()
	}
}

// holds reports whether a publish may leave its settlement in the buffer without waking the
// actor (wakeAt > 1), so that the actor has to take the buffer on its flush tick.
func (s *settleBuf) holds() bool { return s.wakeAt > 1 }

// poke sends LanesSettled unless one is outstanding.
func (s *settleBuf) poke() {
	if !s.poked.Load() && !s.poked.Swap(true) {
		s.notify()
	}
}

// flushUrgently asks the actor to send every pending settlement to the checkpointer at once: a
// lane is about to block (retry delay, dead-letter write retry), so what settled must not wait
// for the flush interval.
func (s *settleBuf) flushUrgently() {
	s.urgent.Store(true)
	s.poke()
}

// take returns everything published so far, swapping in spare (emptied) as the new buffer. The
// caller gives the returned slice back as spare on its next take. // urgent reports whether a lane asked for an immediate flush since the last take.
func (s *settleBuf) take(spare []settlement) (out []settlement, urgent bool) {
	// Clear the flags first: a publish racing with this take either lands in the swapped-out
	// buffer (taken now) or pokes again (taken by the next take). No wake-up is lost.
	s.poked.Store(false)
	urgent = s.urgent.Swap(false)
	s.mu.Lock()
	out = s.buf
	s.buf = spare[:0]
	s.mu.Unlock()
	return out, urgent
}

// lastToken is the settlement's resume token: its own, or the _id of its event.
func (s *settlement) lastToken() []byte {
	if s.token != nil || s.snap {
		return s.token
	}
	return tokenOf(s.raw)
}

// settledRuns encodes ss as runs of consecutive seqs with one outcome, in seq order. A run ends
// at an invalidate, a gap, an outcome change or a repeated seq; it carries its last event's
// token only. The runs share one allocation. Lanes settle out of order, so the seqs are sorted
// first, as (seq, index) pairs in *scratch (reused by the caller; no pointers to move).
func settledRuns(ss []settlement, scratch *[]seqIndex) []*wire.SettledRun {
	*scratch = sortBySeq(ss, (*scratch)[:0])
	order := *scratch
	n := 0
	for k := range order {
		if k == 0 || !continues(&ss[order[k-1].i], &ss[order[k].i]) {
			n++
		}
	}
	slab := make([]wire.SettledRun, n)
	runs := make([]*wire.SettledRun, n)
	r := -1
	for k, o := range order {
		s := &ss[o.i]
		if k > 0 && continues(&ss[order[k-1].i], s) {
			slab[r].Count++
		} else {
			if r >= 0 { // the previous run ended at the previous settlement
				slab[r].LastToken = ss[order[k-1].i].lastToken()
			}
			r++
			slab[r].FirstSeq, slab[r].Count, slab[r].Outcome = s.seq, 1, s.outcome
			runs[r] = &slab[r]
		}
		slab[r].Invalidate = s.invalidate
	}
	if r >= 0 {
		slab[r].LastToken = ss[order[len(order)-1].i].lastToken()
	}
	return runs
}

// sortBySeq appends the (seq, index) pairs of ss to order, sorted by seq. The seqs of a batch
// are nearly consecutive (the lanes hold at most the dispatcher's capacity), so when they span
// at most 4 × len(ss) they are placed by their offset from the lowest one, in linear time; a
// repeated seq, or a wider span, falls back to a sort.
func sortBySeq(ss []settlement, order []seqIndex) []seqIndex {
	if len(ss) == 0 {
		return order
	}
	lo, hi, sorted := ss[0].seq, ss[0].seq, true
	for i := 1; i < len(ss); i++ {
		sorted = sorted && ss[i-1].seq < ss[i].seq
		lo, hi = min(lo, ss[i].seq), max(hi, ss[i].seq)
	}
	if sorted {
		for i := range ss {
			order = append(order, seqIndex{seq: ss[i].seq, i: int32(i)})
		}
		return order
	}
	if span := hi - lo + 1; span <= 4*uint64(len(ss)) {
		// The slots are seqIndex values too: slot k holds seq lo+k (i = -1 while empty).
		slots := slices.Grow(order, int(span))[:span]
		for k := range slots {
			slots[k].i = -1
		}
		dup := false
		for i := range ss {
			k := ss[i].seq - lo
			if slots[k].i >= 0 {
				dup = true
				break
			}
			slots[k] = seqIndex{seq: ss[i].seq, i: int32(i)}
		}
		if !dup {
			n := 0
			for _, sl := range slots {
				if sl.i >= 0 {
					slots[n] = sl
					n++
				}
			}
			return slots[:n]
		}
		order = slots[:0]
	}
	for i := range ss {
		order = append(order, seqIndex{seq: ss[i].seq, i: int32(i)})
	}
	slices.SortFunc(order, func(a, b seqIndex) int { return cmp.Compare(a.seq, b.seq) })
	return order
}

// seqIndex is a settlement's seq and its index in the batch being encoded.
type seqIndex struct {
	seq uint64
	i   int32
}

// continues reports whether s extends the run that prev ends.
func continues(prev, s *settlement) bool {
	return s.seq == prev.seq+1 && s.outcome == prev.outcome && !prev.invalidate
}
