package engine

import (
	"context"
	"fmt"
)

// tokens bounds how many of one kind of work run at once in a runtime: the catch-up commands
// of shared streams, their Spawns, the namespace checks, the checkpointers' store calls. A
// token is taken for one piece of work and given back when it ends.
type tokens struct {
	ch   chan struct{}
	what string // what a token is for, in the error of a wait that ran out ("catch-up cursors")
}

func newTokens(n int, what string) tokens { return tokens{ch: make(chan struct{}, n), what: what} }

// take waits for a token, bounded by ctx: the error names the pool and wraps ctx.Err().
func (t tokens) take(ctx context.Context) error {
	select {
	case t.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for one of the %d %s: %w", cap(t.ch), t.what, ctx.Err())
	}
}

// give returns a token taken.
func (t tokens) give() { <-t.ch }

// inUse is the number of tokens taken (tests).
func (t tokens) inUse() int { return len(t.ch) }
