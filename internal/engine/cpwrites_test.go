package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/watchtree/watchtree/store"
)

// gatedCheckpoints is a checkpoint store whose calls hold until the gate opens, counting the
// calls inside it.
type gatedCheckpoints struct {
	gate chan struct{}

	mu                    sync.Mutex
	inside, most, entered int
}

func (g *gatedCheckpoints) hold(ctx context.Context) error {
	g.mu.Lock()
	g.inside++
	g.entered++
	g.most = max(g.most, g.inside)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inside--
		g.mu.Unlock()
	}()
	select {
	case <-g.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gatedCheckpoints) Load(ctx context.Context, _ store.Scope) (store.Checkpoint, bool, error) {
	return store.Checkpoint{}, false, g.hold(ctx)
}

func (g *gatedCheckpoints) Save(ctx context.Context, _ store.Checkpoint) error { return g.hold(ctx) }

func (g *gatedCheckpoints) counts() (inside, most, entered int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inside, g.most, g.entered
}

// admitted runs each call to store after admit, as the checkpointer does with Config.Admit.
type admitted struct {
	store *gatedCheckpoints
	admit func(context.Context) (func(), error)
}

func (a admitted) Load(ctx context.Context, scope store.Scope) (store.Checkpoint, bool, error) {
	release, err := a.admit(ctx)
	if err != nil {
		return store.Checkpoint{}, false, err
	}
	defer release()
	return a.store.Load(ctx, scope)
}

func (a admitted) Save(ctx context.Context, cp store.Checkpoint) error {
	release, err := a.admit(ctx)
	if err != nil {
		return err
	}
	defer release()
	return a.store.Save(ctx, cp)
}

// TestCheckpointWritesBound: the checkpointers of a runtime make at most CheckpointWrites store
// calls at once, Saves and Loads together; a call beyond them waits for a token (and gives up
// with its context, naming the pool) without reaching the store, and goes on when one is given
// back.
func TestCheckpointWritesBound(t *testing.T) {
	g := &gatedCheckpoints{gate: make(chan struct{})}
	rt := New(Config{Logger: zap.NewNop()})
	st := admitted{store: g, admit: rt.cpWrites.admit}
	ctx := testCtx(t)
	const calls = 3 * CheckpointWrites
	errs := make(chan error, calls)
	for i := range calls {
		go func() {
			if i%2 == 0 {
				errs <- st.Save(ctx, store.Checkpoint{})
			} else {
				_, _, err := st.Load(ctx, store.Scope{})
				errs <- err
			}
		}()
	}
	deadline := time.Now().Add(testWait)
	for {
		if inside, _, _ := g.counts(); inside == CheckpointWrites && rt.cpWrites.inUse() == CheckpointWrites {
			break
		}
		if time.Now().After(deadline) {
			inside, _, _ := g.counts()
			t.Fatalf("%d calls in the store, %d tokens taken; want %d of each", inside, rt.cpWrites.inUse(), CheckpointWrites)
		}
		time.Sleep(time.Millisecond) // polling interval of the deadline loop
	}
	// One more call, given up while the store holds the others: it never reached the store.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := st.Save(cctx, store.Checkpoint{}); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "checkpoint store calls") {
		t.Fatalf("a Save with every token taken and its context cancelled: %v, want the token wait's error", err)
	}
	close(g.gate)
	for range calls {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if _, most, entered := g.counts(); most != CheckpointWrites || entered != calls {
		t.Fatalf("at most %d calls at once in the store, %d in all; want %d and %d", most, entered, CheckpointWrites, calls)
	}
	if n := rt.cpWrites.inUse(); n != 0 {
		t.Fatalf("%d tokens still taken", n)
	}
}
