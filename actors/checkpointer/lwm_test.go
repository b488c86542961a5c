package checkpointer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/internal/wire"
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

// TestTrackerCompact checks that an idle tracker drops its ring, keeps it while a seq is in
// flight, and settles on normally after dropping it.
func TestTrackerCompact(t *testing.T) {
	tr := newTracker()
	tr.progress(3000, pbrtTok(3000))
	for s := uint64(3000); s >= 2; s-- { // out of order: the ring grows to the whole window
		tr.settle(s, evTok(s), false)
	}
	tr.advance()
	if len(tr.slots) < 2048 {
		t.Fatalf("ring of %d slots, want the window's size", len(tr.slots))
	}
	tr.compact()
	if len(tr.slots) == 0 {
		t.Fatal("ring dropped while seq 1 is in flight")
	}
	tr.settle(1, evTok(1), false)
	tr.advance()
	tr.compact()
	if tr.slots != nil || tr.lwm != 3000 || tokData(tr.pos.token) != "pbrt-003000" {
		t.Fatalf("after the last settlement: %d slots, lwm %d, pos %q", len(tr.slots), tr.lwm, tokData(tr.pos.token))
	}
	tr.progress(3002, pbrtTok(3002))
	tr.settle(3002, evTok(3002), false)
	tr.settle(3001, evTok(3001), false)
	tr.advance()
	if tr.lwm != 3002 || tokData(tr.pos.token) != "pbrt-003002" || len(tr.slots) > minSlots {
		t.Fatalf("after compacting: lwm %d pos %q, %d slots", tr.lwm, tokData(tr.pos.token), len(tr.slots))
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
	if !tr.pos.startAfter || tokData(tr.pos.token) != "inv" || tr.pos.source != sourceInvalidate {
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

// gatedStore wraps a Store: every Save hands its checkpoint to the test on calls, then waits until
// the test sends on release. The test decides when writes complete, and so how much settles while
// one is in flight, whatever the scheduling.
type gatedStore struct {
	Store
	calls   chan store.Checkpoint
	release chan struct{}
}

func newGatedStore(s Store) *gatedStore {
	return &gatedStore{Store: s, calls: make(chan store.Checkpoint), release: make(chan struct{})}
}

func (s *gatedStore) Save(ctx context.Context, cp store.Checkpoint) error {
	select {
	case s.calls <- cp:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Store.Save(ctx, cp)
}

// TestActorWritesNeverPassUnsettled drives the actor with random settlement orders, in rounds,
// with a write due on every settlement (SaveEvery 1). The store holds each write until the round
// ends, so settlements keep arriving while a write is in flight and the next write must carry
// the latest position; a Flush ends the round. Every write is checked against exactly the
// settlements the actor had taken when it took the position: Checkpoint.Settled counts them, and
// as the test settles each seq once, they are the first Settled seqs in the test's send order.
func TestActorWritesNeverPassUnsettled(t *testing.T) {
	var gs *gatedStore
	h := newHarness(t, func(h *harness, c *Config) {
		c.Checkpoint.SaveEvery = 1
		gs = newGatedStore(h.ms)
		c.Store = gs
	})
	pass := func() store.Checkpoint { // lets the next write through
		t.Helper()
		select {
		case cp := <-gs.calls:
			gs.release <- struct{}{}
			return cp
		case <-time.After(waitFor):
			t.Fatalf("no write within %v", waitFor)
		}
		return store.Checkpoint{}
	}
	h.request(&wire.ResolveStart{Incarnation: 1})
	if cp := pass(); cp.Source != store.SourceInitial {
		t.Fatalf("first write %+v, want the initial position", cp)
	}
	next[*wire.StartFrom](h)

	rng := rand.New(rand.NewPCG(42, 42))
	const total = 3000
	var (
		pending   []uint64       // announced, not settled
		announced uint64         // highest seq announced by Progress
		sent      []uint64       // seqs in the order they were sent settled
		sentAt    map[uint64]int // seq → its index in sent
		lwm       uint64         // the test's low-water mark: every seq up to it was sent settled
		writes    int            // writes checked
		midRound  int            // writes taken while later settlements of their round were unsent
		moved     int            // rounds in which the low-water mark moved
		bad       []string
	)
	sentAt = map[uint64]int{}
	check := func(cp store.Checkpoint) {
		writes++
		if int(cp.Settled) < len(sent) {
			midRound++
		}
		for q := uint64(1); q <= covered(t, cp.Token); q++ {
			if i, ok := sentAt[q]; !ok || i >= int(cp.Settled) {
				bad = append(bad, fmt.Sprintf("%s written after %d settlements, seq %d not among them",
					tokData(cp.Token), cp.Settled, q))
				return
			}
		}
	}
	for round := 1; announced < total || len(pending) > 0; round++ {
		for steps := 1 + rng.IntN(16); steps > 0 && (announced < total || len(pending) > 0); steps-- {
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
			for _, q := range batch {
				sentAt[q] = len(sent)
				sent = append(sent, q)
			}
			h.settle(1, batch...)
		}
		before := lwm
		for _, ok := sentAt[lwm+1]; ok; _, ok = sentAt[lwm+1] {
			lwm++
		}
		if lwm > before {
			moved++
		}
		// End the round: Flush, and let every write through until the Flushed answer.
		h.request(&wire.Flush{})
		deadline := time.After(waitFor)
	drain:
		for {
			select {
			case cp := <-gs.calls:
				check(cp)
				gs.release <- struct{}{}
			case m := <-h.probe:
				switch m := m.(type) {
				case *wire.Flushed:
					if m.GetError() != "" || m.GetLowWaterMark() != lwm {
						t.Fatalf("round %d: Flushed %v, want low-water mark %d and no error", round, m, lwm)
					}
					break drain
				case *wire.FlowControl: // writes held for a round may pause the (absent) dispatcher
				default:
					t.Fatalf("round %d: probe got %T %v", round, m, m)
				}
			case <-deadline:
				t.Fatalf("round %d: no Flushed within %v", round, waitFor)
			}
		}
	}
	if len(bad) > 0 {
		t.Fatalf("%d of %d writes passed an unsettled seq, first: %s", len(bad), writes, bad[0])
	}
	// Every round that moved the low-water mark wrote at least once; some writes were taken
	// while their round still had settlements to come (else nothing was tested mid-stream).
	if writes < moved || midRound == 0 {
		t.Fatalf("%d writes (%d taken mid-round) over %d rounds that moved the low-water mark", writes, midRound, moved)
	}
	t.Logf("%d writes, %d taken mid-round, %d rounds moved the low-water mark", writes, midRound, moved)
	if cp, _ := h.stored(); tokData(cp.Token) != tokData(pbrtTok(total)) {
		t.Fatalf("final %q", tokData(cp.Token))
	}
}
