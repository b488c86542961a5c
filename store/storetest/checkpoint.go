package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/store"
)

// TestCheckpointStore runs the checkpoint contract against stores made by newStore (a fresh,
// empty store per call): load of a missing stream, exact round trips, upsert overwrite, epoch
// fencing (sequential and concurrent), scopes (the shared one and each instance's, fenced,
// loaded and listed on their own), positions that never move backward under one epoch (by
// token, by cluster time, per scope, concurrently, and the explicit Rewind), retention,
// defensive copies and done contexts. now is the
// store's clock for retention: the store must treat a checkpoint as expired (absent from every
// read) once now() is after its ExpiresAt. The suite's clock starts at the wall-clock time, as
// TestDeadLetterStore's does, and only moves when a case advances it.
func TestCheckpointStore(t *testing.T, newStore func(t *testing.T, now func() time.Time) store.CheckpointStore) {
	t.Helper()
	runClockedSuite(t, newStore, []clockedCase[store.CheckpointStore]{
		{"LoadMissing", unclocked(cpLoadMissing)},
		{"RoundTrip", unclocked(cpRoundTrip)},
		{"RoundTripWithoutToken", unclocked(cpRoundTripWithoutToken)},
		{"Overwrite", unclocked(cpOverwrite)},
		{"StreamsAreIndependent", unclocked(cpStreamsIndependent)},
		{"FencedByHigherEpoch", unclocked(cpFenced)},
		{"FencingFromEpochZero", unclocked(cpFencingFromZero)},
		{"ConcurrentEpochs", unclocked(cpConcurrentEpochs)},
		{"ConcurrentFirstSave", unclocked(cpConcurrentFirstSave)},
		{"CopiesToken", unclocked(cpCopies)},
		{"DoneContext", unclocked(cpDoneContext)},
		{"ScopesAreIndependent", unclocked(cpScopesIndependent)},
		{"List", unclocked(cpList)},
		{"BackwardRefused", unclocked(cpBackwardRefused)},
		{"BackwardByClusterTime", unclocked(cpBackwardByClusterTime)},
		{"BackwardPerScope", unclocked(cpBackwardPerScope)},
		{"Rewind", unclocked(cpRewind)},
		{"ConcurrentPositions", unclocked(cpConcurrentPositions)},
		{"Retention", cpRetention},
		{"BackwardAfterExpiry", cpBackwardAfterExpiry},
	})
}

func sampleCheckpoint(stream string, epoch int64, n uint64) store.Checkpoint {
	return store.Checkpoint{
		Stream:      stream,
		Token:       token(fmt.Sprintf("82%014X2B022C0100296E5A1004%08X", n, epoch)),
		ClusterTime: bson.Timestamp{T: 1_773_500_000 + uint32(n), I: 7},
		Source:      store.SourceEvent,
		Epoch:       epoch,
		Owner:       fmt.Sprintf("instance-%d", epoch),
		Settled:     n,
		UpdatedAt:   baseTime.Add(timeMs(n)),
	}
}

func mustLoad(t *testing.T, s store.CheckpointStore, scope store.Scope) (store.Checkpoint, bool) {
	t.Helper()
	cp, ok, err := s.Load(testCtx(t), scope)
	if err != nil {
		t.Fatalf("Load(%s): %v", scope, err)
	}
	return cp, ok
}

func mustSave(t *testing.T, s store.CheckpointStore, cp store.Checkpoint) {
	t.Helper()
	if err := s.Save(testCtx(t), cp); err != nil {
		t.Fatalf("Save(%s, epoch %d): %v", cp.Scope(), cp.Epoch, err)
	}
}

func wantCheckpoint(t *testing.T, s store.CheckpointStore, want store.Checkpoint) {
	t.Helper()
	got, ok := mustLoad(t, s, want.Scope())
	if !ok {
		t.Fatalf("Load(%s): not found, want %+v", want.Scope(), want)
	}
	if d := diffCheckpoint(want, got); d != "" {
		t.Fatalf("Load(%s): %s", want.Scope(), d)
	}
}

func cpLoadMissing(t *testing.T, s store.CheckpointStore) {
	cp, ok := mustLoad(t, s, sh("missing"))
	if ok {
		t.Fatalf("Load of a stream never saved: ok = true, cp = %+v", cp)
	}
}

func cpRoundTrip(t *testing.T, s store.CheckpointStore) {
	want := sampleCheckpoint("orders", 3, 42)
	want.Source = store.SourcePBRT
	mustSave(t, s, want)
	wantCheckpoint(t, s, want)
}

func cpRoundTripWithoutToken(t *testing.T, s store.CheckpointStore) {
	want := store.Checkpoint{
		Stream:      "orders",
		ClusterTime: bson.Timestamp{T: 1_773_500_000, I: 1},
		Source:      store.SourceInitial,
		UpdatedAt:   baseTime,
	}
	mustSave(t, s, want)
	got, _ := mustLoad(t, s, sh("orders"))
	if len(got.Token) != 0 {
		t.Fatalf("Token = %v, want none", got.Token)
	}
	if d := diffCheckpoint(want, got); d != "" {
		t.Fatal(d)
	}
}

func cpOverwrite(t *testing.T, s store.CheckpointStore) {
	first := sampleCheckpoint("orders", 1, 1)
	mustSave(t, s, first)
	second := store.Checkpoint{ // fewer fields: a save replaces the record, it does not merge
		Stream:    "orders",
		Token:     token("8200000002"),
		Source:    store.SourceResumeFromNow,
		Epoch:     1,
		UpdatedAt: baseTime.Add(timeMs(5)),
	}
	mustSave(t, s, second)
	wantCheckpoint(t, s, second)
}

func cpStreamsIndependent(t *testing.T, s store.CheckpointStore) {
	a := sampleCheckpoint("a", 7, 1)
	b := sampleCheckpoint("b", 2, 2)
	mustSave(t, s, a)
	mustSave(t, s, b) // a lower epoch on another stream is not fenced
	wantCheckpoint(t, s, a)
	wantCheckpoint(t, s, b)
}

func cpFenced(t *testing.T, s store.CheckpointStore) {
	held := sampleCheckpoint("orders", 5, 10)
	mustSave(t, s, held)

	stale := sampleCheckpoint("orders", 4, 99)
	err := s.Save(testCtx(t), stale)
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("Save with epoch 4 over epoch 5: err = %v, want store.ErrFenced", err)
	}
	wantCheckpoint(t, s, held) // unchanged

	same := sampleCheckpoint("orders", 5, 11)
	mustSave(t, s, same) // equal epoch succeeds
	wantCheckpoint(t, s, same)

	newer := sampleCheckpoint("orders", 6, 12)
	mustSave(t, s, newer) // higher epoch succeeds
	wantCheckpoint(t, s, newer)

	if err := s.Save(testCtx(t), sampleCheckpoint("orders", 5, 13)); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("Save with epoch 5 over epoch 6: err = %v, want store.ErrFenced", err)
	}
	wantCheckpoint(t, s, newer)
}

func cpFencingFromZero(t *testing.T, s store.CheckpointStore) {
	// AllInstances writes epoch 0; a later leader (epoch ≥ 1) takes over and fences them.
	zero := sampleCheckpoint("orders", 0, 1)
	mustSave(t, s, zero)
	mustSave(t, s, sampleCheckpoint("orders", 0, 2))
	leader := sampleCheckpoint("orders", 1, 3)
	mustSave(t, s, leader)
	if err := s.Save(testCtx(t), sampleCheckpoint("orders", 0, 4)); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("Save with epoch 0 over epoch 1: err = %v, want store.ErrFenced", err)
	}
	wantCheckpoint(t, s, leader)
}

// cpConcurrentEpochs: writers with epochs 1..N save repeatedly and concurrently. Every save
// either succeeds or is fenced; once a writer is fenced it stays fenced (epochs only grow); the
// highest epoch is never fenced; and the stored record is the highest writer's last save (no
// lost update).
func cpConcurrentEpochs(t *testing.T, s store.CheckpointStore) {
	const writers, saves = 8, 15
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, writers*saves)
	for w := 1; w <= writers; w++ {
		wg.Go(func() {
			fenced := false
			for i := 1; i <= saves; i++ {
				err := s.Save(ctx, sampleCheckpoint("orders", int64(w), uint64(w*1000+i)))
				switch {
				case err == nil:
					if fenced {
						errs <- fmt.Errorf("writer epoch %d: save %d succeeded after it was fenced", w, i)
					}
				case errors.Is(err, store.ErrFenced):
					if w == writers {
						errs <- fmt.Errorf("writer with the highest epoch %d fenced at save %d: %v", w, i, err)
					}
					fenced = true
				default:
					errs <- fmt.Errorf("writer epoch %d save %d: %v", w, i, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	wantCheckpoint(t, s, sampleCheckpoint("orders", writers, uint64(writers*1000+saves)))
}

// cpConcurrentFirstSave: writers race to create the record. Only the highest epoch may end up
// stored, and it must not be fenced by a lower one that created the record first.
func cpConcurrentFirstSave(t *testing.T, s store.CheckpointStore) {
	const writers = 8
	for round := range 5 {
		stream := fmt.Sprintf("race-%d", round)
		ctx := testCtx(t)
		var wg sync.WaitGroup
		errs := make([]error, writers+1)
		start := make(chan struct{})
		for w := 1; w <= writers; w++ {
			wg.Go(func() {
				<-start
				errs[w] = s.Save(ctx, sampleCheckpoint(stream, int64(w), uint64(w)))
			})
		}
		close(start)
		wg.Wait()
		for w := 1; w <= writers; w++ {
			if errs[w] != nil && !errors.Is(errs[w], store.ErrFenced) {
				t.Fatalf("round %d writer %d: %v", round, w, errs[w])
			}
		}
		if errs[writers] != nil {
			t.Fatalf("round %d: the highest epoch was fenced: %v", round, errs[writers])
		}
		wantCheckpoint(t, s, sampleCheckpoint(stream, writers, writers))
	}
}

func cpCopies(t *testing.T, s store.CheckpointStore) {
	cp := sampleCheckpoint("orders", 1, 1)
	want := cp.Clone()
	mustSave(t, s, cp)
	for i := range cp.Token {
		cp.Token[i] = 0xFF // the caller reuses its buffer
	}
	got, _ := mustLoad(t, s, sh("orders"))
	if d := diffCheckpoint(want, got); d != "" {
		t.Fatalf("after the caller changed its token: %s", d)
	}
	for i := range got.Token {
		got.Token[i] = 0xFF // the caller changes what it loaded
	}
	wantCheckpoint(t, s, want)
}

func cpDoneContext(t *testing.T, s store.CheckpointStore) {
	for _, c := range doneContexts(t) {
		err := promptly(t, "Save", func() error { return s.Save(c.ctx, sampleCheckpoint("orders", 1, 1)) })
		if !errors.Is(err, c.want) {
			t.Errorf("Save on a %s context: err = %v, want %v", c.name, err, c.want)
		}
		err = promptly(t, "Load", func() error { _, _, err := s.Load(c.ctx, sh("orders")); return err })
		if !errors.Is(err, c.want) {
			t.Errorf("Load on a %s context: err = %v, want %v", c.name, err, c.want)
		}
		err = promptly(t, "ListCheckpoints", func() error { _, err := s.ListCheckpoints(c.ctx, "orders"); return err })
		if !errors.Is(err, c.want) {
			t.Errorf("ListCheckpoints on a %s context: err = %v, want %v", c.name, err, c.want)
		}
	}
	if cp, ok := mustLoad(t, s, sh("orders")); ok {
		t.Errorf("a Save on a done context was stored: %+v", cp)
	}
}

// instanceCheckpoint is sampleCheckpoint for an instance's own position (epoch 0, as an
// AllInstances writer saves).
func instanceCheckpoint(stream, instance string, n uint64) store.Checkpoint {
	cp := sampleCheckpoint(stream, 0, n)
	cp.Instance = instance
	cp.Owner = instance + "-4711-a1b2c3"
	return cp
}

// cpScopesIndependent: the shared position and each instance's own are separate records. An
// instance's save never moves another's or the shared one, and the shared one's epoch fences
// nobody else.
func cpScopesIndependent(t *testing.T, s store.CheckpointStore) {
	shared := sampleCheckpoint("orders", 5, 100)
	a := instanceCheckpoint("orders", "pod-a", 600)
	b := instanceCheckpoint("orders", "pod-b", 99)
	mustSave(t, s, shared)
	mustSave(t, s, a) // epoch 0 under a shared epoch 5: another record, not fenced
	mustSave(t, s, b)
	wantCheckpoint(t, s, shared)
	wantCheckpoint(t, s, a)
	wantCheckpoint(t, s, b)

	a2 := instanceCheckpoint("orders", "pod-a", 700)
	mustSave(t, s, a2)
	wantCheckpoint(t, s, a2)
	wantCheckpoint(t, s, b) // pod-a's progress never moves pod-b
	wantCheckpoint(t, s, shared)
	if cp, ok := mustLoad(t, s, inst("orders", "pod-c")); ok {
		t.Fatalf("Load of an instance that never saved: %+v", cp)
	}
	if cp, ok := mustLoad(t, s, inst("payments", "pod-a")); ok {
		t.Fatalf("Load of another stream's instance: %+v", cp)
	}

	// Fencing is per record: an instance's epoch does not fence the shared position.
	fencedA := instanceCheckpoint("orders", "pod-a", 800)
	fencedA.Epoch = 9
	mustSave(t, s, fencedA)
	mustSave(t, s, sampleCheckpoint("orders", 5, 101))
	if err := s.Save(testCtx(t), instanceCheckpoint("orders", "pod-a", 801)); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("Save of pod-a with epoch 0 over its epoch 9: err = %v, want store.ErrFenced", err)
	}
	wantCheckpoint(t, s, fencedA)
}

func mustListCheckpoints(t *testing.T, s store.CheckpointStore, stream string) []store.Checkpoint {
	t.Helper()
	cps, err := s.ListCheckpoints(testCtx(t), stream)
	if err != nil {
		t.Fatalf("ListCheckpoints(%q): %v", stream, err)
	}
	return cps
}

func wantListCheckpoints(t *testing.T, s store.CheckpointStore, stream string, want ...store.Checkpoint) {
	t.Helper()
	wantRecords(t, fmt.Sprintf("ListCheckpoints(%q)", stream), mustListCheckpoints(t, s, stream), want,
		func(cp store.Checkpoint) string { return cp.Scope().String() }, notStored...)
}

// cpList: a stream's checkpoints are listed, every scope, the shared one first and then by
// instance name; other streams' (a stream whose name has this one as a prefix included) are not.
func cpList(t *testing.T, s store.CheckpointStore) {
	wantListCheckpoints(t, s, "orders")
	b := instanceCheckpoint("orders", "pod-b", 2)
	a := instanceCheckpoint("orders", "pod-a", 1)
	shared := sampleCheckpoint("orders", 0, 3)
	others := []store.Checkpoint{
		sampleCheckpoint("orders-eu", 0, 4),
		instanceCheckpoint("orders-eu", "pod-a", 5),
		instanceCheckpoint("payments", "pod-a", 6),
	}
	for _, cp := range append([]store.Checkpoint{b, a, shared}, others...) {
		mustSave(t, s, cp)
	}
	wantListCheckpoints(t, s, "orders", shared, a, b)
	wantListCheckpoints(t, s, "orders-eu", others[0], others[1])
	wantListCheckpoints(t, s, "payments", others[2])
	wantListCheckpoints(t, s, "nobody")
}

// cpRetention: a checkpoint is absent from Load and ListCheckpoints once the store's clock is
// after its ExpiresAt; one without ExpiresAt never expires; a save after expiry stores a fresh
// record.
func cpRetention(t *testing.T, s store.CheckpointStore, clk *clock.Fake) {
	now := clk.Now()
	a := instanceCheckpoint("orders", "pod-a", 1)
	a.UpdatedAt, a.ExpiresAt = now, now.Add(time.Hour)
	b := instanceCheckpoint("orders", "pod-b", 2)
	b.UpdatedAt, b.ExpiresAt = now, now.Add(48*time.Hour)
	shared := sampleCheckpoint("orders", 0, 3)
	for _, cp := range []store.Checkpoint{a, b, shared} {
		mustSave(t, s, cp)
	}
	clk.Advance(time.Hour - time.Millisecond)
	wantCheckpoint(t, s, a)
	wantListCheckpoints(t, s, "orders", shared, a, b)

	clk.Advance(2 * time.Millisecond) // after a.ExpiresAt
	if cp, ok := mustLoad(t, s, a.Scope()); ok {
		t.Fatalf("Load of an expired checkpoint: %+v", cp)
	}
	wantListCheckpoints(t, s, "orders", shared, b)

	again := instanceCheckpoint("orders", "pod-a", 10)
	again.UpdatedAt, again.ExpiresAt = clk.Now(), clk.Now().Add(time.Hour)
	mustSave(t, s, again)
	wantCheckpoint(t, s, again)

	clk.Advance(49 * time.Hour)
	wantListCheckpoints(t, s, "orders", shared)
	wantCheckpoint(t, s, shared)
}

// wantBackward asserts that saving cp fails with store.ErrBackward, naming the attempted and the
// stored position, and leaves stored in place.
func wantBackward(t *testing.T, s store.CheckpointStore, cp, stored store.Checkpoint) {
	t.Helper()
	err := s.Save(testCtx(t), cp)
	if !errors.Is(err, store.ErrBackward) {
		t.Fatalf("Save(%s at %s) behind %s: err = %v, want store.ErrBackward",
			cp.Scope(), store.DescribePosition(cp), store.DescribePosition(stored), err)
	}
	if errors.Is(err, store.ErrFenced) {
		t.Fatalf("Save behind the stored position under the same epoch: err = %v also matches ErrFenced", err)
	}
	for _, pos := range []string{store.DescribePosition(cp), store.DescribePosition(stored)} {
		if !strings.Contains(err.Error(), pos) {
			t.Errorf("ErrBackward text %q does not name the position %q", err, pos)
		}
	}
	wantCheckpoint(t, s, stored)
}

// cpBackwardRefused: under one epoch, a save whose token sorts before the stored one is
// refused; an equal or later one succeeds; a higher epoch may move the position back (a new
// leader claims what it loaded), and is then held to its own order.
func cpBackwardRefused(t *testing.T, s store.CheckpointStore) {
	held := sampleCheckpoint("orders", 3, 10)
	mustSave(t, s, held)
	wantBackward(t, s, sampleCheckpoint("orders", 3, 9), held)
	wantBackward(t, s, sampleCheckpoint("orders", 3, 1), held)

	again := held
	again.Source, again.Settled = store.SourcePBRT, 11
	mustSave(t, s, again) // the same position again: not backward
	wantCheckpoint(t, s, again)

	later := sampleCheckpoint("orders", 3, 12)
	mustSave(t, s, later)
	wantCheckpoint(t, s, later)

	claimed := sampleCheckpoint("orders", 4, 2) // a higher epoch behind: allowed
	mustSave(t, s, claimed)
	wantCheckpoint(t, s, claimed)
	wantBackward(t, s, sampleCheckpoint("orders", 4, 1), claimed)

	// The lower epoch is fenced, whatever its position: fencing comes first.
	if err := s.Save(testCtx(t), sampleCheckpoint("orders", 3, 99)); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("Save with epoch 3 over epoch 4: err = %v, want store.ErrFenced", err)
	}
	wantCheckpoint(t, s, claimed)
}

// cpBackwardByClusterTime: where either position has no token, cluster times order them;
// where neither can be ordered, the save goes through.
func cpBackwardByClusterTime(t *testing.T, s store.CheckpointStore) {
	at := func(stream string, tok string, ts bson.Timestamp) store.Checkpoint {
		cp := store.Checkpoint{Stream: stream, ClusterTime: ts, Source: store.SourceRebuild, Epoch: 2, UpdatedAt: baseTime}
		if tok != "" {
			cp.Token, cp.Source = token(tok), store.SourceEvent
		}
		return cp
	}
	// No token on either side.
	held := at("a", "", bson.Timestamp{T: 1_773_500_100, I: 5})
	mustSave(t, s, held)
	wantBackward(t, s, at("a", "", bson.Timestamp{T: 1_773_500_100, I: 4}), held)
	wantBackward(t, s, at("a", "", bson.Timestamp{T: 1_773_500_099, I: 9}), held)
	later := at("a", "", bson.Timestamp{T: 1_773_500_100, I: 6})
	mustSave(t, s, later)

	// A stored token against a save without one: the times decide.
	withTok := at("b", "8269B5B0A4000000012B0429", bson.Timestamp{T: 1_773_500_100, I: 1})
	mustSave(t, s, withTok)
	wantBackward(t, s, at("b", "", bson.Timestamp{T: 1_773_500_099, I: 1}), withTok)
	noTok := at("b", "", bson.Timestamp{T: 1_773_500_200, I: 1})
	mustSave(t, s, noTok)
	wantCheckpoint(t, s, noTok)
	// A stored time alone against a token and an earlier time: the times decide.
	wantBackward(t, s, at("b", "82FFFFFFFF000000012B0429", bson.Timestamp{T: 1_773_500_150, I: 1}), noTok)

	// Incomparable: a token without a time over a time without a token.
	blind := at("b", "8200000001", bson.Timestamp{})
	mustSave(t, s, blind)
	wantCheckpoint(t, s, blind)
}

// cpBackwardPerScope: the order holds per record. An AllInstances instance (epoch 0) cannot
// move its own position back, and one instance's position never refuses another's.
func cpBackwardPerScope(t *testing.T, s store.CheckpointStore) {
	a := instanceCheckpoint("orders", "pod-a", 50)
	mustSave(t, s, a)
	wantBackward(t, s, instanceCheckpoint("orders", "pod-a", 40), a)
	b := instanceCheckpoint("orders", "pod-b", 40)
	mustSave(t, s, b)
	shared := sampleCheckpoint("orders", 0, 30)
	mustSave(t, s, shared)
	wantCheckpoint(t, s, a)
	wantCheckpoint(t, s, b)
	wantCheckpoint(t, s, shared)
}

// cpRewind: a Rewind moves the position back on purpose; the flag is not stored, so the next
// plain save is held to the rewound position's order.
func cpRewind(t *testing.T, s store.CheckpointStore) {
	mustSave(t, s, sampleCheckpoint("orders", 1, 100))
	back := sampleCheckpoint("orders", 1, 20)
	back.Source, back.Rewind = store.SourceRebuild, true
	mustSave(t, s, back)
	got, _ := mustLoad(t, s, sh("orders"))
	if got.Rewind {
		t.Fatal("a loaded checkpoint has Rewind set: the flag must not be stored")
	}
	back.Rewind = false
	wantCheckpoint(t, s, back)
	wantBackward(t, s, sampleCheckpoint("orders", 1, 19), back)
	mustSave(t, s, sampleCheckpoint("orders", 1, 21))
}

// cpConcurrentPositions: writers of one epoch save interleaved positions concurrently. Every
// save succeeds or is refused as backward; a refused save's position is behind one that was
// stored; and the stored position ends at the highest (the check and the write are one atomic
// step: a check-then-write store loses that race).
func cpConcurrentPositions(t *testing.T, s store.CheckpointStore) {
	const writers, saves = 6, 20
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, writers*saves)
	for w := range writers {
		wg.Go(func() {
			for i := range saves {
				n := uint64(i*writers + w + 1) // writer w saves w+1, w+1+writers, …: the writers interleave
				err := s.Save(ctx, sampleCheckpoint("orders", 7, n))
				if err != nil && !errors.Is(err, store.ErrBackward) {
					errs <- fmt.Errorf("writer %d save of position %d: %v", w, n, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	wantCheckpoint(t, s, sampleCheckpoint("orders", 7, writers*saves))
}

// cpBackwardAfterExpiry: an expired record refuses nothing; a live one with retention does.
func cpBackwardAfterExpiry(t *testing.T, s store.CheckpointStore, clk *clock.Fake) {
	now := clk.Now()
	a := instanceCheckpoint("orders", "pod-a", 50)
	a.UpdatedAt, a.ExpiresAt = now, now.Add(time.Hour)
	mustSave(t, s, a)
	behind := instanceCheckpoint("orders", "pod-a", 40)
	behind.UpdatedAt, behind.ExpiresAt = now, now.Add(time.Hour)
	wantBackward(t, s, behind, a)

	clk.Advance(time.Hour + time.Millisecond)
	behind.UpdatedAt, behind.ExpiresAt = clk.Now(), clk.Now().Add(time.Hour)
	mustSave(t, s, behind)
	wantCheckpoint(t, s, behind)
}
