package dispatcher

import (
	"fmt"
	"runtime/debug"
)

// panicError is the error of an event whose handler (or Router) panicked. The dispatcher treats it
// like a returned error: Router.Classify decides (a panic is retryable unless its value is an
// error the Router classifies otherwise), and a dead letter records Stack.
type panicError struct {
	// Value is the value passed to panic.
	Value any
	// Stack is the lane goroutine's stack at the recovery (runtime/debug.Stack), which includes
	// the panic site.
	Stack []byte
}

func newPanicError(v any) *panicError { return &panicError{Value: v, Stack: debug.Stack()} }

// Error returns "panic: <value>", without the stack.
func (e *panicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Unwrap returns the panic value when it is an error, so errors.Is/As see through the panic.
func (e *panicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}
