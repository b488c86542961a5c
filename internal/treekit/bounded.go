package treekit

import (
	"context"
	"time"
)

// Bounded runs call with ctx cut short after d: a store or server that does not answer fails
// the call instead of holding the goroutine that made it. A call with results assigns them
// from the closure.
func Bounded(ctx context.Context, d time.Duration, call func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return call(ctx)
}
