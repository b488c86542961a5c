package consoleserver

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/watchtree/watchtree/messages"
)

// TestConfigBindsLoopbackByDefault: an address without a host binds 127.0.0.1, and one beyond
// loopback is refused without a token, the field named.
func TestConfigBindsLoopbackByDefault(t *testing.T) {
	if got := (Config{Addr: ":8090"}).withDefaults().Addr; got != "127.0.0.1:8090" {
		t.Errorf(`Addr ":8090" binds %q, want 127.0.0.1:8090`, got)
	}
	for _, addr := range []string{"0.0.0.0:8090", "10.1.2.3:8090", "[::]:8090"} {
		var fe *FieldError
		if err := (Config{Addr: addr}).Validate(); !errors.As(err, &fe) || fe.Field != "Token" {
			t.Errorf("Addr %q without a token: %v, want a Token FieldError", addr, err)
		}
		if err := (Config{Addr: addr, Token: "t"}).Validate(); err != nil {
			t.Errorf("Addr %q with a token: %v", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:8090", "[::1]:8090", ":0"} {
		if err := (Config{Addr: addr}).Validate(); err != nil {
			t.Errorf("loopback Addr %q: %v", addr, err)
		}
	}
	if err := (Config{Addr: "8090"}).Validate(); err == nil || !strings.Contains(err.Error(), "Config.Addr must be host:port") {
		t.Errorf(`Addr "8090": %v`, err)
	}
}

// muteBackend is a runtime with one stream whose supervisor never answers.
type muteBackend struct {
	emptyBackend
	sup atomic.Pointer[actor.PID]
}

func (b *muteBackend) Streams() []StreamRef {
	return []StreamRef{{Name: "mute", Mode: "AllInstances", Supervisor: b.sup.Load()}}
}

// TestEveryRequestIsBounded: a supervisor that never answers does not hold a read past
// RequestTimeout (the row says why), nor a command past its timeout.
func TestEveryRequestIsBounded(t *testing.T) {
	b := &muteBackend{}
	sys, srv := startLocal(t, b, Config{RequestTimeout: 200 * time.Millisecond})
	b.sup.Store(sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {})))
	res, err := sys.Root.RequestFuture(srv.actorPID(), &messages.SnapshotRequest{}, 10*time.Second).Result()
	if err != nil {
		t.Fatalf("snapshot: %v (the console did not answer by itself)", err)
	}
	rows := res.(*messages.SnapshotReply).GetStreams()
	// A row waits for what is left of the request's 200ms, so its note may say 199ms.
	if len(rows) != 1 || rows[0].GetState() != "unknown" || !strings.Contains(rows[0].GetNote(), "no answer within ") {
		t.Fatalf("rows = %v", rows)
	}
	res, err = sys.Root.RequestFuture(srv.actorPID(), &messages.ControlRequest{Action: messages.ControlAction_CONTROL_ACTION_RESTART,
		Stream: "mute", TimeoutMs: 300}, 10*time.Second).Result()
	if r, ok := res.(*messages.ControlReply); err != nil || !ok || r.GetOk() || r.GetCode() != "timeout" {
		t.Fatalf("restart of a mute stream: %v, %v; want code timeout", res, err)
	}
}
