package policy

import (
	"context"
	"errors"
	"github.com/watchtree/watchtree/internal/configcheck"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/watchtree/watchtree/configerr"
)

func constRand(v float64) func() float64 { return func() float64 { return v } }

func TestRetryDelay(t *testing.T) {
	noJitter := Retry{DisableJitter: true}
	tests := []struct {
		name    string
		p       Retry
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
		{"multiplier 1 is constant", Retry{Multiplier: 1, DisableJitter: true}, 9, nil, 500 * time.Millisecond},
		{"custom", Retry{InitialDelay: 100 * time.Millisecond, MaxDelay: time.Second, Multiplier: 3, DisableJitter: true}, 3, nil, 900 * time.Millisecond},
		{"custom capped", Retry{InitialDelay: 100 * time.Millisecond, MaxDelay: time.Second, Multiplier: 3, DisableJitter: true}, 4, nil, time.Second},
		{"max delay near MaxInt64 does not overflow", Retry{InitialDelay: time.Second, MaxDelay: math.MaxInt64, DisableJitter: true}, 1000, nil, math.MaxInt64},
		{"jitter on by default, low end", Retry{}, 1, constRand(0), 400 * time.Millisecond},
		{"jitter middle", Retry{}, 2, constRand(0.5), time.Second},
		{"jitter high end", Retry{}, 3, constRand(1), 2400 * time.Millisecond},
		{"jitter applies after the cap", Retry{}, 20, constRand(1), 36 * time.Second},
		{"jitter floored at 1ms", Retry{InitialDelay: time.Microsecond}, 1, constRand(0), time.Millisecond},
		{"jitter floor even above the factor", Retry{InitialDelay: time.Nanosecond}, 1, constRand(1), time.Millisecond},
		{"out-of-range rnd clamped high", Retry{}, 1, constRand(7), 600 * time.Millisecond},
		{"out-of-range rnd clamped low", Retry{}, 1, constRand(-1), 400 * time.Millisecond},
		{"NaN rnd treated as 0", Retry{}, 1, constRand(math.NaN()), 400 * time.Millisecond},
		{"DisableJitter ignores rnd", noJitter, 1, constRand(0), 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := delayOf(tt.p, tt.attempt, tt.rnd); got != tt.want {
				t.Fatalf("delayOf(%d) = %v, want %v", tt.attempt, got, tt.want)
			}
		})
	}
}

func TestRestartDelay(t *testing.T) {
	tests := []struct {
		name    string
		p       Restart
		attempt int
		rnd     func() float64
		want    time.Duration
	}{
		{"default 1", Restart{}, 1, nil, time.Second},
		{"default 2", Restart{}, 2, nil, 2 * time.Second},
		{"default 3", Restart{}, 3, nil, 4 * time.Second},
		{"default 4", Restart{}, 4, nil, 8 * time.Second},
		{"default 5", Restart{}, 5, nil, 16 * time.Second},
		{"default 6", Restart{}, 6, nil, 32 * time.Second},
		{"default 7 capped", Restart{}, 7, nil, 60 * time.Second},
		{"default 30 capped", Restart{}, 30, nil, 60 * time.Second},
		{"attempt 0 counts as 1", Restart{}, 0, nil, time.Second},
		{"MaxInt32 attempts do not overflow", Restart{}, math.MaxInt32, nil, 60 * time.Second},
		{"product past MaxInt64 saturates", Restart{InitialDelay: math.MaxInt64 / 2, MaxDelay: math.MaxInt64}, 10, nil, math.MaxInt64},
		{"MaxDelay below InitialDelay caps the first delay", Restart{InitialDelay: 5 * time.Second, MaxDelay: 2 * time.Second}, 1, nil, 2 * time.Second},
		{"multiplier 1 is constant", Restart{Multiplier: 1, InitialDelay: 3 * time.Second}, 7, nil, 3 * time.Second},
		{"no jitter by default: rnd ignored", Restart{}, 1, constRand(0), time.Second},
		{"jitter low", Restart{Jitter: true}, 1, constRand(0), 800 * time.Millisecond},
		{"jitter middle", Restart{Jitter: true}, 1, constRand(0.5), time.Second},
		{"jitter high", Restart{Jitter: true}, 1, constRand(1), 1200 * time.Millisecond},
		{"jitter low after the cap", Restart{Jitter: true}, 7, constRand(0), 48 * time.Second},
		{"jitter high after the cap", Restart{Jitter: true}, 7, constRand(1), 72 * time.Second},
		{"jitter floor 1ms", Restart{Jitter: true, InitialDelay: time.Millisecond}, 1, constRand(0), time.Millisecond},
		{"jitter floor from 1ns", Restart{Jitter: true, InitialDelay: time.Nanosecond}, 1, constRand(1), time.Millisecond},
		{"no floor without jitter", Restart{InitialDelay: time.Nanosecond}, 1, nil, time.Nanosecond},
		{"custom", Restart{InitialDelay: 250 * time.Millisecond, MaxDelay: 5 * time.Second, Multiplier: 1.5}, 3, nil, 562500 * time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := delayOf(tt.p, tt.attempt, tt.rnd); got != tt.want {
				t.Fatalf("delayOf(%d) = %v, want %v", tt.attempt, got, tt.want)
			}
		})
	}
	// rnd is not called without jitter: the supervisor may pass a source that must not be
	// consumed for nothing.
	called := false
	delayOf(Restart{}, 1, func() float64 { called = true; return 0 })
	if called {
		t.Error("Restart.Delay called rnd without Jitter")
	}
}

// TestJitterBounds samples a seeded and the default random source: every jittered delay lies in
// [0.8, 1.2] × the base delay, and both halves of the range are hit.
func TestJitterBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	policies := []struct {
		name  string
		delay func(n int) time.Duration
		base  func(n int) time.Duration
	}{
		{"retry", func(n int) time.Duration { return delayOf(Retry{}, n, r.Float64) },
			func(n int) time.Duration { return delayOf(Retry{DisableJitter: true}, n, nil) }},
		{"restart", func(n int) time.Duration { return delayOf(Restart{Jitter: true}, n, r.Float64) },
			func(n int) time.Duration { return delayOf(Restart{}, n, nil) }},
		{"retry, global source", func(n int) time.Duration { return delayOf(Retry{}, n, nil) },
			func(n int) time.Duration { return delayOf(Retry{DisableJitter: true}, n, nil) }},
		{"restart, global source", func(n int) time.Duration { return delayOf(Restart{Jitter: true}, n, nil) },
			func(n int) time.Duration { return delayOf(Restart{}, n, nil) }},
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

func TestWithDefaults(t *testing.T) {
	if got, want := withDefaultsOf(Retry{}), (Retry{MaxAttempts: 3, InitialDelay: 500 * time.Millisecond, MaxDelay: 30 * time.Second, Multiplier: 2}); got != want {
		t.Errorf("Retry defaults = %+v, want %+v", got, want)
	}
	if got, want := withDefaultsOf(Restart{}), (Restart{MaxAttempts: 0, InitialDelay: time.Second, MaxDelay: 60 * time.Second, Multiplier: 2}); got != want {
		t.Errorf("Restart defaults = %+v, want %+v", got, want)
	}
	if got, want := withDefaultsOf(Checkpoint{}), (Checkpoint{SaveEvery: 1000, SaveInterval: time.Second, IdleInterval: 5 * time.Minute, MaxUnflushed: 10000, Retention: 30 * 24 * time.Hour}); got != want {
		t.Errorf("Checkpoint defaults = %+v, want %+v", got, want)
	}
	if got, want := withDefaultsOf(Checkpoint{SaveEvery: 7}).MaxUnflushed, 10000; got != want {
		t.Errorf("MaxUnflushed default for SaveEvery 7 = %d, want %d", got, want)
	}
	if got, want := withDefaultsOf(Checkpoint{SaveEvery: 5000}).MaxUnflushed, 50000; got != want {
		t.Errorf("MaxUnflushed default for SaveEvery 5000 = %d, want %d", got, want)
	}
	if got := withDefaultsOf(Checkpoint{SaveEvery: math.MaxInt / 2}).MaxUnflushed; got != math.MaxInt {
		t.Errorf("MaxUnflushed default must saturate, got %d", got)
	}
	// Set fields are kept.
	retry := Retry{MaxAttempts: 1, InitialDelay: 1, MaxDelay: 2, Multiplier: 1.5, DisableJitter: true}
	if got := withDefaultsOf(retry); got != retry {
		t.Errorf("Retry.withDefaultsOf changed set fields: %+v", got)
	}
	restart := Restart{MaxAttempts: 4, InitialDelay: 1, MaxDelay: 2, Multiplier: 1.5, Jitter: true}
	if got := withDefaultsOf(restart); got != restart {
		t.Errorf("Restart.withDefaultsOf changed set fields: %+v", got)
	}
	cp := Checkpoint{SaveEvery: 1, SaveInterval: 2, IdleInterval: 3, MaxUnflushed: 4, Retention: 5, Ephemeral: true}
	if got := withDefaultsOf(cp); got != cp {
		t.Errorf("Checkpoint.withDefaultsOf changed set fields: %+v", got)
	}
}

// validationCase is one row of the validation tables: the error messages wanted, in order;
// none means valid.
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
				t.Fatalf("got %d errors %v, want %d %q", len(got), got, len(tt.want), tt.want)
			}
			for i, ce := range got {
				if ce.Error() != tt.want[i] {
					t.Errorf("error %d = %q, want %q", i, ce.Error(), tt.want[i])
				}
			}
			if tt.err != nil && !errors.Is(tt.err, configerr.ErrInvalid) {
				t.Errorf("error does not match configerr.ErrInvalid")
			}
		})
	}
}

// configErrorsOf flattens a joined validation error into its *configerr.Error values, failing the
// test on anything else.
func configErrorsOf(t *testing.T, err error) []*configerr.Error {
	t.Helper()
	if err == nil {
		return nil
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	out := make([]*configerr.Error, 0, len(errs))
	for _, e := range errs {
		ce, ok := e.(*configerr.Error)
		if !ok {
			t.Fatalf("not a *configerr.Error: %T %v", e, e)
		}
		out = append(out, ce)
	}
	return out
}

func TestRetryValidate(t *testing.T) {
	checkValidation(t, []validationCase{
		{"zero value", Retry{}.Validate(), nil},
		{"all set", Retry{MaxAttempts: 1, InitialDelay: time.Second, MaxDelay: time.Second, Multiplier: 1}.Validate(), nil},
		{"tiny initial delay", Retry{InitialDelay: time.Nanosecond}.Validate(), nil},
		{"negative attempts", Retry{MaxAttempts: -1}.Validate(),
			[]string{"watchtree: RetryPolicy.MaxAttempts must be >= 1 (0 means the default 3), got -1"}},
		{"negative initial", Retry{InitialDelay: -time.Second}.Validate(),
			[]string{"watchtree: RetryPolicy.InitialDelay must be > 0 (0 means the default 500ms), got -1s"}},
		{"negative max", Retry{MaxDelay: -1}.Validate(),
			[]string{"watchtree: RetryPolicy.MaxDelay must be > 0 (0 means the default 30s), got -1ns"}},
		{"NaN multiplier", Retry{Multiplier: math.NaN()}.Validate(),
			[]string{"watchtree: RetryPolicy.Multiplier must be finite and >= 1, got NaN"}},
		{"+Inf multiplier", Retry{Multiplier: math.Inf(1)}.Validate(),
			[]string{"watchtree: RetryPolicy.Multiplier must be finite and >= 1, got +Inf"}},
		{"multiplier below 1", Retry{Multiplier: 0.5}.Validate(),
			[]string{"watchtree: RetryPolicy.Multiplier must be finite and >= 1, got 0.5"}},
		{"negative multiplier", Retry{Multiplier: -2}.Validate(),
			[]string{"watchtree: RetryPolicy.Multiplier must be finite and >= 1, got -2"}},
		{"max below initial", Retry{InitialDelay: 2 * time.Second, MaxDelay: time.Second}.Validate(),
			[]string{"watchtree: RetryPolicy.MaxDelay must be >= InitialDelay (2s), got 1s"}},
		{"default max below initial", Retry{InitialDelay: time.Minute}.Validate(),
			[]string{"watchtree: RetryPolicy.MaxDelay must be >= InitialDelay (1m0s), got 30s (the default)"}},
		{"several at once", Retry{MaxAttempts: -3, Multiplier: math.Inf(-1)}.Validate(),
			[]string{"watchtree: RetryPolicy.MaxAttempts must be >= 1 (0 means the default 3), got -3",
				"watchtree: RetryPolicy.Multiplier must be finite and >= 1, got -Inf"}},
	})
}

func TestRestartValidate(t *testing.T) {
	checkValidation(t, []validationCase{
		{"zero value", Restart{}.Validate(), nil},
		{"limited and jitter", Restart{MaxAttempts: 30, Jitter: true}.Validate(), nil},
		{"multiplier 1", Restart{Multiplier: 1}.Validate(), nil},
		{"negative attempts", Restart{MaxAttempts: -1}.Validate(),
			[]string{"watchtree: RestartPolicy.MaxAttempts must be >= 0 (0 means unlimited), got -1"}},
		{"negative initial", Restart{InitialDelay: -time.Millisecond}.Validate(),
			[]string{"watchtree: RestartPolicy.InitialDelay must be > 0 (0 means the default 1s), got -1ms"}},
		{"negative max", Restart{MaxDelay: -time.Minute}.Validate(),
			[]string{"watchtree: RestartPolicy.MaxDelay must be > 0 (0 means the default 1m0s), got -1m0s"}},
		{"NaN multiplier", Restart{Multiplier: math.NaN()}.Validate(),
			[]string{"watchtree: RestartPolicy.Multiplier must be finite and >= 1, got NaN"}},
		{"multiplier 0.99", Restart{Multiplier: 0.99}.Validate(),
			[]string{"watchtree: RestartPolicy.Multiplier must be finite and >= 1, got 0.99"}},
		{"max below initial", Restart{InitialDelay: 2 * time.Minute}.Validate(),
			[]string{"watchtree: RestartPolicy.MaxDelay must be >= InitialDelay (2m0s), got 1m0s (the default)"}},
		{"invalid delay skips the cross check", Restart{InitialDelay: -1, MaxDelay: -2}.Validate(),
			[]string{"watchtree: RestartPolicy.InitialDelay must be > 0 (0 means the default 1s), got -1ns",
				"watchtree: RestartPolicy.MaxDelay must be > 0 (0 means the default 1m0s), got -2ns"}},
	})
}

// startRule returns the error of p.validateStartInto for start.
func startRule(p Checkpoint, start StartPosition) error {
	c := configcheck.NewErrors("")
	validateStartInto(c, "StartPosition", p, start)
	return c.Err()
}

func TestCheckpointValidate(t *testing.T) {
	checkValidation(t, []validationCase{
		{"zero value", Checkpoint{}.Validate(), nil},
		{"all set", Checkpoint{SaveEvery: 1, SaveInterval: time.Millisecond, IdleInterval: time.Second, MaxUnflushed: 1}.Validate(), nil},
		{"negative SaveEvery", Checkpoint{SaveEvery: -1}.Validate(),
			[]string{"watchtree: CheckpointPolicy.SaveEvery must be >= 1 (0 means the default 1000), got -1"}},
		{"negative SaveInterval", Checkpoint{SaveInterval: -time.Second}.Validate(),
			[]string{"watchtree: CheckpointPolicy.SaveInterval must be > 0 (0 means the default 1s), got -1s"}},
		{"negative IdleInterval", Checkpoint{IdleInterval: -time.Second}.Validate(),
			[]string{"watchtree: CheckpointPolicy.IdleInterval must be > 0 (0 means the default 5m0s), got -1s"}},
		{"negative MaxUnflushed", Checkpoint{MaxUnflushed: -1}.Validate(),
			[]string{"watchtree: CheckpointPolicy.MaxUnflushed must be >= SaveEvery (0 means the default, the larger of 10000 and 10 × SaveEvery), got -1"}},
		{"MaxUnflushed below default SaveEvery", Checkpoint{MaxUnflushed: 50}.Validate(),
			[]string{"watchtree: CheckpointPolicy.MaxUnflushed must be >= SaveEvery (1000), got 50"}},
		{"MaxUnflushed below SaveEvery", Checkpoint{SaveEvery: 10, MaxUnflushed: 9}.Validate(),
			[]string{"watchtree: CheckpointPolicy.MaxUnflushed must be >= SaveEvery (10), got 9"}},
		{"retention set", Checkpoint{Retention: 7 * 24 * time.Hour}.Validate(), nil},
		{"retention at its floor", Checkpoint{IdleInterval: time.Minute, Retention: 2 * time.Minute}.Validate(), nil},
		{"negative Retention", Checkpoint{Retention: -time.Hour}.Validate(),
			[]string{"watchtree: CheckpointPolicy.Retention must be >= 2 × IdleInterval (0 means the default 720h0m0s), got -1h0m0s"}},
		{"Retention below twice the default IdleInterval", Checkpoint{Retention: 9 * time.Minute}.Validate(),
			[]string{"watchtree: CheckpointPolicy.Retention must be >= 2 × IdleInterval (5m0s), so that a running idle instance's checkpoint never expires, got 9m0s"}},
		{"ephemeral", Checkpoint{Ephemeral: true}.Validate(), nil},
		{"ephemeral with write settings", Checkpoint{Ephemeral: true, SaveEvery: 10, SaveInterval: time.Second, IdleInterval: time.Hour, MaxUnflushed: 100, Retention: time.Hour * 24}.Validate(),
			[]string{
				"watchtree: CheckpointPolicy.SaveEvery must be 0 when Ephemeral is set (an ephemeral stream writes no checkpoint), got 10",
				"watchtree: CheckpointPolicy.SaveInterval must be 0 when Ephemeral is set (an ephemeral stream writes no checkpoint), got 1s",
				"watchtree: CheckpointPolicy.IdleInterval must be 0 when Ephemeral is set (an ephemeral stream writes no checkpoint), got 1h0m0s",
				"watchtree: CheckpointPolicy.MaxUnflushed must be 0 when Ephemeral is set (an ephemeral stream writes no checkpoint), got 100",
				"watchtree: CheckpointPolicy.Retention must be 0 when Ephemeral is set (an ephemeral stream writes no checkpoint), got 24h0m0s",
			}},
		{"ephemeral with At", startRule(Checkpoint{Ephemeral: true}, At(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))),
			[]string{"watchtree: StartPosition must be Resume or Latest when Checkpoint.Ephemeral is set (an ephemeral stream starts at the current position on every start), got At(2026-03-01T00:00:00Z)"}},
		{"ephemeral with Latest", startRule(Checkpoint{Ephemeral: true}, Latest), nil},
		{"ephemeral with Resume", startRule(Checkpoint{Ephemeral: true}, Resume), nil},
		{"At without ephemeral", startRule(Checkpoint{}, At(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))), nil},
		{"negative counts skip the cross check", Checkpoint{SaveEvery: -1, MaxUnflushed: -1}.Validate(),
			[]string{"watchtree: CheckpointPolicy.SaveEvery must be >= 1 (0 means the default 1000), got -1",
				"watchtree: CheckpointPolicy.MaxUnflushed must be >= SaveEvery (0 means the default, the larger of 10000 and 10 × SaveEvery), got -1"}},
	})
}

func TestStartPositionAndHistoryLost(t *testing.T) {
	checkValidation(t, []validationCase{
		{"Resume", Resume.Validate(), nil},
		{"Latest", Latest.Validate(), nil},
		{"At", At(time.Unix(1700000000, 0)).Validate(), nil},
		{"At zero time", At(time.Time{}).Validate(),
			[]string{"watchtree: StartPosition At needs a non-zero time"}},
		{"At before 1970", At(time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC)).Validate(),
			[]string{"watchtree: StartPosition At needs a time between 1970 and 2106, got 1969-12-31T00:00:00Z"}},
		{"At after 2106", At(time.Date(2107, 1, 1, 0, 0, 0, 0, time.UTC)).Validate(),
			[]string{"watchtree: StartPosition At needs a time between 1970 and 2106, got 2107-01-01T00:00:00Z"}},
		{"Fail", Fail.Validate(), nil},
		{"ResumeFromNow", ResumeFromNow.Validate(), nil},
		{"Rebuild", Rebuild(func(context.Context) error { return nil }).Validate(), nil},
		{"Rebuild nil", Rebuild(nil).Validate(),
			[]string{"watchtree: HistoryLostPolicy Rebuild needs a non-nil function"}},
	})

	for _, tt := range []struct{ got, want string }{
		{Resume.String(), "Resume"},
		{Latest.String(), "Latest"},
		{At(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)).String(), "At(2025-01-02T03:04:05Z)"},
		{At(time.Date(2025, 1, 2, 3, 4, 5, 6e6, time.UTC)).String(), "At(2025-01-02T03:04:05.006Z)"},
		{StartPosition{kind: 9}.String(), "StartPosition(9)"},
		{Fail.String(), "Fail"},
		{ResumeFromNow.String(), "ResumeFromNow"},
		{Rebuild(nil).String(), "Rebuild"},
		{HistoryLost{kind: 9}.String(), "HistoryLostPolicy(9)"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}

	if startKindOf(Resume) != startResume || startKindOf(Latest) != startLatest || startKindOf(At(time.Now())) != startAt {
		t.Error("StartPosition kinds")
	}
	if _, ok := startTime(Resume); ok {
		t.Error("Resume has no time")
	}
	at := time.Unix(1700000000, 999e6)
	if got, ok := startTime(At(at)); !ok || !got.Equal(at) {
		t.Error("At lost its time")
	}
	if ts := operationTime(At(at)); ts.T != 1700000000 || ts.I != 0 {
		t.Errorf("operationTime = %+v, want {1700000000 0}: rounded down to the second", ts)
	}
	var zero StartPosition
	if zero != Resume {
		t.Error("the zero StartPosition must be Resume")
	}

	var zeroHL HistoryLost
	if historyLostKindOf(zeroHL) != historyFail || historyLostKindOf(ResumeFromNow) != historyResumeFromNow || historyLostKindOf(Rebuild(nil)) != historyRebuild {
		t.Error("HistoryLost kinds")
	}
	ran := false
	if fn := rebuildFunc(Rebuild(func(context.Context) error { ran = true; return nil })); fn == nil || fn(context.Background()) != nil || !ran {
		t.Error("rebuildFunc must return the function given to Rebuild")
	}
	if rebuildFunc(Fail) != nil || rebuildFunc(ResumeFromNow) != nil {
		t.Error("only Rebuild has a function")
	}
}

// TestErrors: the collector names fields with its prefix or stream, keeps the order, carries
// sentinels, and returns nil when nothing broke.
func TestErrors(t *testing.T) {
	if err := configcheck.NewErrors("Config.").Err(); err != nil {
		t.Fatalf("empty collector: %v", err)
	}
	sentinel := errors.New("sentinel")
	c := configcheck.StreamErrors("")
	validateIntoOf(c, "Retry", Retry{Multiplier: 0.5})
	c.AddErr("OnChange", sentinel, "must be set")
	checkValidation(t, []validationCase{{"stream", c.Err(), []string{
		`watchtree: Stream "": Retry.Multiplier must be finite and >= 1, got 0.5`,
		`watchtree: Stream "": OnChange must be set`,
	}}})
	if !errors.Is(c.Err(), sentinel) {
		t.Error("AddErr's sentinel is not matched")
	}
	c = configcheck.NewErrors("Config.")
	validateIntoOf(c, "Checkpoint", Checkpoint{SaveEvery: -1})
	checkValidation(t, []validationCase{{"prefix", c.Err(), []string{
		"watchtree: Config.Checkpoint.SaveEvery must be >= 1 (0 means the default 1000), got -1",
	}}})
}

func TestLeaseDefaultsAndValidate(t *testing.T) {
	d := withDefaultsOf(Lease{})
	if d.TTL != 60*time.Second || d.RenewEvery != 15*time.Second || d.StandbyPoll != 20*time.Second ||
		d.Margin != 6*time.Second || d.Balance != BalanceOn {
		t.Fatalf("withDefaultsOf(Lease{}) = %+v", d)
	}
	if err := (Lease{}).Validate(); err != nil {
		t.Fatalf("zero Lease: %v", err)
	}
	if err := (Lease{TTL: 2 * time.Second, RenewEvery: 500 * time.Millisecond}).Validate(); err != nil {
		t.Fatalf("TTL 2s, RenewEvery 500ms: %v", err)
	}
	for _, c := range []struct {
		p     Lease
		field string
	}{
		{Lease{TTL: -time.Second}, "LeasePolicy.TTL"},
		{Lease{RenewEvery: -1}, "LeasePolicy.RenewEvery"},
		{Lease{StandbyPoll: -1}, "LeasePolicy.StandbyPoll"},
		{Lease{Margin: -1}, "LeasePolicy.Margin"},
		{Lease{TTL: time.Second, Margin: time.Second}, "LeasePolicy.Margin"},
		{Lease{TTL: 20 * time.Second}, "LeasePolicy.RenewEvery"},                                // 2×15s > 20s - 2s
		{Lease{TTL: time.Second, RenewEvery: 500 * time.Millisecond}, "LeasePolicy.RenewEvery"}, // 1s > 900ms
		{Lease{Balance: 7}, "LeasePolicy.Balance"},
	} {
		err := c.p.Validate()
		var ce *configerr.Error
		if !errors.As(err, &ce) || ce.Field != c.field || !errors.Is(err, configerr.ErrInvalid) {
			t.Errorf("%+v: Validate() = %v, want a configerr.Error on %s", c.p, err, c.field)
		}
	}
}

// TestHistoryLostSet: the zero value is "not chosen" (its meaning depends on the stream), every
// named policy is chosen, Fail included, and the zero value is still of the Fail kind.
func TestHistoryLostSet(t *testing.T) {
	var zero HistoryLost
	if historyLostSet(zero) || historyLostKindOf(zero) != historyFail {
		t.Errorf("zero value: set %v, kind %v; want unset, of the Fail kind", historyLostSet(zero), historyLostKindOf(zero))
	}
	for _, p := range []HistoryLost{Fail, ResumeFromNow, RebuildFromSnapshot, Rebuild(func(context.Context) error { return nil })} {
		if !historyLostSet(p) {
			t.Errorf("%v: not set", p)
		}
	}
}
