package watchtree

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func constRand(v float64) func() float64 { return func() float64 { return v } }

func TestRetryPolicyDelay(t *testing.T) {
	noJitter := RetryPolicy{DisableJitter: true}
	tests := []struct {
		name    string
		p       RetryPolicy
		attempt int
		rnd     func() float64
		want    time.Duration
	}{
		{"default attempt 1", noJitter, 1, nil, 500 * time.Millisecond},
		{"default attempt 2", noJitter, 2, nil, time.Second},
		{"default attempt 3", noJitter, 3, nil, 2 * time.Second},
		{"default attempt 4", noJitter, 4, nil, 4 * time.Second},
		{"default attempt 5", noJitter, 5, nil, 8 * time.Second},
		{"default attempt 6", noJitter, 6, nil, 16 * time.Second},
		{"default attempt 7 capped", noJitter, 7, nil, 30 * time.Second},
		{"default attempt 8 capped", noJitter, 8, nil, 30 * time.Second},
		{"attempt 0 counts as 1", noJitter, 0, nil, 500 * time.Millisecond},
		{"negative attempt counts as 1", noJitter, -5, nil, 500 * time.Millisecond},
		{"huge attempt saturates", noJitter, 1 << 30, nil, 30 * time.Second},
		{"multiplier 1 is constant", RetryPolicy{Multiplier: 1, DisableJitter: true}, 9, nil, 500 * time.Millisecond},
		{"custom", RetryPolicy{InitialDelay: 100 * time.Millisecond, MaxDelay: time.Second, Multiplier: 3, DisableJitter: true}, 3, nil, 900 * time.Millisecond},
		{"custom capped", RetryPolicy{InitialDelay: 100 * time.Millisecond, MaxDelay: time.Second, Multiplier: 3, DisableJitter: true}, 4, nil, time.Second},
		{"max delay near MaxInt64 does not overflow", RetryPolicy{InitialDelay: time.Second, MaxDelay: math.MaxInt64, DisableJitter: true}, 1000, nil, math.MaxInt64},
		{"jitter on by default, low end", RetryPolicy{}, 1, constRand(0), 400 * time.Millisecond},
		{"jitter middle", RetryPolicy{}, 2, constRand(0.5), time.Second},
		{"jitter high end", RetryPolicy{}, 3, constRand(1), 2400 * time.Millisecond},
		{"jitter applies after the cap", RetryPolicy{}, 20, constRand(1), 36 * time.Second},
		{"jitter floored at 1ms", RetryPolicy{InitialDelay: time.Microsecond}, 1, constRand(0), time.Millisecond},
		{"out-of-range rnd clamped high", RetryPolicy{}, 1, constRand(7), 600 * time.Millisecond},
		{"out-of-range rnd clamped low", RetryPolicy{}, 1, constRand(-1), 400 * time.Millisecond},
		{"NaN rnd treated as 0", RetryPolicy{}, 1, constRand(math.NaN()), 400 * time.Millisecond},
		{"DisableJitter ignores rnd", noJitter, 1, constRand(0), 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Delay(tt.attempt, tt.rnd); got != tt.want {
				t.Fatalf("Delay(%d) = %v, want %v", tt.attempt, got, tt.want)
			}
		})
	}
}

func TestRestartPolicyDelay(t *testing.T) {
	tests := []struct {
		name    string
		p       RestartPolicy
		attempt int
		rnd     func() float64
		want    time.Duration
	}{
		{"default 1", RestartPolicy{}, 1, nil, time.Second},
		{"default 2", RestartPolicy{}, 2, nil, 2 * time.Second},
		{"default 3", RestartPolicy{}, 3, nil, 4 * time.Second},
		{"default 4", RestartPolicy{}, 4, nil, 8 * time.Second},
		{"default 5", RestartPolicy{}, 5, nil, 16 * time.Second},
		{"default 6", RestartPolicy{}, 6, nil, 32 * time.Second},
		{"default 7 capped", RestartPolicy{}, 7, nil, 60 * time.Second},
		{"default 30 capped", RestartPolicy{}, 30, nil, 60 * time.Second},
		{"no jitter by default: rnd ignored", RestartPolicy{}, 1, constRand(0), time.Second},
		{"jitter low", RestartPolicy{Jitter: true}, 1, constRand(0), 800 * time.Millisecond},
		{"jitter high", RestartPolicy{Jitter: true}, 7, constRand(1), 72 * time.Second},
		{"jitter floor 1ms", RestartPolicy{Jitter: true, InitialDelay: time.Nanosecond}, 1, constRand(0), time.Millisecond},
		{"no floor without jitter", RestartPolicy{InitialDelay: time.Nanosecond}, 1, nil, time.Nanosecond},
		{"custom", RestartPolicy{InitialDelay: 250 * time.Millisecond, MaxDelay: 5 * time.Second, Multiplier: 1.5}, 3, nil, 562500 * time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Delay(tt.attempt, tt.rnd); got != tt.want {
				t.Fatalf("Delay(%d) = %v, want %v", tt.attempt, got, tt.want)
			}
		})
	}
}

// TestJitterBounds samples the default random source: every jittered delay lies in
// [0.8, 1.2] × the base delay, and both halves of the range are hit.
func TestJitterBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	policies := []struct {
		name  string
		delay func(n int) time.Duration
		base  func(n int) time.Duration
	}{
		{"retry", func(n int) time.Duration { return RetryPolicy{}.Delay(n, r.Float64) },
			func(n int) time.Duration { return RetryPolicy{DisableJitter: true}.Delay(n, nil) }},
		{"restart", func(n int) time.Duration { return RestartPolicy{Jitter: true}.Delay(n, r.Float64) },
			func(n int) time.Duration { return RestartPolicy{}.Delay(n, nil) }},
		{"retry, global source", func(n int) time.Duration { return RetryPolicy{}.Delay(n, nil) },
			func(n int) time.Duration { return RetryPolicy{DisableJitter: true}.Delay(n, nil) }},
	}
	for _, p := range policies {
		t.Run(p.name, func(t *testing.T) {
			var below, above bool
			for i := range 5000 {
				n := i%9 + 1
				got, base := p.delay(n), p.base(n)
				lo, hi := time.Duration(float64(base)*0.8), time.Duration(float64(base)*1.2)
				if got < lo || got > hi {
					t.Fatalf("attempt %d: %v outside [%v, %v]", n, got, lo, hi)
				}
				below = below || got < base
				above = above || got > base
			}
			if !below || !above {
				t.Fatalf("jitter never went below (%v) or above (%v) the base", below, above)
			}
		})
	}
}

func TestPolicyDefaults(t *testing.T) {
	if got, want := (RetryPolicy{}).withDefaults(), (RetryPolicy{MaxAttempts: 3, InitialDelay: 500 * time.Millisecond, MaxDelay: 30 * time.Second, Multiplier: 2}); got != want {
		t.Errorf("RetryPolicy defaults = %+v, want %+v", got, want)
	}
	if got, want := (RestartPolicy{}).withDefaults(), (RestartPolicy{MaxAttempts: 0, InitialDelay: time.Second, MaxDelay: 60 * time.Second, Multiplier: 2}); got != want {
		t.Errorf("RestartPolicy defaults = %+v, want %+v", got, want)
	}
	if got, want := (CheckpointPolicy{}).withDefaults(), (CheckpointPolicy{SaveEvery: 100, SaveInterval: time.Second, IdleInterval: 5 * time.Minute, MaxUnflushed: 10000}); got != want {
		t.Errorf("CheckpointPolicy defaults = %+v, want %+v", got, want)
	}
	if got, want := (CheckpointPolicy{SaveEvery: 7}).withDefaults().MaxUnflushed, 700; got != want {
		t.Errorf("MaxUnflushed default for SaveEvery 7 = %d, want %d", got, want)
	}
	if got := (CheckpointPolicy{SaveEvery: math.MaxInt / 2}).withDefaults().MaxUnflushed; got != math.MaxInt {
		t.Errorf("MaxUnflushed default must saturate, got %d", got)
	}
	if got, want := (DeadLetterPolicy{}).withDefaults(), (DeadLetterPolicy{Collection: "_wt_dead_letters", Retention: 14 * 24 * time.Hour}); got != want {
		t.Errorf("DeadLetterPolicy defaults = %+v, want %+v", got, want)
	}
	// Set fields are kept.
	set := RetryPolicy{MaxAttempts: 1, InitialDelay: 1, MaxDelay: 2, Multiplier: 1.5, DisableJitter: true}
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

func TestRetryPolicyValidate(t *testing.T) {
	checkValidation(t, []validationCase{
		{"zero value", RetryPolicy{}.Validate(), nil},
		{"all set", RetryPolicy{MaxAttempts: 1, InitialDelay: time.Second, MaxDelay: time.Second, Multiplier: 1}.Validate(), nil},
		{"negative attempts", RetryPolicy{MaxAttempts: -1}.Validate(),
			[]string{"watchtree: RetryPolicy.MaxAttempts must be >= 1 (0 means the default 3), got -1"}},
		{"negative initial", RetryPolicy{InitialDelay: -time.Second}.Validate(),
			[]string{"watchtree: RetryPolicy.InitialDelay must be > 0 (0 means the default 500ms), got -1s"}},
		{"negative max", RetryPolicy{MaxDelay: -1}.Validate(),
			[]string{"watchtree: RetryPolicy.MaxDelay must be > 0 (0 means the default 30s), got -1ns"}},
		{"NaN multiplier", RetryPolicy{Multiplier: math.NaN()}.Validate(),
			[]string{"watchtree: RetryPolicy.Multiplier must be finite and >= 1, got NaN"}},
		{"+Inf multiplier", RetryPolicy{Multiplier: math.Inf(1)}.Validate(),
			[]string{"watchtree: RetryPolicy.Multiplier must be finite and >= 1, got +Inf"}},
		{"multiplier below 1", RetryPolicy{Multiplier: 0.5}.Validate(),
			[]string{"watchtree: RetryPolicy.Multiplier must be finite and >= 1, got 0.5"}},
		{"negative multiplier", RetryPolicy{Multiplier: -2}.Validate(),
			[]string{"watchtree: RetryPolicy.Multiplier must be finite and >= 1, got -2"}},
		{"max below initial", RetryPolicy{InitialDelay: 2 * time.Second, MaxDelay: time.Second}.Validate(),
			[]string{"watchtree: RetryPolicy.MaxDelay must be >= InitialDelay (2s), got 1s"}},
		{"default max below initial", RetryPolicy{InitialDelay: time.Minute}.Validate(),
			[]string{"watchtree: RetryPolicy.MaxDelay must be >= InitialDelay (1m0s), got 30s (the default)"}},
		{"several at once", RetryPolicy{MaxAttempts: -3, Multiplier: math.Inf(-1)}.Validate(),
			[]string{"watchtree: RetryPolicy.MaxAttempts must be >= 1 (0 means the default 3), got -3",
				"watchtree: RetryPolicy.Multiplier must be finite and >= 1, got -Inf"}},
	})
}

func TestRestartPolicyValidate(t *testing.T) {
	checkValidation(t, []validationCase{
		{"zero value", RestartPolicy{}.Validate(), nil},
		{"unlimited and jitter", RestartPolicy{MaxAttempts: 30, Jitter: true}.Validate(), nil},
		{"negative attempts", RestartPolicy{MaxAttempts: -1}.Validate(),
			[]string{"watchtree: RestartPolicy.MaxAttempts must be >= 0 (0 means unlimited), got -1"}},
		{"negative initial", RestartPolicy{InitialDelay: -time.Millisecond}.Validate(),
			[]string{"watchtree: RestartPolicy.InitialDelay must be > 0 (0 means the default 1s), got -1ms"}},
		{"negative max", RestartPolicy{MaxDelay: -time.Minute}.Validate(),
			[]string{"watchtree: RestartPolicy.MaxDelay must be > 0 (0 means the default 1m0s), got -1m0s"}},
		{"NaN multiplier", RestartPolicy{Multiplier: math.NaN()}.Validate(),
			[]string{"watchtree: RestartPolicy.Multiplier must be finite and >= 1, got NaN"}},
		{"multiplier 0.99", RestartPolicy{Multiplier: 0.99}.Validate(),
			[]string{"watchtree: RestartPolicy.Multiplier must be finite and >= 1, got 0.99"}},
		{"max below initial", RestartPolicy{InitialDelay: 2 * time.Minute}.Validate(),
			[]string{"watchtree: RestartPolicy.MaxDelay must be >= InitialDelay (2m0s), got 1m0s (the default)"}},
		{"invalid delay skips the cross check", RestartPolicy{InitialDelay: -1, MaxDelay: -2}.Validate(),
			[]string{"watchtree: RestartPolicy.InitialDelay must be > 0 (0 means the default 1s), got -1ns",
				"watchtree: RestartPolicy.MaxDelay must be > 0 (0 means the default 1m0s), got -2ns"}},
	})
}

func TestCheckpointPolicyValidate(t *testing.T) {
	checkValidation(t, []validationCase{
		{"zero value", CheckpointPolicy{}.Validate(), nil},
		{"all set", CheckpointPolicy{SaveEvery: 1, SaveInterval: time.Millisecond, MaxUnflushed: 1}.Validate(), nil},
		{"negative SaveEvery", CheckpointPolicy{SaveEvery: -1}.Validate(),
			[]string{"watchtree: CheckpointPolicy.SaveEvery must be >= 1 (0 means the default 100), got -1"}},
		{"negative SaveInterval", CheckpointPolicy{SaveInterval: -time.Second}.Validate(),
			[]string{"watchtree: CheckpointPolicy.SaveInterval must be > 0 (0 means the default 1s), got -1s"}},
		{"negative IdleInterval", CheckpointPolicy{IdleInterval: -time.Second}.Validate(),
			[]string{"watchtree: CheckpointPolicy.IdleInterval must be > 0 (0 means the default 5m0s), got -1s"}},
		{"negative MaxUnflushed", CheckpointPolicy{MaxUnflushed: -1}.Validate(),
			[]string{"watchtree: CheckpointPolicy.MaxUnflushed must be >= SaveEvery (0 means the default 100 × SaveEvery), got -1"}},
		{"MaxUnflushed below default SaveEvery", CheckpointPolicy{MaxUnflushed: 50}.Validate(),
			[]string{"watchtree: CheckpointPolicy.MaxUnflushed must be >= SaveEvery (100), got 50"}},
		{"MaxUnflushed below SaveEvery", CheckpointPolicy{SaveEvery: 10, MaxUnflushed: 9}.Validate(),
			[]string{"watchtree: CheckpointPolicy.MaxUnflushed must be >= SaveEvery (10), got 9"}},
	})
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
