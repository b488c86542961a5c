// Package superclient is the one client of a stream supervisor's public protocol (package
// messages: Start, Stop, Restart, ReleaseLease, AwaitRunning, StatusRequest, OnDemandSnapshot).
// It sends a command to a supervisor's PID as a protoactor request future bounded by the
// caller's context, decodes the reply, and turns a reply of the wrong type, a PID that is gone
// and a timeout into errors callers match with errors.Is. The runtime's Handle and the console
// both use it, so a command is bounded, and its failures read, the same way on both sides.
//
// It runs on the caller's goroutine, never on an actor's: a request blocks until the reply, the
// timeout or the end of ctx.
package superclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/watchtree/watchtree/messages"
)

// DefaultTimeout is how long a request waits for its reply when its ctx has no deadline and the
// Client has no bound of its own (Within).
const DefaultTimeout = 5 * time.Second

// MinTimeout is the least a request waits: a ctx whose deadline is (about to be) reached still
// gets one try, so its error is the request's timeout rather than a zero-length future.
const MinTimeout = time.Millisecond

var (
	// ErrGone is matched by the error of a request to an actor that is not running (its PID is
	// nil, or protoactor answered with a dead letter). The error matches actor.ErrDeadLetter too.
	ErrGone = errors.New("the actor is not running")
	// ErrUnexpectedReply is matched by the error of a request whose reply is not of the type
	// the command is answered with (a StatusReply, or an OnDemandSnapshotReply).
	ErrUnexpectedReply = errors.New("unexpected reply")
)

// Client sends requests on one actor system. The zero value is not usable: call New. A Client
// is a small value, safe for concurrent use.
type Client struct {
	sys   *actor.ActorSystem
	bound time.Duration // 0: DefaultTimeout without a deadline, no cap with one
}

// New returns a Client sending on sys, with no bound of its own (see Timeout).
func New(sys *actor.ActorSystem) Client { return Client{sys: sys} }

// Within returns a copy of c whose requests wait at most d: d replaces DefaultTimeout for a ctx
// without a deadline and caps the time left of one with a deadline. d <= 0 removes the bound.
func (c Client) Within(d time.Duration) Client {
	c.bound = max(d, 0)
	return c
}

// Timeout is how long a request sent now with ctx waits for its reply (the protoactor future's
// timeout):
//   - ctx with a deadline: the time left until it, capped by the Client's bound (Within) when it
//     has one, and at least MinTimeout;
//   - ctx without a deadline: the Client's bound, or DefaultTimeout when it has none.
func (c Client) Timeout(ctx context.Context) time.Duration {
	dl, ok := ctx.Deadline()
	if !ok {
		if c.bound > 0 {
			return c.bound
		}
		return DefaultTimeout
	}
	t := time.Until(dl)
	if c.bound > 0 {
		t = min(t, c.bound)
	}
	return max(t, MinTimeout)
}

// StopBudget is the timeout_ms of a graceful Stop sent now with ctx: nine tenths of
// Timeout(ctx), in whole milliseconds, at least 1. The supervisor ends its stop sequence within
// that budget and replies with the report naming the step that held it up, so the reply arrives
// before the request itself times out (a tenth of the time is left for the reply's trip).
func (c Client) StopBudget(ctx context.Context) int64 {
	return max(c.Timeout(ctx).Milliseconds()*9/10, 1)
}

// Request sends msg to pid as a protoactor request future and waits for the reply, at most
// Timeout(ctx) and no longer than ctx. It is the transport of every command below; it takes any
// message, so it also serves a request to an actor that is not a supervisor. Errors:
//   - ctx already over, or ending first: an error matching ctx.Err() (context.Canceled or
//     context.DeadlineExceeded); the future is ended at once, so nothing waits for it;
//   - no reply within Timeout(ctx): "no answer within <timeout>", matching
//     context.DeadlineExceeded;
//   - pid nil, or an actor that is gone (protoactor's dead letter): an error matching ErrGone
//     and actor.ErrDeadLetter.
func (c Client) Request(ctx context.Context, pid *actor.PID, msg any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if pid == nil {
		return nil, goneError{}
	}
	timeout := c.Timeout(ctx)
	fut := c.sys.Root.RequestFuture(pid, msg, timeout)
	// A protoactor future has no channel: wait for it on a goroutine, so that the end of ctx
	// returns now. That goroutine ends with the future, which is stopped when ctx ends first.
	type result struct {
		res any
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := fut.Result()
		done <- result{res, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		select {
		case r = <-done: // the reply and the end of ctx crossed: keep the reply
		default:
			c.sys.Root.Stop(fut.PID()) // completes the future empty: its goroutine returns
			<-done
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, &timeoutError{timeout: timeout}
			}
			return nil, ctx.Err()
		}
	}
	switch {
	case errors.Is(r.err, actor.ErrTimeout):
		return nil, &timeoutError{timeout: timeout}
	case errors.Is(r.err, actor.ErrDeadLetter):
		return nil, goneError{pid: pid.GetId()}
	case r.err != nil:
		return nil, r.err
	}
	return r.res, nil
}

// Ask sends a supervisor command answered with a StatusReply (Start, Stop, Restart,
// ReleaseLease, AwaitRunning, StatusRequest) and returns the reply. Its errors are Request's,
// and one matching ErrUnexpectedReply for a reply of another type.
func (c Client) Ask(ctx context.Context, pid *actor.PID, msg proto.Message) (*messages.StatusReply, error) {
	return expect[*messages.StatusReply](c.Request(ctx, pid, msg))
}

// Status asks for the supervisor's status (StatusRequest).
func (c Client) Status(ctx context.Context, pid *actor.PID) (*messages.StatusReply, error) {
	return c.Ask(ctx, pid, &messages.StatusRequest{})
}

// AwaitRunning returns the status once the stream has left starting and backoff
// (AwaitRunning): running, standby, stopped or crashed. ctx bounds the wait, as for Request.
func (c Client) AwaitRunning(ctx context.Context, pid *actor.PID) (*messages.StatusReply, error) {
	return c.Ask(ctx, pid, &messages.AwaitRunning{})
}

// GracefulStop is the graceful Stop to send now with ctx: reason, and StopBudget(ctx) as its
// timeout_ms.
func (c Client) GracefulStop(ctx context.Context, reason string) *messages.Stop {
	return &messages.Stop{Reason: reason, Graceful: true, TimeoutMs: c.StopBudget(ctx)}
}

// Stop runs the supervisor's graceful stop sequence (GracefulStop) and returns the status it
// replies with once the sequence ended; its LastStop says how the stop went.
func (c Client) Stop(ctx context.Context, pid *actor.PID, reason string) (*messages.StatusReply, error) {
	return c.Ask(ctx, pid, c.GracefulStop(ctx, reason))
}

// OnDemandSnapshot asks for an on-demand snapshot with the given id over the documents filter
// matches (a BSON document; nil: every document) and returns the supervisor's answer: accepted
// when its code is empty. Its errors are Request's, and one matching ErrUnexpectedReply for a
// reply that is not an OnDemandSnapshotReply.
func (c Client) OnDemandSnapshot(ctx context.Context, pid *actor.PID, id string, filter []byte) (*messages.OnDemandSnapshotReply, error) {
	return expect[*messages.OnDemandSnapshotReply](c.Request(ctx, pid, &messages.OnDemandSnapshot{SnapshotId: id, Filter: filter}))
}

// AwaitCaughtUp asks for a CaughtUpReply once every event at or before ct has settled (or the
// stream cannot get there on this instance). Its errors are Request's, and one matching
// ErrUnexpectedReply for a reply that is not a CaughtUpReply.
func (c Client) AwaitCaughtUp(ctx context.Context, pid *actor.PID, ct *messages.ClusterTime) (*messages.CaughtUpReply, error) {
	return expect[*messages.CaughtUpReply](c.Request(ctx, pid, &messages.AwaitCaughtUp{ClusterTime: ct}))
}

// expect returns res as a T.
func expect[T any](res any, err error) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	r, ok := res.(T)
	if !ok {
		return zero, fmt.Errorf("%w %T, want %T", ErrUnexpectedReply, res, zero)
	}
	return r, nil
}

// timeoutError is a request that got no reply in time.
type timeoutError struct{ timeout time.Duration }

func (e *timeoutError) Error() string {
	return fmt.Sprintf("no answer within %v: %v", e.timeout.Round(time.Millisecond), context.DeadlineExceeded)
}

func (e *timeoutError) Unwrap() error { return context.DeadlineExceeded }

// goneError is a request to an actor that is not running (pid "": none was given).
type goneError struct{ pid string }

func (e goneError) Error() string {
	if e.pid == "" {
		return ErrGone.Error() + " (no PID)"
	}
	return ErrGone.Error() + " (dead letter to " + e.pid + ")"
}

func (e goneError) Unwrap() []error { return []error{ErrGone, actor.ErrDeadLetter} }
