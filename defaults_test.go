package watchtree

import (
	"context"
	"github.com/watchtree/watchtree/internal/policyx"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/actors/checkpointer"
	"github.com/watchtree/watchtree/actors/dispatcher"
	"github.com/watchtree/watchtree/actors/leader"
	"github.com/watchtree/watchtree/actors/snapshot"
	"github.com/watchtree/watchtree/actors/stream"
	"github.com/watchtree/watchtree/actors/supervisor"
	"github.com/watchtree/watchtree/internal/defaultcheck"
	"github.com/watchtree/watchtree/internal/engine"
	"github.com/watchtree/watchtree/policy"
)

// A defaultRow is one resolved default: the value the compile step or the engine produced
// (got), the value the docs state (want, written out here, not taken from the code's
// constants), and where the docs state it. A default changed in the code, or in the doc,
// alone fails TestCompiledDefaults.
type defaultRow struct {
	field string // "Spec.Lanes", "Dispatcher.Capacity": the resolved field
	got   any
	want  any
	// doc is the godoc of a field, "file:Type.Field", that states the default; "" when the
	// value is no documented default of its own (a name, or derived from another row).
	doc string
	// says is what the doc must say; "": one of the renderings of want (1000 or 1,000, 30s, ...).
	says string
}

// TestCompiledDefaults compiles a zero Stream (Name, Collection and a handler only) and spawns
// it, and compares every value field of the compiled engine Spec and of the actor configs the
// engine builds from it (TreeConfigs: checkpointer, dispatcher, stream actor, on-demand snapshot
// actor, supervisor; a SingleLeader stream's leader) with the documented defaults, and each
// documented default with its godoc. Every value field of those structs needs a row (or an
// entry in notDefaults), so a field added later without its default checked fails too; and no
// config the engine builds leaves a field for its actor to fill in (the actors' own
// TestActorDefaults checks that the actors' filling equals their DefaultConfig).
func TestCompiledDefaults(t *testing.T) {
	env := newRTEnv(t)
	rt, _ := env.newRuntime(t, nil)
	handler := func(context.Context, *Event[bson.Raw]) error { return nil }
	s := Stream[bson.Raw]{Name: "orders", Collection: "orders", OnChange: handler}
	cs, err := s.compile()
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), rtWait)
	defer cancel()
	h, err := rt.Spawn(ctx, s)
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	tc := h.e.TreeConfigs()
	led, err := rt.Spawn(ctx, Stream[bson.Raw]{Name: "billing", Collection: "billing", Mode: SingleLeader, OnChange: handler})
	if err != nil {
		t.Fatalf("Spawn SingleLeader: %v", err)
	}
	ltc := led.e.TreeConfigs()
	if tc.OnDemand == nil || ltc.Leader == nil || tc.Snapshot != nil || tc.Leader != nil {
		t.Fatalf("TreeConfigs: want an on-demand config and no snapshot or leader for the zero stream, and a leader for the SingleLeader one; got %+v / %+v", tc, ltc)
	}

	const (
		day = 24 * time.Hour
		mib = 1 << 20
	)
	rows := []defaultRow{
		// The compiled Spec (stream.go compile).
		{"Spec.FullDocument", cs.FullDocument, "", "stream.go:Stream.FullDocument", "FullDocumentDefault (nothing on updates)"},
		{"Spec.PreImage", cs.PreImage, "", "stream.go:Stream.FullDocumentBeforeChange", "Default PreImageOff"},
		{"Spec.Split", cs.Split, engine.SplitAuto, "stream.go:Stream.SplitLargeEvents", "Default SplitAuto"},
		{"Spec.SingleLeader", cs.SingleLeader, false, "stream.go:Stream.Mode", "Default AllInstances"},
		{"Spec.Shared", cs.Shared, true, "stream.go:Stream.Cursor", "Shared for a Collection stream"},
		{"Spec.SharedAsked", cs.SharedAsked, false, "", ""},
		{"Spec.Lanes", cs.Lanes, 1, "stream.go:Stream.Lanes", "Default 1"},
		{"Spec.Start", policyx.StartKindOf(cs.Start), policyx.StartResume, "stream.go:Stream.StartPosition", "Default Resume"},
		{"Spec.Retry", cs.Retry, policy.Retry{MaxAttempts: 3, InitialDelay: 500 * time.Millisecond, MaxDelay: 30 * time.Second, Multiplier: 2}, "stream.go:Stream.Retry", "Default 3 attempts, 500ms × 2^(n-1) capped at 30s, ±20%"},
		{"Spec.Retry.MaxAttempts", cs.Retry.MaxAttempts, 3, "policy/backoff.go:Retry.MaxAttempts", ""},
		{"Spec.Retry.InitialDelay", cs.Retry.InitialDelay, 500 * time.Millisecond, "policy/backoff.go:Retry.InitialDelay", ""},
		{"Spec.Retry.MaxDelay", cs.Retry.MaxDelay, 30 * time.Second, "policy/backoff.go:Retry.MaxDelay", ""},
		{"Spec.Retry.Multiplier", cs.Retry.Multiplier, 2.0, "policy/backoff.go:Retry.Multiplier", ""},
		{"Spec.Restart", cs.Restart, policy.Restart{InitialDelay: time.Second, MaxDelay: 60 * time.Second, Multiplier: 2}, "stream.go:Stream.Restart", "Default unlimited, 1s × 2^(n-1) capped at 60s"},
		{"Spec.Restart.InitialDelay", cs.Restart.InitialDelay, time.Second, "policy/backoff.go:Restart.InitialDelay", ""},
		{"Spec.Restart.MaxDelay", cs.Restart.MaxDelay, 60 * time.Second, "policy/backoff.go:Restart.MaxDelay", ""},
		{"Spec.Restart.Multiplier", cs.Restart.Multiplier, 2.0, "policy/backoff.go:Restart.Multiplier", ""},
		{"Spec.Checkpoint", cs.Checkpoint, policy.Checkpoint{SaveEvery: 1000, SaveInterval: time.Second, IdleInterval: 5 * time.Minute, MaxUnflushed: 10000, Retention: 30 * day}, "stream.go:Stream.Checkpoint", "Default every 1,000 settlements or 1s"},
		{"Spec.Checkpoint.SaveEvery", cs.Checkpoint.SaveEvery, 1000, "policy/checkpoint.go:Checkpoint.SaveEvery", ""},
		{"Spec.Checkpoint.SaveInterval", cs.Checkpoint.SaveInterval, time.Second, "policy/checkpoint.go:Checkpoint.SaveInterval", ""},
		{"Spec.Checkpoint.IdleInterval", cs.Checkpoint.IdleInterval, 5 * time.Minute, "policy/checkpoint.go:Checkpoint.IdleInterval", ""},
		{"Spec.Checkpoint.MaxUnflushed", cs.Checkpoint.MaxUnflushed, 10000, "policy/checkpoint.go:Checkpoint.MaxUnflushed", ""},
		{"Spec.Checkpoint.Retention", cs.Checkpoint.Retention, 30 * day, "policy/checkpoint.go:Checkpoint.Retention", ""},
		{"Spec.DeadLetter", cs.DeadLetter, engine.DeadLetter{Collection: "_wt_dead_letters", Retention: 14 * day}, "stream.go:Stream.DeadLetter", `Default on, "_wt_dead_letters", 14 days`},
		{"Spec.DeadLetter.Collection", cs.DeadLetter.Collection, "_wt_dead_letters", "policy.go:DeadLetterPolicy.Collection", ""},
		{"Spec.DeadLetter.Retention", cs.DeadLetter.Retention, 14 * day, "policy.go:DeadLetterPolicy.Retention", ""},
		{"Spec.OnHistoryLost", policyx.HistoryLostKindOf(cs.OnHistoryLost), policyx.HistoryFail, "stream.go:Stream.OnHistoryLost", "Default Fail"},
		{"Spec.InvalidateRestart", cs.InvalidateRestart, false, "stream.go:Stream.OnInvalidate", "Default InvalidateStop"},
		{"Spec.Snapshot", cs.Snapshot, policy.Snapshot{Partitions: 4, BatchSize: 1000, HandoffRefresh: time.Minute}, "stream.go:Stream.Snapshot", "Default SnapshotNever"},
		{"Spec.Snapshot.Partitions", cs.Snapshot.Partitions, 4, "policy/snapshot.go:Snapshot.Partitions", ""},
		{"Spec.Snapshot.BatchSize", cs.Snapshot.BatchSize, 1000, "policy/snapshot.go:Snapshot.BatchSize", ""},
		{"Spec.Snapshot.HandoffRefresh", cs.Snapshot.HandoffRefresh, time.Minute, "policy/snapshot.go:Snapshot.HandoffRefresh", ""},
		{"Spec.Transactional", cs.Transactional, false, "stream.go:Stream.Transactional", "Default false"},
		{"Spec.TxBatch", cs.TxBatch, engine.TxBatch{MaxEvents: 1, MaxBytes: mib, MaxDuration: time.Second}, "stream.go:Stream.TxBatch", "Default: one event per transaction"},
		{"Spec.TxBatch.MaxEvents", cs.TxBatch.MaxEvents, 1, "txbatch.go:TxBatchPolicy.MaxEvents", ""},
		{"Spec.TxBatch.MaxBytes", cs.TxBatch.MaxBytes, mib, "txbatch.go:TxBatchPolicy.MaxBytes", "Default 1 MiB"},
		{"Spec.TxBatch.MaxDuration", cs.TxBatch.MaxDuration, time.Second, "txbatch.go:TxBatchPolicy.MaxDuration", ""},

		// The checkpointer (tree.go): the Spec's policy, the runtime's ConnectTimeout.
		{"Checkpointer.StartPosition", policyx.StartKindOf(tc.Checkpointer.StartPosition), policyx.StartResume, "", ""},
		{"Checkpointer.OnHistoryLost", policyx.HistoryLostKindOf(tc.Checkpointer.OnHistoryLost), policyx.HistoryFail, "", ""},
		{"Checkpointer.Snapshot", tc.Checkpointer.Snapshot, cs.Snapshot, "", ""},
		{"Checkpointer.Checkpoint", tc.Checkpointer.Checkpoint, cs.Checkpoint, "", ""},
		{"Checkpointer.RetryInitialDelay", tc.Checkpointer.RetryInitialDelay, 100 * time.Millisecond, "actors/checkpointer/config.go:Config.RetryInitialDelay", "Defaults 100ms and 30s"},
		{"Checkpointer.RetryMaxDelay", tc.Checkpointer.RetryMaxDelay, 30 * time.Second, "actors/checkpointer/config.go:Config.RetryMaxDelay", "Defaults 100ms and 30s"},
		{"Checkpointer.IOTimeout", tc.Checkpointer.IOTimeout, 10 * time.Second, "config.go:Config.ConnectTimeout", "Default 10s"},

		// The dispatcher.
		{"Dispatcher.Lanes", tc.Dispatcher.Lanes, 1, "stream.go:Stream.Lanes", "Default 1"},
		{"Dispatcher.Capacity", tc.Dispatcher.Capacity, 4096, "actors/dispatcher/config.go:Config.Capacity", ""},
		{"Dispatcher.Retry", tc.Dispatcher.Retry, cs.Retry, "", ""},
		{"Dispatcher.DeadLetterRetention", tc.Dispatcher.DeadLetterRetention, 14 * day, "policy.go:DeadLetterPolicy.Retention", ""},
		{"Dispatcher.DeadLetterTimeout", tc.Dispatcher.DeadLetterTimeout, 30 * time.Second, "actors/dispatcher/config.go:Config.DeadLetterTimeout", ""},
		{"Dispatcher.AwaitSettleLimit", tc.Dispatcher.AwaitSettleLimit, true, "", ""}, // the runtime sets it (the checkpointer's settle limit)
		{"Dispatcher.CheckpointerName", tc.Dispatcher.CheckpointerName, "checkpointer", "actors/dispatcher/config.go:Config.CheckpointerName", ""},
		{"Dispatcher.SettleBatch", tc.Dispatcher.SettleBatch, 1024, "actors/dispatcher/config.go:Config.SettleBatch", ""},
		{"Dispatcher.SettleFlushInterval", tc.Dispatcher.SettleFlushInterval, 50 * time.Millisecond, "actors/dispatcher/config.go:Config.SettleFlushInterval", ""},
		{"Dispatcher.DrainTimeout", tc.Dispatcher.DrainTimeout, 30 * time.Second, "actors/dispatcher/config.go:Config.DrainTimeout", ""},
		{"Dispatcher.StopTimeout", tc.Dispatcher.StopTimeout, 10 * time.Second, "actors/dispatcher/config.go:Config.StopTimeout", ""},

		// The stream actor.
		{"Stream.Checkpointer", tc.Stream.Checkpointer, "checkpointer", "", ""},
		{"Stream.Dispatcher", tc.Stream.Dispatcher, "dispatcher", "", ""},
		{"Stream.Snapshot", tc.Stream.Snapshot, "snapshot", "actors/stream/config.go:Config.Snapshot", `Default "snapshot"`},
		{"Stream.MaxBatch", tc.Stream.MaxBatch, 1024, "actors/stream/config.go:Config.MaxBatch", ""},
		{"Stream.MaxAwaitTime", tc.Stream.MaxAwaitTime, time.Second, "actors/stream/config.go:Config.MaxAwaitTime", ""},
		{"Stream.CloseTimeout", tc.Stream.CloseTimeout, 5 * time.Second, "actors/stream/config.go:Config.CloseTimeout", ""},
		{"Stream.InvalidateRestart", tc.Stream.InvalidateRestart, false, "", ""},
		{"Stream.HistoryLostCodes", tc.Stream.HistoryLostCodes, []int32{286, 280, 136}, "actors/stream/config.go:Config.HistoryLostCodes", "286, 280 and 136"},

		// The on-demand snapshot actor (built at the first Handle.Snapshot).
		{"OnDemand.BatchSize", tc.OnDemand.BatchSize, 1000, "policy/snapshot.go:Snapshot.BatchSize", ""},
		{"OnDemand.Dispatcher", tc.OnDemand.Dispatcher, "dispatcher", "", ""},
		{"OnDemand.IOTimeout", tc.OnDemand.IOTimeout, time.Minute, "", ""}, // max(ConnectTimeout, the engine's snapshot read bound)

		// The supervisor.
		{"Supervisor.ChildName", tc.Supervisor.ChildName, "stream", "actors/supervisor/config.go:Config.ChildName", ""},
		{"Supervisor.Policy", tc.Supervisor.Policy, cs.Restart, "", ""},
		{"Supervisor.Dispatcher", tc.Supervisor.Dispatcher, "dispatcher", "", ""},
		{"Supervisor.Checkpointer", tc.Supervisor.Checkpointer, "checkpointer", "", ""},
		{"Supervisor.OnDemand", tc.Supervisor.OnDemand, "ondemand", "actors/supervisor/config.go:Config.OnDemand", `default "ondemand"`},
		{"Supervisor.StartStopped", tc.Supervisor.StartStopped, false, "", ""},
		{"Supervisor.LeaderName", tc.Supervisor.LeaderName, "leader", "actors/supervisor/config.go:Config.LeaderName", ""},
		{"Supervisor.HandOverCooldown", tc.Supervisor.HandOverCooldown, time.Duration(0), "", ""},
		// min(RenewEvery, StandbyPoll) of the default LeasePolicy.
		{"Supervisor.ReleaseCooldown", tc.Supervisor.ReleaseCooldown, 15 * time.Second, "actors/supervisor/config.go:Config.ReleaseCooldown", "min(RenewEvery, StandbyPoll)"},

		// The leader actor of a SingleLeader stream: the runtime's LeasePolicy.
		{"Leader.Policy.TTL", ltc.Leader.Policy.TTL, 60 * time.Second, "policy/lease.go:Lease.TTL", ""},
		{"Leader.Policy.RenewEvery", ltc.Leader.Policy.RenewEvery, 15 * time.Second, "policy/lease.go:Lease.RenewEvery", ""},
		{"Leader.Policy.StandbyPoll", ltc.Leader.Policy.StandbyPoll, 20 * time.Second, "policy/lease.go:Lease.StandbyPoll", ""},
		{"Leader.Policy.Margin", ltc.Leader.Policy.Margin, 6 * time.Second, "policy/lease.go:Lease.Margin", ""},
		{"Leader.Policy.Balance", ltc.Leader.Policy.Balance, policy.BalanceOn, "policy/lease.go:Lease.Balance", "Default BalanceOn"},
		{"Leader.IOTimeout", ltc.Leader.IOTimeout, 10 * time.Second, "config.go:Config.ConnectTimeout", "Default 10s"},
	}

	docs := map[string]map[string]string{} // "file:Type" → field → godoc
	for _, r := range rows {
		if !reflect.DeepEqual(r.got, r.want) {
			t.Errorf("%s = %v, want the documented default %v", r.field, r.got, r.want)
		}
		if r.doc == "" {
			continue
		}
		file, typField, _ := strings.Cut(r.doc, ":")
		typ, field, _ := strings.Cut(typField, ".")
		key := file + ":" + typ
		if docs[key] == nil {
			fd, err := fieldDocs(file, typ)
			if err != nil {
				t.Fatalf("%s: %v", r.field, err)
			}
			docs[key] = fd
		}
		doc, ok := docs[key][field]
		switch {
		case !ok:
			t.Errorf("%s: %s has no field %s", r.field, key, field)
		case r.says != "":
			if !strings.Contains(doc, r.says) {
				t.Errorf("%s: the godoc of %s does not say %q: %s", r.field, r.doc, r.says, doc)
			}
		case !containsAny(doc, renderings(reflect.ValueOf(r.want))):
			t.Errorf("%s: the godoc of %s does not state the default %v: %s", r.field, r.doc, r.want, doc)
		}
	}

	// Every value field has a row, or is no default: a field added later needs its row.
	notDefaults := map[string]string{
		"Spec.Name": "required", "Spec.Database": "the user's namespace", "Spec.Collection": "the user's namespace",
		"Spec.Pipeline": "the user's stages", "Spec.SnapshotFilter": "the user's filter",
		"Checkpointer.Stream": "the name", "Checkpointer.Instance": "the mode's scope", "Checkpointer.Owner": "the instance",
		"Dispatcher.Stream": "the name", "Dispatcher.Instance": "the mode's scope",
		"Stream.Stream":   "the name",
		"OnDemand.Stream": "the name", "OnDemand.Instance": "the mode's scope", "OnDemand.Database": "the namespace", "OnDemand.Collection": "the namespace",
		"Supervisor.Stream": "the name",
		"Leader.Stream":     "the name", "Leader.Owner": "the instance",
	}
	covered := map[string]bool{}
	for _, r := range rows {
		covered[r.field] = true
	}
	for _, s := range []struct {
		prefix string
		v      any
	}{
		{"Spec", *cs}, {"Checkpointer", tc.Checkpointer}, {"Dispatcher", tc.Dispatcher}, {"Stream", tc.Stream},
		{"OnDemand", *tc.OnDemand}, {"Supervisor", tc.Supervisor}, {"Leader", *ltc.Leader},
	} {
		for _, f := range defaultcheck.ValueFields(s.v) {
			name := s.prefix + "." + f
			if !covered[name] && notDefaults[name] == "" && !slices.ContainsFunc(rows, func(r defaultRow) bool { return strings.HasPrefix(r.field, name+".") }) {
				t.Errorf("%s has no row in TestCompiledDefaults: add its documented default (or say why it has none)", name)
			}
		}
	}

	// The engine leaves nothing for an actor to fill in: each config holds every value its
	// DefaultConfig holds.
	for _, c := range []struct {
		name      string
		got, defs any
	}{
		{"checkpointer", tc.Checkpointer, checkpointer.DefaultConfig()},
		{"dispatcher", tc.Dispatcher, dispatcher.DefaultConfig()},
		{"stream", tc.Stream, stream.DefaultConfig()},
		{"on-demand snapshot", *tc.OnDemand, snapshot.DefaultOnDemandConfig()},
		{"supervisor", tc.Supervisor, supervisor.DefaultConfig()},
		{"leader", *ltc.Leader, leader.DefaultConfig()},
	} {
		if u := defaultcheck.Unresolved(c.got, c.defs); len(u) > 0 {
			t.Errorf("the engine leaves fields of the %s config for the actor to default: %s", c.name, strings.Join(u, ", "))
		}
	}
}
