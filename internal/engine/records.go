package engine

import (
	"context"
	"fmt"

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

// CountDeadLetters counts the stream's unexpired dead letters as DeadLetters lists them
// (store.DeadLetterStore.CountDeadLetters).
func (rt *Runtime) CountDeadLetters(ctx context.Context, stream string) (int, error) {
	e, err := rt.deadLetterEntry(stream)
	if err != nil {
		return 0, err
	}
	n, err := e.store.deadLetters.CountDeadLetters(ctx, e.records)
	if err != nil {
		return 0, fmt.Errorf("watchtree: stream %q: count dead letters: %w", stream, err)
	}
	return int(n), nil
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
