package supervisor

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/watchtree/watchtree/internal/treekit"
)

func TestPolicyDefaultsDelays(t *testing.T) {
	var p Policy
	want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60}
	for i, w := range want {
		if got := p.Delay(i + 1); got != w*time.Second {
			t.Errorf("Delay(%d) = %v, want %v", i+1, got, w*time.Second)
		}
	}
	if got := p.Delay(0); got != time.Second {
		t.Errorf("Delay(0) = %v, want 1s", got)
	}
	// Far attempts must not overflow.
	for _, n := range []int{64, 1000, math.MaxInt32} {
		if got := p.Delay(n); got != 60*time.Second {
			t.Errorf("Delay(%d) = %v, want the 60s cap", n, got)
		}
	}
	huge := Policy{InitialDelay: time.Duration(math.MaxInt64 / 2), MaxDelay: time.Duration(math.MaxInt64)}
	if got := huge.Delay(10); got != time.Duration(math.MaxInt64) {
		t.Errorf("overflowing Delay = %v", got)
	}
	if got := (Policy{Multiplier: 1, InitialDelay: 3 * time.Second}).Delay(7); got != 3*time.Second {
		t.Errorf("Multiplier 1: Delay(7) = %v, want 3s", got)
	}
	if got := (Policy{InitialDelay: 5 * time.Second, MaxDelay: 2 * time.Second}).Delay(1); got != 2*time.Second {
		t.Errorf("MaxDelay below InitialDelay: Delay(1) = %v, want the 2s cap", got)
	}
}

func TestPolicyJitterBounds(t *testing.T) {
	p := Policy{Jitter: true}
	cases := []struct {
		n    int
		r    float64
		want time.Duration
	}{
		{1, 0, 800 * time.Millisecond},
		{1, 1, 1200 * time.Millisecond},
		{1, 0.5, time.Second},
		{7, 0, 48 * time.Second},
		{7, 1, 72 * time.Second}, // jitter applies after the cap
		{1, -3, 800 * time.Millisecond},
		{1, 9, 1200 * time.Millisecond},
		{1, math.NaN(), 800 * time.Millisecond},
	}
	for _, c := range cases {
		if got := p.JitteredDelay(c.n, c.r); got != c.want {
			t.Errorf("JitteredDelay(%d, %v) = %v, want %v", c.n, c.r, got, c.want)
		}
	}
	floor := Policy{Jitter: true, InitialDelay: time.Millisecond}
	if got := floor.JitteredDelay(1, 0); got != time.Millisecond {
		t.Errorf("floored jitter = %v, want 1ms (0.8ms floored)", got)
	}
	tiny := Policy{Jitter: true, InitialDelay: time.Nanosecond}
	if got := tiny.JitteredDelay(1, 1); got != time.Millisecond {
		t.Errorf("floored jitter = %v, want 1ms", got)
	}
	if got := (Policy{InitialDelay: time.Nanosecond}).JitteredDelay(1, 0); got != time.Nanosecond {
		t.Errorf("no jitter, no floor: %v", got)
	}
}

func TestPolicyValidate(t *testing.T) {
	cases := []struct {
		p     Policy
		field string
		rule  string
	}{
		{Policy{MaxAttempts: -1}, "MaxAttempts", "must be >= 0, got -1"},
		{Policy{InitialDelay: -time.Second}, "InitialDelay", "must be > 0, got -1s"},
		{Policy{MaxDelay: -1}, "MaxDelay", "must be > 0, got -1ns"},
		{Policy{Multiplier: math.NaN()}, "Multiplier", "must be finite and >= 1, got NaN"},
		{Policy{Multiplier: math.Inf(1)}, "Multiplier", "must be finite and >= 1, got +Inf"},
		{Policy{Multiplier: 0.5}, "Multiplier", "must be finite and >= 1, got 0.5"},
		{Policy{Multiplier: -2}, "Multiplier", "must be finite and >= 1, got -2"},
	}
	for _, c := range cases {
		err := c.p.Validate()
		var pe *PolicyError
		if !errors.As(err, &pe) || pe.Field != c.field || pe.Rule != c.rule {
			t.Errorf("%+v: Validate() = %v, want %s %s", c.p, err, c.field, c.rule)
			continue
		}
		if want := "supervisor: Policy." + c.field + " " + c.rule; err.Error() != want {
			t.Errorf("message %q, want %q", err.Error(), want)
		}
	}
	for _, ok := range []Policy{{}, {MaxAttempts: 30, Jitter: true}, {Multiplier: 1}, {InitialDelay: time.Nanosecond}} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	all := Policy{MaxAttempts: -1, InitialDelay: -1, MaxDelay: -1, Multiplier: math.NaN()}.Validate()
	for _, f := range []string{"MaxAttempts", "InitialDelay", "MaxDelay", "Multiplier"} {
		if !strings.Contains(all.Error(), "Policy."+f+" ") {
			t.Errorf("joined error misses %s: %v", f, all)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	props := actor.PropsFromFunc(func(actor.Context) {})
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{Child: props}, "Config.Stream must not be empty"},
		{Config{Stream: "s"}, "Config.Child must not be nil"},
		{Config{Stream: "s", Child: props, Siblings: []Sibling{{Props: props}}}, "Config.Siblings[0].Name must not be empty"},
		{Config{Stream: "s", Child: props, Siblings: []Sibling{{Name: "stream", Props: props}}}, `Config.Siblings[0].Name "stream" is already used`},
		{Config{Stream: "s", Child: props, Siblings: []Sibling{{Name: "a", Props: props}, {Name: "a", Props: props}}}, `Config.Siblings[1].Name "a" is already used`},
		{Config{Stream: "s", Child: props, Siblings: []Sibling{{Name: "a"}}}, "Config.Siblings[0].Props must not be nil"},
		{Config{Stream: "s", Child: props, Policy: Policy{MaxAttempts: -1}}, "Policy.MaxAttempts must be >= 0"},
	}
	for _, c := range cases {
		_, err := New(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want %q", c.cfg, err, c.want)
		}
	}
	if _, err := New(Config{Stream: "s", Child: props}); err != nil {
		t.Errorf("minimal config: %v", err)
	}
}

func TestDefaultClassifier(t *testing.T) {
	errTerminal := errors.New("terminal")
	classify := DefaultClassifier(errTerminal, nil)
	cases := []struct {
		reason   any
		terminal bool
		msg      string
	}{
		{errors.New("network"), false, "network"},
		{&PanicError{Value: errors.Join(errors.New("x"), errTerminal)}, true, "panic: x\nterminal"},
		{&PanicError{Value: "plain string"}, false, "panic: plain string"},
		{"a string", false, "a string"},
		{nil, false, "supervisor: failure with a nil reason"},
		{&siblingError{name: "checkpointer", reason: errTerminal}, true, "supervisor: sibling failed checkpointer: terminal"},
	}
	for _, c := range cases {
		terminal, cause := classify(c.reason)
		if terminal != c.terminal || cause == nil || cause.Error() != c.msg {
			t.Errorf("classify(%#v) = %v, %v; want %v, %q", c.reason, terminal, cause, c.terminal, c.msg)
		}
	}
}

func TestIncarnationOutsideSupervisor(t *testing.T) {
	sys := newTestSystem()
	got := make(chan uint64, 1)
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*actor.Started); ok {
			got <- treekit.Incarnation(ctx)
		}
	}))
	if n := <-got; n != 0 {
		t.Fatalf("Incarnation of an unsupervised actor = %d, want 0", n)
	}
	_ = sys.Root.StopFuture(pid).Wait()
}

func TestStateNames(t *testing.T) {
	for s, want := range map[State]string{
		StateStarting: "starting", StateStandby: "standby", StateRunning: "running", StateBackoff: "backoff",
		StateStopped: "stopped", StateCrashed: "crashed", State(99): "unknown",
	} {
		if s.String() != want {
			t.Errorf("%d.String() = %q, want %q", s, s.String(), want)
		}
		if s < 7 && StateFromProto(s.Proto()) != s {
			t.Errorf("proto round trip of %v", s)
		}
	}
}
