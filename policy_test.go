package watchtree

import (
	"errors"
	"strings"
	"testing"
	"time"
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
