package checkpointer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/policy"
	"github.com/watchtree/watchtree/store"
)

var (
	sharedScope = store.Scope{Stream: "orders"}
	podA        = store.Scope{Stream: "orders", Instance: "pod-a"}
	podB        = store.Scope{Stream: "orders", Instance: "pod-b"}
)

// onInstance makes the harness's checkpointer the one of instance pod-b.
func onInstance(_ *harness, c *Config) { c.Instance = "pod-b" }

func (h *harness) load(scope store.Scope) (store.Checkpoint, bool) {
	h.t.Helper()
	cp, ok, err := h.ms.Load(context.Background(), scope)
	if err != nil {
		h.t.Fatalf("load %s: %v", scope, err)
	}
	return cp, ok
}

func (h *harness) save(cp store.Checkpoint) {
	h.t.Helper()
	if err := h.ms.Save(context.Background(), cp); err != nil {
		h.t.Fatalf("save %s: %v", cp.Scope(), err)
	}
}

// TestInstanceResumesFromItsOwnCheckpoint: with an Instance, the checkpointer loads and writes
// only its own record; another instance's (further ahead) and the shared one never move it, and
// it never moves them. Its writes expire Retention after they were made.
func TestInstanceResumesFromItsOwnCheckpoint(t *testing.T) {
	h := newHarness(t, func(h *harness, c *Config) {
		onInstance(h, c)
		c.Checkpoint = policy.Checkpoint{SaveEvery: 1, Retention: 7 * 24 * time.Hour}
	})
	h.clk.Advance(time.Hour)
	h.save(store.Checkpoint{Stream: "orders", Instance: "pod-a", Token: tok("a-599"), Source: store.SourceEvent})
	h.save(store.Checkpoint{Stream: "orders", Token: tok("shared-700"), Source: store.SourceEvent})
	h.save(store.Checkpoint{Stream: "orders", Instance: "pod-b", Token: tok("b-99"), Source: store.SourceEvent})

	sf := h.resolve(1)
	if sf.GetKind() != messages.StartKind_START_KIND_RESUME_AFTER || tokData(sf.GetToken()) != "b-99" {
		t.Fatalf("StartFrom %v, want RESUME_AFTER b-99 (pod-b's own)", sf)
	}
	h.progress(1, 3, nil)
	h.settle(1, 1, 2, 3)
	event[cpEvent](h)
	waitUntil(t, "pod-b's checkpoint at ev000003", func() bool {
		cp, ok := h.load(podB)
		return ok && tokData(cp.Token) == "ev000003"
	})
	cp, _ := h.load(podB)
	if cp.Instance != "pod-b" || !cp.ExpiresAt.Equal(cp.UpdatedAt.Add(7*24*time.Hour)) || cp.UpdatedAt.IsZero() {
		t.Fatalf("pod-b's checkpoint %+v: want Instance pod-b and ExpiresAt = UpdatedAt + 7d", cp)
	}
	if a, _ := h.load(podA); tokData(a.Token) != "a-599" {
		t.Fatalf("pod-b's writes moved pod-a's checkpoint: %+v", a)
	}
	if s, _ := h.load(sharedScope); tokData(s.Token) != "shared-700" || !s.ExpiresAt.IsZero() {
		t.Fatalf("pod-b's writes moved the shared checkpoint: %+v", s)
	}
}

// TestSharedCheckpointNeverExpires: without an Instance (the shared position) writes carry no
// ExpiresAt.
func TestSharedCheckpointNeverExpires(t *testing.T) {
	h := newHarness(t, nil)
	h.resolve(1)
	cp, ok := h.load(sharedScope)
	if !ok || !cp.ExpiresAt.IsZero() || cp.Instance != "" {
		t.Fatalf("shared initial checkpoint %+v (ok %v): want no Instance and no ExpiresAt", cp, ok)
	}
}

// TestInstanceWithoutCheckpointStartsAsNewStream: no own checkpoint and no shared one: the
// instance captures the current position and persists it as its own, as a new stream does.
func TestInstanceWithoutCheckpointStartsAsNewStream(t *testing.T) {
	h := newHarness(t, onInstance)
	h.save(store.Checkpoint{Stream: "orders", Instance: "pod-a", Token: tok("a-599"), Source: store.SourceEvent})
	sf := h.resolve(1)
	if tokData(sf.GetToken()) != "0now-1" || sf.GetSource() != store.SourceInitial {
		t.Fatalf("StartFrom %v, want the captured now-1 (initial): pod-a's checkpoint is not pod-b's", sf)
	}
	if cp, ok := h.load(podB); !ok || tokData(cp.Token) != "0now-1" || cp.Source != store.SourceInitial {
		t.Fatalf("pod-b's initial checkpoint %+v (ok %v)", cp, ok)
	}
}

// TestInstanceMigratesTheSharedCheckpointOnce: an instance without a checkpoint of its own
// takes the stream's shared checkpoint (earlier versions' layout) as its starting point,
// persists it as its own before the reply, and leaves the shared one alone. A later start
// resumes from its own, even when the shared one moved since.
func TestInstanceMigratesTheSharedCheckpointOnce(t *testing.T) {
	h := newHarness(t, onInstance)
	h.clk.Advance(24 * time.Hour)
	legacy := store.Checkpoint{Stream: "orders", Token: tok("legacy-100"), ClusterTime: bson.Timestamp{T: 100, I: 1},
		Source: store.SourceEvent, Owner: "old-1", Settled: 100, UpdatedAt: h.clk.Now().Add(-time.Hour)}
	h.save(legacy)

	sf := h.resolve(1)
	if sf.GetKind() != messages.StartKind_START_KIND_RESUME_AFTER || tokData(sf.GetToken()) != "legacy-100" ||
		sf.GetSource() != store.SourceMigrated {
		t.Fatalf("StartFrom %v, want RESUME_AFTER legacy-100 (migrated)", sf)
	}
	if n := h.pos.count(); n != 0 {
		t.Fatalf("PositionSource called %d times: the shared checkpoint is the starting point", n)
	}
	own, ok := h.load(podB)
	if !ok || tokData(own.Token) != "legacy-100" || own.Source != store.SourceMigrated || own.ClusterTime != legacy.ClusterTime ||
		own.Owner != "instance-a" || own.ExpiresAt.IsZero() {
		t.Fatalf("pod-b's migrated checkpoint %+v (ok %v)", own, ok)
	}
	if ev := event[cpEvent](h); ev.Checkpoint.Source != store.SourceMigrated {
		t.Fatalf("Checkpointed %+v", ev)
	}
	if s, _ := h.load(sharedScope); tokData(s.Token) != "legacy-100" || s.Owner != "old-1" {
		t.Fatalf("the shared checkpoint was changed: %+v", s)
	}

	// An instance of the earlier version moves the shared checkpoint; pod-b restarts.
	h.save(store.Checkpoint{Stream: "orders", Token: tok("legacy-200"), Source: store.SourceEvent, UpdatedAt: h.clk.Now()})
	h.restartCheckpointer()
	if sf := h.resolve(2); tokData(sf.GetToken()) != "legacy-100" || sf.GetSource() != store.SourceMigrated {
		t.Fatalf("after a restart %v, want pod-b's own legacy-100: the shared checkpoint is taken once", sf)
	}
}

// TestInstanceIgnoresASharedCheckpointPastRetention: a shared checkpoint not written for longer
// than Retention is not migrated (an instance's own would have expired): the instance starts
// as a new stream.
func TestInstanceIgnoresASharedCheckpointPastRetention(t *testing.T) {
	h := newHarness(t, onInstance)
	h.clk.Advance(40 * 24 * time.Hour)
	h.save(store.Checkpoint{Stream: "orders", Token: tok("legacy-old"), Source: store.SourceEvent,
		UpdatedAt: h.clk.Now().Add(-31 * 24 * time.Hour)})
	if sf := h.resolve(1); tokData(sf.GetToken()) != "0now-1" || sf.GetSource() != store.SourceInitial {
		t.Fatalf("StartFrom %v, want the captured now-1: the shared checkpoint is past its retention", sf)
	}
}

// TestInstanceMigrationKeepsAnInvalidateStartAfter: a shared invalidate position stays a
// startAfter one once migrated (a resumeAfter an invalidate is refused by the server).
func TestInstanceMigrationKeepsAnInvalidateStartAfter(t *testing.T) {
	h := newHarness(t, onInstance)
	h.save(store.Checkpoint{Stream: "orders", Token: tok("inv"), Source: sourceInvalidate, UpdatedAt: h.clk.Now()})
	if sf := h.resolve(1); sf.GetKind() != messages.StartKind_START_KIND_START_AFTER {
		t.Fatalf("StartFrom %v, want START_AFTER", sf)
	}
	h.restartCheckpointer()
	if sf := h.resolve(2); sf.GetKind() != messages.StartKind_START_KIND_START_AFTER || tokData(sf.GetToken()) != "inv" {
		t.Fatalf("after a restart %v, want START_AFTER inv from pod-b's own", sf)
	}
}

// TestInstanceGapIsItsOwn: a gap recorded by an instance carries it and an ID naming it.
func TestInstanceGapIsItsOwn(t *testing.T) {
	h := newHarness(t, func(h *harness, c *Config) {
		onInstance(h, c)
		c.OnHistoryLost = policy.ResumeFromNow
	})
	h.save(store.Checkpoint{Stream: "orders", Instance: "pod-b", Token: tok("old"), Source: store.SourceEvent})
	h.resolve(1)
	h.historyLost(1, 286, "gone")
	event[observe.HistoryLost](h)
	g := event[store.Gap](h)
	if g.Instance != "pod-b" || !strings.HasPrefix(g.ID, "orders/pod-b/") || tokData(g.FromToken) != "old" {
		t.Fatalf("gap %+v: want pod-b's, from its own position", g)
	}
	if gaps, _ := h.ms.ListGaps(context.Background(), podB); len(gaps) != 1 {
		t.Fatalf("pod-b's gaps: %+v", gaps)
	}
	if gaps, _ := h.ms.ListGaps(context.Background(), sharedScope); len(gaps) != 0 {
		t.Fatalf("shared gaps: %+v", gaps)
	}
}

// TestEphemeralWritesNothing: an Ephemeral checkpointer never loads or saves a checkpoint: it
// starts at the current position (even when a checkpoint exists), keeps the position in memory
// across cursor restarts, is never held back by MaxUnflushed, answers Flush at once, and a new
// checkpointer instance starts at the current position again.
func TestEphemeralWritesNothing(t *testing.T) {
	h := newHarness(t, func(h *harness, c *Config) {
		onInstance(h, c)
		c.Checkpoint = policy.Checkpoint{Ephemeral: true}
	})
	h.save(store.Checkpoint{Stream: "orders", Instance: "pod-b", Token: tok("stored"), Source: store.SourceEvent})
	base := h.ms.Stats()

	sf := h.resolve(1)
	if sf.GetKind() != messages.StartKind_START_KIND_RESUME_AFTER || tokData(sf.GetToken()) != "0now-1" || sf.GetSource() != sourceLatest {
		t.Fatalf("StartFrom %v, want RESUME_AFTER the current now-1 (latest)", sf)
	}
	// More settlements than MaxUnflushed (10,000 by default): the settle limit keeps growing.
	const n = 12_000
	h.progress(1, n, nil)
	for from := uint64(1); from <= n; from += 1000 {
		h.settle(1, seqRange(from, from+999)...)
	}
	h.sync()
	var limit uint64
	for len(h.probe) > 0 {
		if fc, ok := (<-h.probe).(*wire.FlowControl); ok {
			limit = fc.GetSettleLimit()
			if fc.GetPaused() {
				t.Fatalf("FlowControl paused: %v", fc)
			}
		}
	}
	if limit < n {
		t.Fatalf("settle limit %d after %d settlements: an ephemeral stream must never wait for a write", limit, n)
	}
	if fl := h.flush(); fl.GetError() != "" || tokData(fl.GetToken()) != "ev012000" {
		t.Fatalf("Flushed %v, want no error and the in-memory ev012000", fl)
	}
	// A new cursor of the same tree resumes from memory.
	if sf := h.resolve(2); tokData(sf.GetToken()) != "ev012000" || sf.GetSource() != sourceMemory {
		t.Fatalf("cursor restart %v, want ev012000 from memory", sf)
	}
	// A new checkpointer (a new tree) starts at the current position again.
	h.pos.set(tok("0now-2"), bson.Timestamp{T: 2000}, nil)
	h.restartCheckpointer()
	if sf := h.resolve(3); tokData(sf.GetToken()) != "0now-2" || sf.GetSource() != sourceLatest {
		t.Fatalf("after a restart %v, want the current now-2", sf)
	}
	h.noEvent() // no Checkpointed
	got := h.ms.Stats()
	if got.Saves != base.Saves || got.Loads != base.Loads {
		t.Fatalf("store calls: %d saves, %d loads, want none (stats %+v, before %+v)", got.Saves-base.Saves, got.Loads-base.Loads, got, base)
	}
	if cp, _ := h.load(podB); tokData(cp.Token) != "stored" {
		t.Fatalf("the stored checkpoint changed: %+v", cp)
	}
}

// TestEphemeralHistoryLostRecordsTheGapOnly: after history was lost, an Ephemeral stream still
// records the gap (a gap is never silent) but writes no checkpoint.
func TestEphemeralHistoryLostRecordsTheGapOnly(t *testing.T) {
	h := newHarness(t, func(h *harness, c *Config) {
		onInstance(h, c)
		c.Checkpoint = policy.Checkpoint{Ephemeral: true}
		c.OnHistoryLost = policy.ResumeFromNow
	})
	h.resolve(1)
	base := h.ms.Stats()
	h.pos.set(tok("0now-9"), bson.Timestamp{T: 9000}, nil)
	sf := h.historyLost(1, 286, "gone")
	if tokData(sf.GetToken()) != "0now-9" || sf.GetSource() != store.SourceResumeFromNow {
		t.Fatalf("StartFrom %v, want now-9", sf)
	}
	event[observe.HistoryLost](h)
	if g := event[store.Gap](h); g.Instance != "pod-b" {
		t.Fatalf("gap %+v", g)
	}
	h.noEvent()
	if got := h.ms.Stats(); got.Gaps != base.Gaps+1 || got.Saves != base.Saves || got.Loads != base.Loads {
		t.Fatalf("store calls %+v (before %+v): want one gap, no save or load", got, base)
	}
}

func TestEphemeralRejectsAt(t *testing.T) {
	err := Config{Stream: "orders", Store: nopStore{}, Positions: &fakePositions{},
		Checkpoint: policy.Checkpoint{Ephemeral: true}, StartPosition: policy.At(time.Unix(1_700_000_000, 0))}.validate()
	if err == nil || !strings.Contains(err.Error(), "Config.StartPosition must be Resume or Latest when Checkpoint.Ephemeral is set") {
		t.Fatalf("Validate: %v", err)
	}
}

type nopStore struct{}

func (nopStore) Load(context.Context, store.Scope) (store.Checkpoint, bool, error) {
	return store.Checkpoint{}, false, nil
}
func (nopStore) Save(context.Context, store.Checkpoint) error { return nil }

// waitUntil polls cond until it holds, failing after waitFor.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // a polling tick
	}
}

// restartCheckpointer has the parent restart the checkpointer (a new instance, no memory) and
// returns once the restart is queued ahead of any later message to it: the parent handled the
// request, and a restart is a system message, which the child takes before user messages.
func (h *harness) restartCheckpointer() {
	h.t.Helper()
	h.sys.Root.Send(h.parentPID, restartChild{})
	if _, err := h.sys.Root.RequestFuture(h.parentPID, &actor.Touch{}, waitFor).Result(); err != nil {
		h.t.Fatalf("sync with the parent: %v", err)
	}
}
