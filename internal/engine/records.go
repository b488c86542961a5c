package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/actors/dispatcher"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/store"
)

// deadLetterEntry returns the entry of stream, which must be registered on rt.
func (rt *Runtime) deadLetterEntry(stream string) (*Entry, error) {
	return rt.registeredEntry(stream, "dead letters are read through the stream that wrote them: spawn it on this runtime")
}

// DeadLetters lists up to limit (limit <= 0: all) of the stream's unexpired dead letters, of
// its scope on this instance, oldest first (watchtree.Runtime.DeadLetters). The stream must be
// registered (ErrUnknownStream); ErrNotStarted before Start.
func (rt *Runtime) DeadLetters(ctx context.Context, stream string, limit int) ([]store.DeadLetter, error) {
	e, err := rt.deadLetterEntry(stream)
	if err != nil {
		return nil, err
	}
	list, err := e.store.deadLetters.ListDeadLetters(ctx, e.records, limit)
	if err != nil {
		return nil, fmt.Errorf("watchtree: stream %q: list dead letters: %w", stream, err)
	}
	return list, nil
}

// CountDeadLetters counts the stream's unexpired dead letters as DeadLetters lists them: with
// the store's store.DeadLetterCounter when it has one, else by listing them all.
func (rt *Runtime) CountDeadLetters(ctx context.Context, stream string) (int, error) {
	e, err := rt.deadLetterEntry(stream)
	if err != nil {
		return 0, err
	}
	if c, ok := e.store.deadLetters.(store.DeadLetterCounter); ok {
		n, err := c.CountDeadLetters(ctx, e.records)
		if err != nil {
			return 0, fmt.Errorf("watchtree: stream %q: count dead letters: %w", stream, err)
		}
		return int(n), nil
	}
	list, err := e.store.deadLetters.ListDeadLetters(ctx, e.records, 0)
	if err != nil {
		return 0, fmt.Errorf("watchtree: stream %q: count dead letters: %w", stream, err)
	}
	return len(list), nil
}

// Replay runs the stream's dead-lettered event id once more through its handler, in the
// caller's goroutine (watchtree.Runtime.Replay): on success (nil, a skip, filtered or unhandled)
// the record is deleted; on failure it is kept and marked replayed, and the handler's error
// returned. Errors: ErrNotStarted, ErrUnknownStream, store.ErrNotFound, ErrReplayUnavailable.
func (rt *Runtime) Replay(ctx context.Context, stream, id string) error {
	e, err := rt.deadLetterEntry(stream)
	if err != nil {
		return err
	}
	st := e.store.deadLetters
	dl, err := st.GetDeadLetter(ctx, e.records, id)
	if err != nil {
		return fmt.Errorf("watchtree: stream %q: replay %s: %w", stream, id, err)
	}
	if dl.EventOmitted || len(dl.Event) == 0 {
		return fmt.Errorf("%w: the event of %s was not stored (too large); re-read document %v instead",
			ErrReplayUnavailable, id, dl.DocumentKey)
	}
	router := e.routerFor()
	herr := replayOnce(ctx, router, dl.Event)
	now := rt.clk.Now()
	if class, _ := router.Classify(herr); herr == nil || class == dispatcher.Skipped {
		if err := st.DeleteDeadLetter(ctx, e.records, id); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("watchtree: stream %q: replay %s succeeded, but deleting the dead letter failed: %w", stream, id, err)
		}
		e.log.Info("dead letter replayed", zap.String("id", id))
		return nil
	}
	if err := st.MarkReplayed(ctx, e.records, id, now); err != nil && !errors.Is(err, store.ErrNotFound) {
		e.log.Warn("dead letter replay not recorded", zap.String("id", id), zap.Error(err))
	}
	e.log.Warn("dead letter replay failed", zap.String("id", id), zap.Error(herr))
	return fmt.Errorf("watchtree: stream %q: replay %s: %w", stream, id, herr)
}

// replayOnce routes and calls the handler once, recovering panics.
func replayOnce(ctx context.Context, router dispatcher.Router, raw bson.Raw) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &replayPanic{value: p, stack: debug.Stack()}
		}
	}()
	inv, outcome, err := router.Route(raw)
	if err != nil {
		return err
	}
	if inv == nil || outcome != wire.Outcome_OUTCOME_UNSPECIFIED {
		return nil // filtered or unhandled: settles, as in the stream
	}
	return inv.Call(ctx, 1)
}

// replayPanic is a handler panic during Replay.
type replayPanic struct {
	value any
	stack []byte
}

func (p *replayPanic) Error() string {
	return fmt.Sprintf("handler panicked: %v\n%s", p.value, p.stack)
}

func (p *replayPanic) Unwrap() error {
	err, _ := p.value.(error)
	return err
}

// Purge deletes the stream's dead letter id (the console's purge); store.ErrNotFound when
// there is none.
func (rt *Runtime) Purge(ctx context.Context, stream, id string) error {
	e, err := rt.deadLetterEntry(stream)
	if err != nil {
		return err
	}
	if err := e.store.deadLetters.DeleteDeadLetter(ctx, e.records, id); err != nil {
		return fmt.Errorf("watchtree: stream %q: purge %s: %w", stream, id, err)
	}
	e.log.Info("dead letter purged")
	return nil
}

// Checkpoints lists the stream's stored, unexpired checkpoints, every scope
// (watchtree.Runtime.Checkpoints), reading the store once, bounded by ctx.
func (rt *Runtime) Checkpoints(ctx context.Context, stream string) ([]store.Checkpoint, error) {
	e, err := rt.registeredEntry(stream, "checkpoints are read through the stream that writes them: spawn it on this runtime")
	if err != nil {
		return nil, err
	}
	list, err := e.store.checkpoints.ListCheckpoints(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("watchtree: stream %q: list checkpoints: %w", stream, err)
	}
	return list, nil
}
