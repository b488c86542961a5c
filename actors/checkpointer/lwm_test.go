package checkpointer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/store"
)

func pbrtTok(through uint64) bson.Raw { return tok(fmt.Sprintf("pbrt-%06d", through)) }

// covered returns the seq a position token covers: n for an event token evN, T for pbrt-T.
func covered(t *testing.T, r bson.Raw) uint64 {
	t.Helper()
	d := tokData(r)
	var s string
	switch {
	case strings.HasPrefix(d, "ev"):
		s = d[2:]
	case strings.HasPrefix(d, "pbrt-"):
		s = d[5:]
	default:
		t.Fatalf("unexpected token %q", d)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestTrackerInOrder(t *testing.T) {
	tr := newTracker()
	tr.progress(3, pbrtTok(3))
	for s := uint64(1); s <= 2; s++ {
		tr.settle(s, evTok(s), false)
	}
	tr.advance()
	if tr.lwm != 2 || tokData(tr.pos.token) != tokData(evTok(2)) || tr.pos.source != store.SourceEvent {
		t.Fatalf("lwm %d pos %q", tr.lwm, tokData(tr.pos.token))
	}
	tr.settle(3, evTok(3), false)
	tr.advance()
	if tr.lwm != 3 || tokData(tr.pos.token) != "pbrt-000003" || tr.pos.source != store.SourcePBRT {
		t.Fatalf("PBRT not the position once lwm reached through: lwm %d pos %q", tr.lwm, tokData(tr.pos.token))
	}
}

func TestTrackerPBRTOnlyAfterThroughSeq(t *testing.T) {
	tr := newTracker()
	tr.progress(4, pbrtTok(4))
	tr.settle(4, evTok(4), false)
	tr.settle(2, evTok(2), false)
	tr.settle(3, evTok(3), false)
	tr.advance()
	if tr.lwm != 0 || tr.pos.token != nil {
		t.Fatalf("position moved with seq 1 unsettled: lwm %d pos %q", tr.lwm, tokData(tr.pos.token))
	}
	tr.settle(1, evTok(1), false)
	tr.advance()
	if tr.lwm != 4 || tokData(tr.pos.token) != "pbrt-000004" {
		t.Fatalf("lwm %d pos %q", tr.lwm, tokData(tr.pos.token))
	}
	// Idle: an empty batch's PBRT moves the position at once; the same PBRT again does not.
	v := tr.version
	tr.progress(4, pbrtTok(5))
	if tokData(tr.pos.token) != "pbrt-000005" || tr.version != v+1 {
		t.Fatalf("idle PBRT not applied: %q", tokData(tr.pos.token))
	}
	tr.progress(4, pbrtTok(5))
	if tr.version != v+1 {
		t.Fatal("an unchanged PBRT changed the version")
	}
	// A PBRT behind a later batch waits for it.
	tr.progress(6, pbrtTok(6))
	tr.settle(5, evTok(5), false)
	tr.advance()
	if tokData(tr.pos.token) != tokData(evTok(5)) {
		t.Fatalf("pos %q, want ev5", tokData(tr.pos.token))
	}
}

func TestTrackerInvalidateIsStartAfter(t *testing.T) {
	tr := newTracker()
	tr.progress(2, tok("inv"))
	tr.settle(1, evTok(1), false)
	tr.settle(2, tok("inv"), true)
	tr.advance()
	if !tr.pos.startAfter || tokData(tr.pos.token) != "inv" || tr.pos.source != SourceInvalidate {
		t.Fatalf("pos %+v, want startAfter inv", tr.pos)
	}
	// The PBRT of the invalidate's batch is not a resumeAfter position.
	tr.progress(2, tok("after-inv"))
	if !tr.pos.startAfter || tokData(tr.pos.token) != "inv" {
		t.Fatalf("PBRT replaced the invalidate position: %+v", tr.pos)
	}
	// After the rebase (the new cursor started after the invalidate) its PBRT may.
	tr.rebase()
	tr.progress(2, tok("new-stream"))
	if tr.pos.startAfter || tokData(tr.pos.token) != "new-stream" {
		t.Fatalf("pos %+v, want the new cursor's PBRT", tr.pos)
	}
}

func TestTrackerProtocolViolations(t *testing.T) {
	tr := newTracker()
	tr.progress(5, nil)
	if tr.progress(4, nil) {
		t.Fatal("decreasing through accepted")
	}
	if r := tr.settle(6, evTok(6), false); r != settledUnknown {
		t.Fatalf("unannounced seq: %v", r)
	}
	if r := tr.settle(1, evTok(1), false); r != settledOK {
		t.Fatalf("settle 1: %v", r)
	}
	if r := tr.settle(1, evTok(1), false); r != settledDuplicate {
		t.Fatalf("duplicate: %v", r)
	}
	tr.advance()
	if r := tr.settle(1, evTok(1), false); r != settledDuplicate {
		t.Fatalf("below lwm: %v", r)
	}
}

// TestTrackerRandomOrdersNeverPassUnsettled settles random batch layouts in random orders (as
// lanes do) and checks after every step that the position covers only settled seqs, never moves
// back, and ends at the last boundary.
func TestTrackerRandomOrdersNeverPassUnsettled(t *testing.T) {
	for iter := 0; iter < 500; iter++ {
		rng := rand.New(rand.NewPCG(uint64(iter), 7))
		tr := newTracker()
		settled := map[uint64]bool{}
		var announced uint64
		var pending []uint64 // announced, not yet settled
		lastCovered := uint64(0)
		total := uint64(1 + rng.IntN(400))
		for announced < total || len(pending) > 0 {
			if announced < total && (len(pending) == 0 || rng.IntN(3) == 0) {
				n := uint64(rng.IntN(20)) // 0 = empty batch
				n = min(n, total-announced)
				for i := uint64(1); i <= n; i++ {
					pending = append(pending, announced+i)
				}
				announced += n
				tr.progress(announced, pbrtTok(announced))
			} else {
				k := rng.IntN(min(len(pending), 1+rng.IntN(64))) // lanes: not too far from the oldest
				s := pending[k]
				pending = append(pending[:k], pending[k+1:]...)
				if tr.settle(s, evTok(s), false) != settledOK {
					t.Fatalf("iter %d: settle %d rejected", iter, s)
				}
				settled[s] = true
				tr.advance()
			}
			var lwm uint64
			for settled[lwm+1] {
				lwm++
			}
			if tr.lwm != lwm {
				t.Fatalf("iter %d: lwm %d, want %d", iter, tr.lwm, lwm)
			}
			if tr.pos.token == nil {
				continue
			}
			c := covered(t, tr.pos.token)
			if c > lwm {
				t.Fatalf("iter %d: position %q passes unsettled seq %d", iter, tokData(tr.pos.token), lwm+1)
			}
			if c < lastCovered {
				t.Fatalf("iter %d: position moved back from %d to %d", iter, lastCovered, c)
			}
			lastCovered = c
		}
		if tr.lwm != total || covered(t, tr.pos.token) != total || tr.pos.source != store.SourcePBRT {
			t.Fatalf("iter %d: end lwm %d pos %q, want pbrt at %d", iter, tr.lwm, tokData(tr.pos.token), total)
		}
	}
}

// TestActorWritesNeverPassUnsettled drives the actor with random settlement orders and a write
// on every settlement, and checks every token written against what had been settled when it was
// sent.
// checkingStore wraps a Store and checks every saved token against the settlements sent so far
// (the test marks a seq settled before sending it, so a token covering a seq not yet marked was
// written past an unsettled event).
type checkingStore struct {
	Store
	t       *testing.T
	mu      sync.Mutex
	settled map[uint64]bool
	bad     []string
	writes  int
}

func (s *checkingStore) Save(ctx context.Context, cp store.Checkpoint) error {
	s.mu.Lock()
	if cp.Source == store.SourceEvent || cp.Source == store.SourcePBRT {
		s.writes++
		c := covered(s.t, cp.Token)
		for q := uint64(1); q <= c; q++ {
			if !s.settled[q] {
				s.bad = append(s.bad, fmt.Sprintf("%s written with seq %d unsettled", tokData(cp.Token), q))
				break
			}
		}
	}
	s.mu.Unlock()
	return s.Store.Save(ctx, cp)
}

func (s *checkingStore) mark(seqs []uint64) {
	s.mu.Lock()
	for _, q := range seqs {
		s.settled[q] = true
	}
	s.mu.Unlock()
}

// TestActorWritesNeverPassUnsettled drives the actor with random settlement orders and a write
// due on every settlement, and checks every token written against what had been sent settled.
func TestActorWritesNeverPassUnsettled(t *testing.T) {
	var cs *checkingStore
	h := newHarness(t, func(h *harness, c *Config) {
		c.Checkpoint.SaveEvery = 1
		cs = &checkingStore{Store: h.ms, t: t, settled: map[uint64]bool{}}
		c.Store = cs
	})
	h.resolve(1)
	event[CheckpointedEvent](h)
	rng := rand.New(rand.NewPCG(42, 42))
	const total = 3000
	var pending []uint64
	var announced uint64
	for announced < total || len(pending) > 0 {
		if announced < total && (len(pending) == 0 || rng.IntN(3) == 0) {
			n := min(uint64(rng.IntN(32)), total-announced)
			for i := uint64(1); i <= n; i++ {
				pending = append(pending, announced+i)
			}
			announced += n
			h.progress(1, announced, pbrtTok(announced))
			continue
		}
		var batch []uint64
		for j := 0; j < 1+rng.IntN(8) && len(pending) > 0; j++ {
			k := rng.IntN(min(len(pending), 16))
			batch = append(batch, pending[k])
			pending = append(pending[:k], pending[k+1:]...)
		}
		cs.mark(batch)
		h.settle(1, batch...)
	}
	for {
		e := event[CheckpointedEvent](h)
		if covered(t, e.Checkpoint.Token) == total {
			break
		}
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if len(cs.bad) > 0 {
		t.Fatalf("%d bad writes, first: %s", len(cs.bad), cs.bad[0])
	}
	if cs.writes < 10 {
		t.Fatalf("only %d writes", cs.writes)
	}
	if cp, _ := h.stored(); tokData(cp.Token) != tokData(pbrtTok(total)) {
		t.Fatalf("final %q", tokData(cp.Token))
	}
}
