package checkpointer

import (
	"bytes"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/store"
)

// sourceInvalidate is the Checkpoint.Source of a position after an invalidate event: its token
// is the invalidate's, and the stream reopens with startAfter (never resumeAfter, which the
// server refuses for an invalidate token).
const sourceInvalidate = "invalidate"

// position is a place to (re)open the change stream.
type position struct {
	// token is the resume token (BSON document); nil when only opTime is known.
	token bson.Raw
	// startAfter: token is an invalidate's; reopen with startAfter.
	startAfter bool
	// opTime is the start operation time when token is nil (At, Rebuild), else the cluster time
	// of the position when known.
	opTime bson.Timestamp
	// source is a store.Source* value or sourceInvalidate.
	source string
	// seq is the seq the position was taken at (0 for start positions).
	seq uint64
}

func (p position) empty() bool { return p.token == nil && p.opTime.IsZero() }

func positionOf(cp store.Checkpoint) position {
	return position{token: cp.Token, startAfter: cp.Source == sourceInvalidate && cp.Token != nil,
		opTime: cp.ClusterTime, source: cp.Source}
}

// slot is one seq of the window above the low-water mark.
type slot struct {
	settled    bool
	invalidate bool
	token      []byte
}

// progressEntry is a PBRT waiting for the low-water mark to reach its through seq.
type progressEntry struct {
	through uint64
	pbrt    []byte
}

// tracker computes the low-water mark and the resume position. It is owned by the actor
// goroutine.
//
// The low-water mark (lwm) is the highest seq such that it and every lower seq have settled. The
// position is the token of the lwm event, or the PBRT of a Progress once lwm >= its through seq,
// whichever is newer: a PBRT with through == lwm is newer than the lwm event's token (the server
// certifies nothing matched between them), an event with seq > through is newer than the PBRT.
// So the position never passes an unsettled event. An invalidate event's token becomes a
// startAfter position, and a PBRT with the invalidate's seq as through is ignored.
//
// Settlements are kept in a ring indexed by seq, sized to the widest window seen (seqs between
// lwm and the highest seq announced by Progress, i.e. at most the events the dispatcher holds).
// The ring is allocated with the first settlement, so a stream that never had an event holds
// none.
type tracker struct {
	lwm    uint64
	maxSeq uint64 // highest through seq announced by Progress
	slots  []slot // empty, or len is a power of two; seq s lives at s & (len-1)
	queue  []progressEntry

	pos     position
	version uint64 // incremented whenever pos changes
}

// minSlots is the ring's first size.
const minSlots = 64

func newTracker() *tracker { return &tracker{} }

// setPosition replaces the position (a resolved start position).
func (t *tracker) setPosition(p position) {
	t.pos = p
	t.version++
}

// rebase forgets every seq announced so far: a new cursor re-reads their events from the
// current position, with seqs from maxSeq+1.
func (t *tracker) rebase() {
	t.lwm = t.maxSeq
	// The position precedes every seq of the new cursor (which starts from it), so a PBRT of
	// the new cursor with through == lwm may replace it, even a startAfter one.
	t.pos.seq = 0
	clear(t.slots)
	t.queue = t.queue[:0]
}

// compact drops the settlement ring when no seq is in flight (every announced seq settled): a
// stream that went idle after a burst keeps no ring sized to it (4,096 slots, 128 KiB, at the
// dispatcher's default capacity). The next settlement allocates a small one again.
func (t *tracker) compact() {
	if t.lwm == t.maxSeq {
		t.slots = nil
	}
}

// nextSeq is the seq of the next event a new cursor reads.
func (t *tracker) nextSeq() uint64 { return t.maxSeq + 1 }

// progress records a Progress. It returns false for a protocol violation (through below an
// earlier through).
func (t *tracker) progress(through uint64, pbrt []byte) bool {
	if through < t.maxSeq {
		return false
	}
	t.maxSeq = through
	if len(pbrt) == 0 {
		return true
	}
	if through <= t.lwm {
		t.applyPBRT(through, pbrt)
		return true
	}
	if n := len(t.queue); n > 0 && t.queue[n-1].through == through {
		t.queue[n-1].pbrt = pbrt // a newer PBRT for the same boundary
		return true
	}
	t.queue = append(t.queue, progressEntry{through: through, pbrt: pbrt})
	return true
}

// settleResult classifies a settlement.
type settleResult uint8

const (
	settledOK settleResult = iota
	settledDuplicate
	settledUnknown // seq above every announced through: a protocol violation
)

// settle records one settlement; call advance after a batch of them.
func (t *tracker) settle(seq uint64, token []byte, invalidate bool) settleResult {
	if seq <= t.lwm {
		return settledDuplicate
	}
	if seq > t.maxSeq {
		return settledUnknown
	}
	if d := seq - t.lwm; d > uint64(len(t.slots)) || len(t.slots) == 0 {
		t.grow(d)
	}
	s := &t.slots[seq&uint64(len(t.slots)-1)]
	if s.settled {
		return settledDuplicate
	}
	*s = slot{settled: true, invalidate: invalidate, token: token}
	return settledOK
}

func (t *tracker) grow(need uint64) {
	n := uint64(max(len(t.slots), minSlots))
	for n < need {
		n *= 2
	}
	slots := make([]slot, n)
	old := uint64(len(t.slots))
	for seq := t.lwm + 1; seq <= t.lwm+old; seq++ {
		slots[seq&(n-1)] = t.slots[seq&(old-1)]
	}
	t.slots = slots
}

// advance moves the low-water mark over the settled seqs and updates the position. It reports
// whether the lwm moved.
func (t *tracker) advance() bool {
	if len(t.slots) == 0 {
		return false // nothing ever settled
	}
	mask := uint64(len(t.slots) - 1)
	moved := false
	var last slot
	for {
		s := &t.slots[(t.lwm+1)&mask]
		if !s.settled {
			break
		}
		last = *s
		*s = slot{}
		t.lwm++
		moved = true
	}
	if !moved {
		return false
	}
	if len(last.token) > 0 {
		// The lwm event's token is newer than the position, whatever it was.
		src := store.SourceEvent
		if last.invalidate {
			src = sourceInvalidate
		}
		// A copy: the settlement's token may share a whole server reply's memory, which a
		// position kept for long (an idle stream's) must not pin.
		t.pos = position{token: bytes.Clone(last.token), startAfter: last.invalidate, source: src, seq: t.lwm}
		t.version++
	}
	i := 0
	for ; i < len(t.queue) && t.queue[i].through <= t.lwm; i++ {
		if t.queue[i].through == t.lwm {
			t.applyPBRT(t.lwm, t.queue[i].pbrt)
		}
	}
	if i > 0 {
		n := copy(t.queue, t.queue[i:])
		clear(t.queue[n:])
		t.queue = t.queue[:n]
	}
	return true
}

// applyPBRT makes pbrt the position when it is at least as new as the position: through == lwm
// (every event up to through settled), and the lwm event is not an invalidate.
func (t *tracker) applyPBRT(through uint64, pbrt []byte) {
	if through < t.lwm || t.pos.seq > through {
		return
	}
	if t.pos.startAfter && t.pos.seq == through {
		return
	}
	if !t.pos.startAfter && bytes.Equal(t.pos.token, pbrt) {
		return
	}
	t.pos = position{token: pbrt, source: store.SourcePBRT, seq: through}
	t.version++
}
