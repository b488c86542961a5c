package supervisor

import (
	"errors"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/watchtree/watchtree/actors/streamtree"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/policy"
)

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
		{Config{Stream: "s", Child: props, Policy: policy.Restart{MaxAttempts: -1}}, "watchtree: Config.Policy.MaxAttempts must be >= 0 (0 means unlimited), got -1"},
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

func TestTerminalOnClassifier(t *testing.T) {
	errTerminal := errors.New("terminal")
	classify := streamtree.TerminalOn(errTerminal, nil)
	cases := []struct {
		reason   any
		terminal bool
		msg      string
	}{
		{errors.New("network"), false, "network"},
		{&streamtree.PanicError{Value: errors.Join(errors.New("x"), errTerminal)}, true, "panic: x\nterminal"},
		{&streamtree.PanicError{Value: "plain string"}, false, "panic: plain string"},
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
			got <- streamtree.Incarnation(ctx)
		}
	}))
	if n := <-got; n != 0 {
		t.Fatalf("Incarnation of an unsupervised actor = %d, want 0", n)
	}
	_ = sys.Root.StopFuture(pid).Wait()
}

func TestStateNames(t *testing.T) {
	for s, want := range map[messages.SupervisorState]string{
		messages.SupervisorState_SUPERVISOR_STATE_UNSPECIFIED: "unspecified",
		messages.SupervisorState_SUPERVISOR_STATE_STARTING:    "starting", messages.SupervisorState_SUPERVISOR_STATE_STANDBY: "standby",
		messages.SupervisorState_SUPERVISOR_STATE_RUNNING: "running", messages.SupervisorState_SUPERVISOR_STATE_BACKOFF: "backoff",
		messages.SupervisorState_SUPERVISOR_STATE_STOPPED: "stopped", messages.SupervisorState_SUPERVISOR_STATE_CRASHED: "crashed",
		messages.SupervisorState_SUPERVISOR_STATE_STOPPING:     "stopping",
		messages.SupervisorState_SUPERVISOR_STATE_SNAPSHOTTING: "snapshotting",
		messages.SupervisorState(99):                           "unknown", messages.SupervisorState(-1): "unknown",
	} {
		if got := stateName(s); got != want {
			t.Errorf("stateName(%d) = %q, want %q", s, got, want)
		}
	}
	// Every value of the enum has a name, so a state added to the protobuf enum is named here too.
	for v := range messages.SupervisorState_name {
		if stateName(messages.SupervisorState(v)) == "unknown" {
			t.Errorf("state %d has no name", v)
		}
	}
}
