package storetest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/store"
)

// caseTimeout bounds every store call a case makes, so a hanging store fails the case.
const caseTimeout = 20 * time.Second

// testCtx returns a context cancelled after caseTimeout or when the test ends.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	t.Cleanup(cancel)
	return ctx
}

// baseTime is a fixed instant, already at millisecond precision, for records of cases that do
// not depend on the store's clock.
var baseTime = time.Date(2026, 3, 14, 15, 9, 26, 535_000_000, time.UTC)

// token returns a resume-token document {_data: data}.
func token(data string) bson.Raw {
	b, err := bson.Marshal(bson.D{{Key: "_data", Value: data}})
	if err != nil {
		panic(err)
	}
	return b
}

// doc returns the raw BSON of d.
func doc(d bson.D) bson.Raw {
	b, err := bson.Marshal(d)
	if err != nil {
		panic(err)
	}
	return b
}

// differ collects field mismatches between two records.
type differ struct{ diffs []string }

func (d *differ) str(name, want, got string) {
	if want != got {
		d.diffs = append(d.diffs, fmt.Sprintf("%s: want %q, got %q", name, want, got))
	}
}

func (d *differ) num(name string, want, got int64) {
	if want != got {
		d.diffs = append(d.diffs, fmt.Sprintf("%s: want %d, got %d", name, want, got))
	}
}

func (d *differ) raw(name string, want, got bson.Raw) {
	if !bytes.Equal(want, got) {
		d.diffs = append(d.diffs, fmt.Sprintf("%s: want %v, got %v", name, want, got))
	}
}

func (d *differ) ts(name string, want, got bson.Timestamp) {
	if want != got {
		d.diffs = append(d.diffs, fmt.Sprintf("%s: want %v, got %v", name, want, got))
	}
}

func (d *differ) time(name string, want, got time.Time) {
	if !want.Equal(got) || want.IsZero() != got.IsZero() {
		d.diffs = append(d.diffs, fmt.Sprintf("%s: want %v, got %v", name, want, got))
	}
}

func (d *differ) String() string { return strings.Join(d.diffs, "; ") }

func diffCheckpoint(want, got store.Checkpoint) string {
	var d differ
	d.str("Stream", want.Stream, got.Stream)
	d.str("Instance", want.Instance, got.Instance)
	d.raw("Token", want.Token, got.Token)
	d.ts("ClusterTime", want.ClusterTime, got.ClusterTime)
	d.str("Source", want.Source, got.Source)
	d.num("Epoch", want.Epoch, got.Epoch)
	d.str("Owner", want.Owner, got.Owner)
	d.num("Settled", int64(want.Settled), int64(got.Settled))
	d.time("UpdatedAt", want.UpdatedAt, got.UpdatedAt)
	d.time("ExpiresAt", want.ExpiresAt, got.ExpiresAt)
	return d.String()
}

func diffGap(want, got store.Gap) string {
	var d differ
	d.str("ID", want.ID, got.ID)
	d.str("Stream", want.Stream, got.Stream)
	d.str("Instance", want.Instance, got.Instance)
	d.raw("FromToken", want.FromToken, got.FromToken)
	d.ts("FromTime", want.FromTime, got.FromTime)
	d.raw("ToToken", want.ToToken, got.ToToken)
	d.ts("ToTime", want.ToTime, got.ToTime)
	d.str("Policy", want.Policy, got.Policy)
	d.str("Reason", want.Reason, got.Reason)
	d.time("At", want.At, got.At)
	return d.String()
}

func diffDeadLetter(want, got store.DeadLetter) string {
	var d differ
	d.str("ID", want.ID, got.ID)
	d.str("Stream", want.Stream, got.Stream)
	d.str("Instance", want.Instance, got.Instance)
	d.raw("Token", want.Token, got.Token)
	d.str("OperationType", want.OperationType, got.OperationType)
	d.raw("DocumentKey", want.DocumentKey, got.DocumentKey)
	d.str("Namespace", want.Namespace, got.Namespace)
	d.raw("Event", want.Event, got.Event)
	if want.EventOmitted != got.EventOmitted {
		d.diffs = append(d.diffs, fmt.Sprintf("EventOmitted: want %v, got %v", want.EventOmitted, got.EventOmitted))
	}
	d.str("Error", want.Error, got.Error)
	d.str("ErrorType", want.ErrorType, got.ErrorType)
	d.str("Stack", want.Stack, got.Stack)
	d.num("Attempts", int64(want.Attempts), int64(got.Attempts))
	d.time("FirstAttemptAt", want.FirstAttemptAt, got.FirstAttemptAt)
	d.time("LastAttemptAt", want.LastAttemptAt, got.LastAttemptAt)
	d.time("CreatedAt", want.CreatedAt, got.CreatedAt)
	d.time("ExpiresAt", want.ExpiresAt, got.ExpiresAt)
	d.num("ReplayCount", int64(want.ReplayCount), int64(got.ReplayCount))
	d.time("LastReplayAt", want.LastReplayAt, got.LastReplayAt)
	return d.String()
}

// cancelledCtx returns an already-cancelled context.
func cancelledCtx() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// expiredCtx returns a context whose deadline has already passed.
func expiredCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	t.Cleanup(cancel)
	return ctx
}

// promptly fails the test if f takes longer than a second: a call on a done context must not
// wait for the network.
func promptly(t *testing.T, what string, f func() error) error {
	t.Helper()
	start := time.Now()
	err := f()
	if d := time.Since(start); d > time.Second {
		t.Errorf("%s on a done context took %s, want well under 1s", what, d)
	}
	return err
}

// timeMs returns n milliseconds.
func timeMs[N ~int | ~int64 | ~uint64](n N) time.Duration { return time.Duration(n) * time.Millisecond }

// sh returns the shared scope of stream (no instance).
func sh(stream string) store.Scope { return store.Scope{Stream: stream} }

// inst returns the scope of stream's instance.
func inst(stream, instance string) store.Scope {
	return store.Scope{Stream: stream, Instance: instance}
}
