package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/store"
)

// TestCheckpointStore runs the checkpoint contract against stores made by newStore (a fresh,
// empty store per call): load of a missing stream, exact round trips, upsert overwrite, epoch
// fencing (sequential and concurrent), defensive copies and done contexts.
func TestCheckpointStore(t *testing.T, newStore func(t *testing.T) CheckpointStore) {
	t.Helper()
	cases := []struct {
		name string
		run  func(t *testing.T, s CheckpointStore)
	}{
		{"LoadMissing", cpLoadMissing},
		{"RoundTrip", cpRoundTrip},
		{"RoundTripWithoutToken", cpRoundTripWithoutToken},
		{"Overwrite", cpOverwrite},
		{"StreamsAreIndependent", cpStreamsIndependent},
		{"FencedByHigherEpoch", cpFenced},
		{"FencingFromEpochZero", cpFencingFromZero},
		{"ConcurrentEpochs", cpConcurrentEpochs},
		{"ConcurrentFirstSave", cpConcurrentFirstSave},
		{"CopiesToken", cpCopies},
		{"DoneContext", cpDoneContext},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newStore(t)) })
	}
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

func mustLoad(t *testing.T, s CheckpointStore, stream string) (store.Checkpoint, bool) {
	t.Helper()
	cp, ok, err := s.Load(testCtx(t), stream)
	if err != nil {
		t.Fatalf("Load(%q): %v", stream, err)
	}
	return cp, ok
}

func mustSave(t *testing.T, s CheckpointStore, cp store.Checkpoint) {
	t.Helper()
	if err := s.Save(testCtx(t), cp); err != nil {
		t.Fatalf("Save(%q, epoch %d): %v", cp.Stream, cp.Epoch, err)
	}
}

func wantCheckpoint(t *testing.T, s CheckpointStore, want store.Checkpoint) {
	t.Helper()
	got, ok := mustLoad(t, s, want.Stream)
	if !ok {
		t.Fatalf("Load(%q): not found, want %+v", want.Stream, want)
	}
	if d := diffCheckpoint(want, got); d != "" {
		t.Fatalf("Load(%q): %s", want.Stream, d)
	}
}

func cpLoadMissing(t *testing.T, s CheckpointStore) {
	cp, ok := mustLoad(t, s, "missing")
	if ok {
		t.Fatalf("Load of a stream never saved: ok = true, cp = %+v", cp)
	}
}

func cpRoundTrip(t *testing.T, s CheckpointStore) {
	want := sampleCheckpoint("orders", 3, 42)
	want.Source = store.SourcePBRT
	mustSave(t, s, want)
	wantCheckpoint(t, s, want)
}

func cpRoundTripWithoutToken(t *testing.T, s CheckpointStore) {
	want := store.Checkpoint{
		Stream:      "orders",
		ClusterTime: bson.Timestamp{T: 1_773_500_000, I: 1},
		Source:      store.SourceInitial,
		UpdatedAt:   baseTime,
	}
	mustSave(t, s, want)
	got, _ := mustLoad(t, s, "orders")
	if len(got.Token) != 0 {
		t.Fatalf("Token = %v, want none", got.Token)
	}
	if d := diffCheckpoint(want, got); d != "" {
		t.Fatal(d)
	}
}

func cpOverwrite(t *testing.T, s CheckpointStore) {
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

func cpStreamsIndependent(t *testing.T, s CheckpointStore) {
	a := sampleCheckpoint("a", 7, 1)
	b := sampleCheckpoint("b", 2, 2)
	mustSave(t, s, a)
	mustSave(t, s, b) // a lower epoch on another stream is not fenced
	wantCheckpoint(t, s, a)
	wantCheckpoint(t, s, b)
}

func cpFenced(t *testing.T, s CheckpointStore) {
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

func cpFencingFromZero(t *testing.T, s CheckpointStore) {
	// ALL_INSTANCES writes epoch 0; a later leader (epoch ≥ 1) takes over and fences them.
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
func cpConcurrentEpochs(t *testing.T, s CheckpointStore) {
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
func cpConcurrentFirstSave(t *testing.T, s CheckpointStore) {
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

func cpCopies(t *testing.T, s CheckpointStore) {
	cp := sampleCheckpoint("orders", 1, 1)
	want := cp.Clone()
	mustSave(t, s, cp)
	for i := range cp.Token {
		cp.Token[i] = 0xFF // the caller reuses its buffer
	}
	got, _ := mustLoad(t, s, "orders")
	if d := diffCheckpoint(want, got); d != "" {
		t.Fatalf("after the caller changed its token: %s", d)
	}
	for i := range got.Token {
		got.Token[i] = 0xFF // the caller changes what it loaded
	}
	wantCheckpoint(t, s, want)
}

func cpDoneContext(t *testing.T, s CheckpointStore) {
	for _, c := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"cancelled", cancelledCtx(), context.Canceled},
		{"deadline", expiredCtx(t), context.DeadlineExceeded},
	} {
		err := promptly(t, "Save", func() error { return s.Save(c.ctx, sampleCheckpoint("orders", 1, 1)) })
		if !errors.Is(err, c.want) {
			t.Errorf("Save on a %s context: err = %v, want %v", c.name, err, c.want)
		}
		err = promptly(t, "Load", func() error { _, _, err := s.Load(c.ctx, "orders"); return err })
		if !errors.Is(err, c.want) {
			t.Errorf("Load on a %s context: err = %v, want %v", c.name, err, c.want)
		}
	}
	if cp, ok := mustLoad(t, s, "orders"); ok {
		t.Errorf("a Save on a done context was stored: %+v", cp)
	}
}
