package consoleserver

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/status"
)

// letterBackend is a runtime with one stream and a fixed outcome per dead letter.
type letterBackend struct {
	emptyBackend
	outcomes map[string]error // id → Replay's result
	mu       sync.Mutex
	refresh  []bool // what each Replay was asked
}

func (b *letterBackend) Streams() []StreamRef {
	return []StreamRef{{Name: "s", Mode: status.ModeAllInstances}}
}

func (b *letterBackend) DeadLetters(context.Context, string, int) ([]*messages.DeadLetterInfo, error) {
	var out []*messages.DeadLetterInfo
	for _, id := range []string{"ok1", "ok2", "bad1", "bad2", "gone", "omitted"} {
		out = append(out, &messages.DeadLetterInfo{Id: id})
	}
	return out, nil
}

func (b *letterBackend) Replay(_ context.Context, _, id string, refresh bool) error {
	b.mu.Lock()
	b.refresh = append(b.refresh, refresh)
	b.mu.Unlock()
	return b.outcomes[id]
}

// TestReplayAllCounts: a replay of all counts replayed, failed and skipped (a dead letter
// gone meanwhile, one not replayable as asked), lists the failures one per line, and passes
// refresh on; a replay of one id that is gone fails.
func TestReplayAllCounts(t *testing.T) {
	b := &letterBackend{outcomes: map[string]error{
		"bad1":    fmt.Errorf("replay bad1: handler panicked: boom"),
		"bad2":    fmt.Errorf("replay bad2: refused"),
		"gone":    fmt.Errorf("replay gone: %w", ErrNotFound),
		"omitted": fmt.Errorf("replay omitted: %w", ErrUnsupported),
	}}
	sys, srv := startLocal(t, b, Config{})
	ask := func(req *messages.ControlRequest) *messages.ControlReply {
		t.Helper()
		res, err := sys.Root.RequestFuture(srv.actorPID(), req, 10*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res.(*messages.ControlReply)
	}
	r := ask(&messages.ControlRequest{Action: messages.ControlAction_CONTROL_ACTION_REPLAY, Stream: "s", Refresh: true})
	if r.GetOk() || r.GetDone() != 2 || r.GetFailed() != 2 || r.GetSkipped() != 2 || r.GetDetail() != "2 replayed, 2 failed, 2 skipped" {
		t.Errorf("replay of all: %v", r)
	}
	if lines := strings.Split(r.GetError(), "\n"); len(lines) != 2 || !strings.Contains(lines[0], "handler panicked: boom") || !strings.Contains(lines[1], "refused") {
		t.Errorf("errors %q, want one line per failure", r.GetError())
	}
	b.mu.Lock()
	for i, rf := range b.refresh {
		if !rf {
			t.Errorf("Replay %d without refresh", i)
		}
	}
	b.mu.Unlock()
	r = ask(&messages.ControlRequest{Action: messages.ControlAction_CONTROL_ACTION_REPLAY, Stream: "s", DeadLetterId: "gone"})
	if r.GetOk() || r.GetFailed() != 1 || r.GetSkipped() != 0 || r.GetCode() != "not_found" {
		t.Errorf("replay of one gone id: %v, want failed, not_found", r)
	}
}
