package watchtree

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/watchtree/watchtree/actors/checkpointer"
	"github.com/watchtree/watchtree/actors/dispatcher"
	"github.com/watchtree/watchtree/actors/leader"
	"github.com/watchtree/watchtree/actors/snapshot"
	"github.com/watchtree/watchtree/actors/supervisor"
	"github.com/watchtree/watchtree/configerr"
)

// The retry, restart and checkpoint policies, StartPosition and HistoryLostPolicy are defined,
// defaulted and validated once, in package policy, and tested there. This file tests what the
// root adds: DeadLetterPolicy, and that the root's names are those definitions.

func TestDeadLetterPolicyDefaults(t *testing.T) {
	if got, want := (DeadLetterPolicy{}).withDefaults(), (DeadLetterPolicy{Collection: "_wt_dead_letters", Retention: 14 * 24 * time.Hour}); got != want {
		t.Errorf("DeadLetterPolicy defaults = %+v, want %+v", got, want)
	}
	set := DeadLetterPolicy{Disabled: true, Collection: "dlq", Retention: time.Hour}
	if got := set.withDefaults(); got != set {
		t.Errorf("withDefaults changed set fields: %+v", got)
	}
}

// validationCase is one row of the policy validation tables: the error messages wanted, in
// order; none means valid.
type validationCase struct {
	name string
	err  error
	want []string
}

func checkValidation(t *testing.T, tests []validationCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := configErrorsOf(t, tt.err)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d errors %q, want %d %q", len(got), errorStrings(got), len(tt.want), tt.want)
			}
			for i, ce := range got {
				if ce.Error() != tt.want[i] {
					t.Errorf("error %d = %q, want %q", i, ce.Error(), tt.want[i])
				}
			}
			if tt.err != nil && !errors.Is(tt.err, ErrInvalidConfig) {
				t.Errorf("error does not match ErrInvalidConfig")
			}
		})
	}
}

// configErrorsOf flattens a joined validation error into its *ConfigError values, failing the
// test on anything else.
func configErrorsOf(t *testing.T, err error) []*ConfigError {
	t.Helper()
	if err == nil {
		return nil
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	out := make([]*ConfigError, 0, len(errs))
	for _, e := range errs {
		ce, ok := e.(*ConfigError)
		if !ok {
			t.Fatalf("not a *ConfigError: %T %v", e, e)
		}
		out = append(out, ce)
	}
	return out
}

func errorStrings(errs []*ConfigError) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}

func TestDeadLetterPolicyValidate(t *testing.T) {
	checkValidation(t, []validationCase{
		{"zero value", DeadLetterPolicy{}.Validate(), nil},
		{"disabled", DeadLetterPolicy{Disabled: true}.Validate(), nil},
		{"custom", DeadLetterPolicy{Collection: "dlq.orders", Retention: time.Hour}.Validate(), nil},
		{"dollar", DeadLetterPolicy{Collection: "a$b"}.Validate(),
			[]string{`watchtree: DeadLetterPolicy.Collection must not contain '$' or NUL, got "a$b"`}},
		{"NUL", DeadLetterPolicy{Collection: "a\x00"}.Validate(),
			[]string{`watchtree: DeadLetterPolicy.Collection must not contain '$' or NUL, got "a\x00"`}},
		{"system", DeadLetterPolicy{Collection: "system.dlq"}.Validate(),
			[]string{`watchtree: DeadLetterPolicy.Collection must not start with "system.", got "system.dlq"`}},
		{"too long", DeadLetterPolicy{Collection: strings.Repeat("x", 256)}.Validate(),
			[]string{`watchtree: DeadLetterPolicy.Collection must be at most 255 bytes, got "` + strings.Repeat("x", 256) + `"`}},
		{"negative retention", DeadLetterPolicy{Retention: -time.Hour}.Validate(),
			[]string{"watchtree: DeadLetterPolicy.Retention must be > 0 (0 means the default 336h0m0s), got -1h0m0s"}},
	})
}

// TestOneDefinitionPerPolicy: the policies the actors take in their Config are the root's types
// (aliases of package policy's), so the assignments below compile only while that holds. ConfigError
// and ErrInvalidConfig are package configerr's, which the policies' validators use, so a policy
// validated anywhere matches the root's type and sentinel.
func TestOneDefinitionPerPolicy(t *testing.T) {
	var (
		_ RetryPolicy      = dispatcher.Config{}.Retry
		_ RestartPolicy    = supervisor.Config{}.Policy
		_ CheckpointPolicy = checkpointer.Config{}.Checkpoint
		_ LeasePolicy      = leader.Config{}.Policy
		_ SnapshotPolicy   = snapshot.Config{}.Policy
		_ SnapshotPolicy   = checkpointer.Config{}.Snapshot
		_ *configerr.Error = (*ConfigError)(nil)
	)
	if ErrInvalidConfig != configerr.ErrInvalid {
		t.Fatal("ErrInvalidConfig is not configerr.ErrInvalid")
	}
	// An actor's own validation of a policy yields the root's error type and sentinel.
	_, err := dispatcher.New(dispatcher.Config{Stream: "s", Router: stubRouter{}, Retry: RetryPolicy{Multiplier: 0.5}})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "Config.Retry.Multiplier" || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("dispatcher.New with an invalid Retry = %v, want a *watchtree.ConfigError on Config.Retry.Multiplier", err)
	}
}

// stubRouter satisfies dispatcher.Router for a Config that is only validated.
type stubRouter struct{ dispatcher.Router }

// TestPolicyErrorsNameTheirPath: a policy validated on its own names its fields after the root's
// type; inside a Stream, after the Stream field, with the stream's name. Every error is a
// *ConfigError matching ErrInvalidConfig.
func TestPolicyErrorsNameTheirPath(t *testing.T) {
	alone := []struct {
		err   error
		field string
	}{
		{RetryPolicy{Multiplier: 0.5}.Validate(), "RetryPolicy.Multiplier"},
		{RestartPolicy{MaxAttempts: -1}.Validate(), "RestartPolicy.MaxAttempts"},
		{CheckpointPolicy{SaveEvery: -1}.Validate(), "CheckpointPolicy.SaveEvery"},
		{At(time.Time{}).Validate(), "StartPosition"},
		{Rebuild(nil).Validate(), "HistoryLostPolicy"},
		{DeadLetterPolicy{Retention: -1}.Validate(), "DeadLetterPolicy.Retention"},
	}
	for _, tt := range alone {
		var ce *ConfigError
		if !errors.As(tt.err, &ce) || ce.Field != tt.field || ce.Stream != "" || !errors.Is(tt.err, ErrInvalidConfig) {
			t.Errorf("%v: want a *ConfigError on %s matching ErrInvalidConfig", tt.err, tt.field)
		}
	}

	inStream := []struct {
		mutate func(*Stream[testOrder])
		field  string
	}{
		{func(s *Stream[testOrder]) { s.Retry.MaxAttempts = -1 }, "Retry.MaxAttempts"},
		{func(s *Stream[testOrder]) { s.Retry.InitialDelay = -1 }, "Retry.InitialDelay"},
		{func(s *Stream[testOrder]) { s.Retry.MaxDelay = -1 }, "Retry.MaxDelay"},
		{func(s *Stream[testOrder]) { s.Retry.Multiplier = 0.5 }, "Retry.Multiplier"},
		{func(s *Stream[testOrder]) { s.Restart.MaxAttempts = -1 }, "Restart.MaxAttempts"},
		{func(s *Stream[testOrder]) { s.Restart.InitialDelay = -1 }, "Restart.InitialDelay"},
		{func(s *Stream[testOrder]) { s.Restart.MaxDelay = -1 }, "Restart.MaxDelay"},
		{func(s *Stream[testOrder]) { s.Restart.Multiplier = 0.5 }, "Restart.Multiplier"},
		{func(s *Stream[testOrder]) { s.Checkpoint.SaveEvery = -1 }, "Checkpoint.SaveEvery"},
		{func(s *Stream[testOrder]) { s.Checkpoint.SaveInterval = -1 }, "Checkpoint.SaveInterval"},
		{func(s *Stream[testOrder]) { s.Checkpoint.IdleInterval = -1 }, "Checkpoint.IdleInterval"},
		{func(s *Stream[testOrder]) { s.Checkpoint.MaxUnflushed = -1 }, "Checkpoint.MaxUnflushed"},
		{func(s *Stream[testOrder]) { s.StartPosition = At(time.Time{}) }, "StartPosition"},
		{func(s *Stream[testOrder]) { s.OnHistoryLost = Rebuild(nil) }, "OnHistoryLost"},
		{func(s *Stream[testOrder]) { s.DeadLetter.Retention = -1 }, "DeadLetter.Retention"},
	}
	for _, tt := range inStream {
		s := validStream()
		tt.mutate(&s)
		err := s.Validate()
		got := configErrorsOf(t, err)
		if len(got) != 1 || got[0].Field != tt.field || got[0].Stream != "orders" || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate() = %v, want one *ConfigError on that field of stream orders", tt.field, err)
		}
	}
}
