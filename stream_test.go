package watchtree

import (
	"context"
	"errors"
	"fmt"
	"github.com/watchtree/watchtree/internal/policyx"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree/actors/dispatcher"
	"github.com/watchtree/watchtree/internal/engine"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/policy"
)

func nopHandler(context.Context, *Event[testOrder]) error { return nil }

// validStream is the smallest valid stream; the validation table breaks one field at a time.
func validStream() Stream[testOrder] {
	return Stream[testOrder]{Name: "orders", Collection: "orders", OnInsert: nopHandler}
}

func TestStreamValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(s *Stream[testOrder])
		want   []string // full messages, in order
	}{
		{"valid minimal", func(*Stream[testOrder]) {}, nil},
		{"valid everything set", func(s *Stream[testOrder]) {
			s.Name = "Order-stream_v2.1"
			s.Database = "shop"
			s.Pipeline = mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "insert"}}}}}
			s.Filter = func(*Event[testOrder]) bool { return true }
			s.FullDocument = FullDocumentUpdateLookup
			s.FullDocumentBeforeChange = PreImageRequired
			s.Mode = SingleLeader
			s.Lanes = 1024
			s.StartPosition = At(time.Unix(1700000000, 0))
			s.Retry = RetryPolicy{MaxAttempts: 5, DisableJitter: true}
			s.Restart = RestartPolicy{MaxAttempts: 30, Jitter: true}
			s.Checkpoint = CheckpointPolicy{SaveEvery: 10, SaveInterval: time.Second}
			s.DeadLetter = DeadLetterPolicy{Collection: "dlq", Retention: time.Hour}
			s.OnHistoryLost = Rebuild(func(context.Context) error { return nil })
			s.OnInvalidate = InvalidateRestart
			s.OnChange = nopHandler
		}, nil},
		{"pre-images with only OnInsert is not an error", func(s *Stream[testOrder]) { s.FullDocumentBeforeChange = PreImageWhenAvailable }, nil},
		{"filter with OnDelete is not an error", func(s *Stream[testOrder]) {
			s.OnDelete = nopHandler
			s.Filter = func(*Event[testOrder]) bool { return false }
		}, nil},
		{"database-wide", func(s *Stream[testOrder]) { s.Collection = ""; s.Database = "shop" }, nil},
		{"shared collection stream", func(s *Stream[testOrder]) { s.Cursor = Shared }, nil},
		{"shared database-wide", func(s *Stream[testOrder]) { s.Collection = ""; s.Database = "shop"; s.Cursor = Shared },
			[]string{`watchtree: Stream "orders": Cursor Shared needs a Collection stream (a shared cursor serves collections of one database), got a database stream`}},
		{"shared cluster-wide", func(s *Stream[testOrder]) { s.Collection = ""; s.Cursor = Shared },
			[]string{`watchtree: Stream "orders": Cursor Shared needs a Collection stream (a shared cursor serves collections of one database), got a cluster stream`}},
		{"unknown cursor mode", func(s *Stream[testOrder]) { s.Cursor = CursorMode(7) },
			[]string{`watchtree: Stream "orders": Cursor must be CursorDefault, Dedicated or Shared, got CursorMode(7)`}},
		{"cluster-wide", func(s *Stream[testOrder]) { s.Collection = "" }, nil},
		{"empty name", func(s *Stream[testOrder]) { s.Name = "" },
			[]string{`watchtree: Stream "": Name must be 1-100 characters from [A-Za-z0-9._-], starting with a letter or digit, got ""`}},
		{"name with a slash", func(s *Stream[testOrder]) { s.Name = "a/b" },
			[]string{`watchtree: Stream "a/b": Name must be 1-100 characters from [A-Za-z0-9._-], starting with a letter or digit, got "a/b"`}},
		{"name with a space", func(s *Stream[testOrder]) { s.Name = "my stream" },
			[]string{`watchtree: Stream "my stream": Name must be 1-100 characters from [A-Za-z0-9._-], starting with a letter or digit, got "my stream"`}},
		{"name starting with a dash", func(s *Stream[testOrder]) { s.Name = "-x" },
			[]string{`watchtree: Stream "-x": Name must be 1-100 characters from [A-Za-z0-9._-], starting with a letter or digit, got "-x"`}},
		{"name too long", func(s *Stream[testOrder]) { s.Name = strings.Repeat("a", 101) },
			[]string{`watchtree: Stream "` + strings.Repeat("a", 101) + `": Name must be 1-100 characters from [A-Za-z0-9._-], starting with a letter or digit, got "` + strings.Repeat("a", 101) + `"`}},
		{"non-ASCII name", func(s *Stream[testOrder]) { s.Name = "commandé" },
			[]string{`watchtree: Stream "commandé": Name must be 1-100 characters from [A-Za-z0-9._-], starting with a letter or digit, got "commandé"`}},
		{"database with a dot", func(s *Stream[testOrder]) { s.Database = "a.b" },
			[]string{`watchtree: Stream "orders": Database must not contain any of /\. "$*<>:|? or NUL, got "a.b"`}},
		{"database too long", func(s *Stream[testOrder]) { s.Database = strings.Repeat("d", 64) },
			[]string{`watchtree: Stream "orders": Database must be shorter than 64 bytes, got "` + strings.Repeat("d", 64) + `"`}},
		{"collection with $", func(s *Stream[testOrder]) { s.Collection = "a$" },
			[]string{`watchtree: Stream "orders": Collection must not contain '$' or NUL, got "a$"`}},
		{"system collection", func(s *Stream[testOrder]) { s.Collection = "system.views" },
			[]string{`watchtree: Stream "orders": Collection must not start with "system.", got "system.views"`}},
		{"pipeline single document", func(s *Stream[testOrder]) { s.Pipeline = bson.D{{Key: "$match", Value: bson.D{}}} },
			[]string{`watchtree: Stream "orders": Pipeline must be a list of stages (mongo.Pipeline, bson.A, []bson.M), got a single document bson.D`}},
		{"pipeline not a list", func(s *Stream[testOrder]) { s.Pipeline = 3 },
			[]string{`watchtree: Stream "orders": Pipeline must be a list of stages (mongo.Pipeline, bson.A, []bson.M), got int`}},
		{"pipeline stage not a document", func(s *Stream[testOrder]) { s.Pipeline = bson.A{"$match"} },
			[]string{`watchtree: Stream "orders": Pipeline[0] must marshal to a BSON document, got string: WriteString can only write while positioned on a Element or Value but is positioned on a TopLevel`}},
		{"pipeline nil stage", func(s *Stream[testOrder]) { s.Pipeline = bson.A{bson.D{{Key: "$match", Value: bson.D{}}}, nil} },
			[]string{`watchtree: Stream "orders": Pipeline[1] must be a stage document, got nil`}},
		{"pipeline stage with two keys", func(s *Stream[testOrder]) {
			s.Pipeline = []bson.D{{{Key: "$match", Value: bson.D{}}, {Key: "$project", Value: bson.D{}}}}
		}, []string{`watchtree: Stream "orders": Pipeline[0] must have exactly one field (the stage operator), got 2`}},
		{"pipeline empty stage", func(s *Stream[testOrder]) { s.Pipeline = []bson.M{{}} },
			[]string{`watchtree: Stream "orders": Pipeline[0] must have exactly one field (the stage operator), got 0`}},
		{"pipeline stage without $", func(s *Stream[testOrder]) { s.Pipeline = []bson.M{{"match": bson.M{}}} },
			[]string{`watchtree: Stream "orders": Pipeline[0] must be a stage operator starting with "$", got "match"`}},
		{"pipeline with $changeStream", func(s *Stream[testOrder]) { s.Pipeline = []bson.M{{"$changeStream": bson.M{}}} },
			[]string{`watchtree: Stream "orders": Pipeline[0] must not be $changeStream; watchtree adds it`}},
		{"pipeline with $merge", func(s *Stream[testOrder]) {
			s.Pipeline = bson.A{bson.M{"$match": bson.M{}}, bson.M{"$merge": "x"}}
		}, []string{`watchtree: Stream "orders": Pipeline[1] must not be $merge; a change stream cannot write`}},
		{"pipeline invalid raw stage", func(s *Stream[testOrder]) { s.Pipeline = []bson.Raw{{1, 2}} },
			[]string{`watchtree: Stream "orders": Pipeline[0] must be a valid BSON document: too few bytes to read next component`}},
		{"unknown full document mode", func(s *Stream[testOrder]) { s.FullDocument = "always" },
			[]string{`watchtree: Stream "orders": FullDocument must be one of "", "updateLookup", "whenAvailable", "required", got "always"`}},
		{"unknown pre-image mode", func(s *Stream[testOrder]) { s.FullDocumentBeforeChange = "updateLookup" },
			[]string{`watchtree: Stream "orders": FullDocumentBeforeChange must be one of "", "whenAvailable", "required", got "updateLookup"`}},
		{"unknown mode", func(s *Stream[testOrder]) { s.Mode = 7 },
			[]string{`watchtree: Stream "orders": Mode must be AllInstances or SingleLeader, got Mode(7)`}},
		{"negative lanes", func(s *Stream[testOrder]) { s.Lanes = -1 },
			[]string{`watchtree: Stream "orders": Lanes must be between 1 and 1024 (0 means the default 1), got -1`}},
		{"too many lanes", func(s *Stream[testOrder]) { s.Lanes = 1025 },
			[]string{`watchtree: Stream "orders": Lanes must be between 1 and 1024 (0 means the default 1), got 1025`}},
		{"At zero time", func(s *Stream[testOrder]) { s.StartPosition = At(time.Time{}) },
			[]string{`watchtree: Stream "orders": StartPosition At needs a non-zero time`}},
		{"At before 1970", func(s *Stream[testOrder]) { s.StartPosition = At(time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC)) },
			[]string{`watchtree: Stream "orders": StartPosition At needs a time between 1970 and 2106, got 1969-12-31T00:00:00Z`}},
		{"At after 2106", func(s *Stream[testOrder]) { s.StartPosition = At(time.Date(2107, 1, 1, 0, 0, 0, 0, time.UTC)) },
			[]string{`watchtree: Stream "orders": StartPosition At needs a time between 1970 and 2106, got 2107-01-01T00:00:00Z`}},
		{"retry attempts", func(s *Stream[testOrder]) { s.Retry.MaxAttempts = -2 },
			[]string{`watchtree: Stream "orders": Retry.MaxAttempts must be >= 1 (0 means the default 3), got -2`}},
		{"retry multiplier NaN", func(s *Stream[testOrder]) { s.Retry.Multiplier = math.NaN() },
			[]string{`watchtree: Stream "orders": Retry.Multiplier must be finite and >= 1, got NaN`}},
		{"retry delays", func(s *Stream[testOrder]) { s.Retry.InitialDelay = time.Minute; s.Retry.MaxDelay = time.Second },
			[]string{`watchtree: Stream "orders": Retry.MaxDelay must be >= InitialDelay (1m0s), got 1s`}},
		{"restart attempts", func(s *Stream[testOrder]) { s.Restart.MaxAttempts = -1 },
			[]string{`watchtree: Stream "orders": Restart.MaxAttempts must be >= 0 (0 means unlimited), got -1`}},
		{"restart multiplier Inf", func(s *Stream[testOrder]) { s.Restart.Multiplier = math.Inf(1) },
			[]string{`watchtree: Stream "orders": Restart.Multiplier must be finite and >= 1, got +Inf`}},
		{"restart initial delay", func(s *Stream[testOrder]) { s.Restart.InitialDelay = -time.Second },
			[]string{`watchtree: Stream "orders": Restart.InitialDelay must be > 0 (0 means the default 1s), got -1s`}},
		{"ephemeral", func(s *Stream[testOrder]) { s.Checkpoint.Ephemeral = true; s.StartPosition = Latest }, nil},
		{"ephemeral starting at a time", func(s *Stream[testOrder]) {
			s.Checkpoint.Ephemeral = true
			s.StartPosition = At(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
		},
			[]string{`watchtree: Stream "orders": StartPosition must be Resume or Latest when Checkpoint.Ephemeral is set (an ephemeral stream starts at the current position on every start), got At(2026-03-01T00:00:00Z)`}},
		{"transactional ephemeral", func(s *Stream[testOrder]) { s.Checkpoint.Ephemeral = true; s.Transactional = true },
			[]string{`watchtree: Stream "orders": Transactional requires a stored checkpoint: an Ephemeral stream starts from now after a restart, so its applied records would protect nothing and never be purged, got Checkpoint.Ephemeral true`}},
		{"transactional", func(s *Stream[testOrder]) { s.Transactional = true; s.Mode = SingleLeader; s.Lanes = 8 }, nil},
		{"transactional batches", func(s *Stream[testOrder]) { s.Transactional = true; s.TxBatch = TxBatchPolicy{MaxEvents: 100} }, nil},
		{"batches without transactions", func(s *Stream[testOrder]) { s.TxBatch.MaxEvents = 100 },
			[]string{`watchtree: Stream "orders": TxBatch needs Transactional (it batches the events of a Transactional stream's transactions), got Transactional false`}},
		{"bad batches", func(s *Stream[testOrder]) {
			s.Transactional = true
			s.TxBatch = TxBatchPolicy{MaxEvents: 10_001, MaxBytes: -1, MaxDuration: -time.Second}
		}, []string{
			`watchtree: Stream "orders": TxBatch.MaxEvents must be between 1 and 10000 (0 means the default 1), got 10001`,
			`watchtree: Stream "orders": TxBatch.MaxBytes must be >= 0 (0 means the default 1 MiB), got -1`,
			`watchtree: Stream "orders": TxBatch.MaxDuration must be >= 0 (0 means the default 1s), got -1s`,
		}},
		{"ephemeral single leader", func(s *Stream[testOrder]) { s.Checkpoint.Ephemeral = true; s.Mode = SingleLeader },
			[]string{`watchtree: Stream "orders": Checkpoint.Ephemeral requires Mode AllInstances: a SingleLeader stream's one shared position is what the next leader resumes from, got Mode SingleLeader`}},
		{"ephemeral with a save interval", func(s *Stream[testOrder]) { s.Checkpoint.Ephemeral = true; s.Checkpoint.SaveInterval = time.Second },
			[]string{`watchtree: Stream "orders": Checkpoint.SaveInterval must be 0 when Ephemeral is set (an ephemeral stream writes no checkpoint), got 1s`}},
		{"checkpoint retention", func(s *Stream[testOrder]) { s.Checkpoint.Retention = time.Minute },
			[]string{`watchtree: Stream "orders": Checkpoint.Retention must be >= 2 × IdleInterval (5m0s), so that a running idle instance's checkpoint never expires, got 1m0s`}},
		{"checkpoint save every", func(s *Stream[testOrder]) { s.Checkpoint.SaveEvery = -1 },
			[]string{`watchtree: Stream "orders": Checkpoint.SaveEvery must be >= 1 (0 means the default 1000), got -1`}},
		{"checkpoint interval", func(s *Stream[testOrder]) { s.Checkpoint.SaveInterval = -1 },
			[]string{`watchtree: Stream "orders": Checkpoint.SaveInterval must be > 0 (0 means the default 1s), got -1ns`}},
		{"dead letter collection", func(s *Stream[testOrder]) { s.DeadLetter.Collection = "system.dlq" },
			[]string{`watchtree: Stream "orders": DeadLetter.Collection must not start with "system.", got "system.dlq"`}},
		{"dead letter retention", func(s *Stream[testOrder]) { s.DeadLetter.Retention = -time.Hour },
			[]string{`watchtree: Stream "orders": DeadLetter.Retention must be > 0 (0 means the default 336h0m0s), got -1h0m0s`}},
		{"rebuild nil", func(s *Stream[testOrder]) { s.OnHistoryLost = Rebuild(nil) },
			[]string{`watchtree: Stream "orders": OnHistoryLost Rebuild needs a non-nil function`}},
		{"unknown invalidate policy", func(s *Stream[testOrder]) { s.OnInvalidate = 9 },
			[]string{`watchtree: Stream "orders": OnInvalidate must be InvalidateStop or InvalidateRestart, got InvalidatePolicy(9)`}},
		{"no handler", func(s *Stream[testOrder]) { s.OnInsert = nil },
			[]string{`watchtree: Stream "orders": OnChange must be set when no typed handler (OnInsert, OnUpdate, OnReplace, OnDelete) is; the stream has no handler`}},
		{"several at once, in field order", func(s *Stream[testOrder]) {
			s.Lanes = -1
			s.Retry.Multiplier = math.NaN()
			s.OnInsert = nil
		}, []string{
			`watchtree: Stream "orders": Lanes must be between 1 and 1024 (0 means the default 1), got -1`,
			`watchtree: Stream "orders": Retry.Multiplier must be finite and >= 1, got NaN`,
			`watchtree: Stream "orders": OnChange must be set when no typed handler (OnInsert, OnUpdate, OnReplace, OnDelete) is; the stream has no handler`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validStream()
			tt.mutate(&s)
			err := s.Validate()
			got := configErrorsOf(t, err)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d errors %q, want %q", len(got), errorStrings(got), tt.want)
			}
			for i, ce := range got {
				if ce.Error() != tt.want[i] {
					t.Errorf("error %d:\n got %s\nwant %s", i, ce.Error(), tt.want[i])
				}
				if ce.Stream != s.Name {
					t.Errorf("ConfigError.Stream = %q, want %q", ce.Stream, s.Name)
				}
			}
			if err != nil {
				if !errors.Is(err, ErrInvalidConfig) {
					t.Error("must match ErrInvalidConfig")
				}
				if _, cerr := s.compile(); cerr == nil || cerr.Error() != err.Error() {
					t.Errorf("compile error %v differs from Validate error %v", cerr, err)
				}
			}
		})
	}
}

func TestStreamValidateFields(t *testing.T) {
	s := validStream()
	s.OnInsert = nil
	err := s.Validate()
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "OnChange" || !errors.Is(err, ErrNoHandler) {
		t.Fatalf("no-handler error = %#v", err)
	}
	s = validStream()
	s.Restart.Multiplier = math.NaN()
	if !errors.As(s.Validate(), &ce) || ce.Field != "Restart.Multiplier" || ce.Stream != "orders" {
		t.Fatalf("field = %q stream = %q", ce.Field, ce.Stream)
	}
}

func TestStreamCompile(t *testing.T) {
	client := &mongo.Client{}
	s := Stream[testOrder]{
		Name:                     "orders",
		Client:                   client,
		Database:                 "shop",
		Collection:               "orders",
		Pipeline:                 bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "insert"}}}}},
		FullDocument:             FullDocumentWhenAvailable,
		FullDocumentBeforeChange: PreImageWhenAvailable,
		OnChange:                 nopHandler,
	}
	cs, err := Spec(s).compile()
	if err != nil {
		t.Fatal(err)
	}
	if cs.Name != "orders" || cs.Client != client || cs.Scope() != engine.ScopeCollection || cs.Database != "shop" || cs.Collection != "orders" {
		t.Errorf("identity = %+v", cs)
	}
	if cs.Lanes != 1 || cs.SingleLeader || cs.Start != policy.Resume || policyx.HistoryLostKindOf(cs.OnHistoryLost) != policyx.HistoryFail || cs.InvalidateRestart ||
		cs.Split != engine.SplitAuto {
		t.Errorf("defaults: lanes %d single leader %v start %v onHistoryLost %v invalidate restart %v split %v", cs.Lanes,
			cs.SingleLeader, cs.Start, cs.OnHistoryLost, cs.InvalidateRestart, cs.Split)
	}
	if cs.Retry != policyx.WithDefaults(policy.Retry{}) || cs.Restart != policyx.WithDefaults(policy.Restart{}) ||
		cs.DeadLetter != engine.DeadLetter((DeadLetterPolicy{}).withDefaults()) {
		t.Errorf("policies not defaulted: %+v %+v %+v", cs.Retry, cs.Restart, cs.DeadLetter)
	}
	// The checkpoint policy is resolved here too (defaults in one place), but for an Ephemeral
	// one, which stays as given: its write settings must be 0 (the checkpointer checks them).
	if cs.Checkpoint != policyx.WithDefaults(policy.Checkpoint{}) {
		t.Errorf("checkpoint policy %+v, want the defaults", cs.Checkpoint)
	}
	eph := s
	eph.Checkpoint = CheckpointPolicy{Ephemeral: true}
	if ecs, err := eph.compile(); err != nil {
		t.Errorf("ephemeral compile: %v", err)
	} else if ecs.Checkpoint != (policy.Checkpoint{Ephemeral: true}) {
		t.Errorf("ephemeral checkpoint policy %+v, want it as given", ecs.Checkpoint)
	}
	if len(cs.Pipeline) != 1 || cs.Pipeline[0].Lookup("$match", "operationType").StringValue() != "insert" {
		t.Errorf("pipeline = %v", cs.Pipeline)
	}
	if cs.Router == nil {
		t.Fatal("no router")
	}
	if cs.CursorComment() != "watchtree:orders" {
		t.Errorf("comment = %q", cs.CursorComment())
	}
	opts := applyChangeStreamOptions(t, cs.ChangeStreamOptions())
	if opts.Comment != "watchtree:orders" || opts.FullDocument == nil || *opts.FullDocument != options.WhenAvailable ||
		opts.FullDocumentBeforeChange == nil || *opts.FullDocumentBeforeChange != options.WhenAvailable {
		t.Errorf("options = %+v", opts)
	}

	// The compiled pipeline is a copy: changing the user's value afterwards has no effect.
	s.Pipeline.(bson.A)[0] = bson.D{{Key: "$project", Value: bson.D{}}}
	if cs.Pipeline[0].Lookup("$match").IsZero() {
		t.Error("compiled pipeline aliases the user's value")
	}

	s.Collection, s.Database = "", "shop"
	s.FullDocument, s.FullDocumentBeforeChange = "", ""
	s.Pipeline = nil
	cs, err = s.compile()
	if err != nil {
		t.Fatal(err)
	}
	if cs.Scope() != engine.ScopeDatabase || cs.WatchPipeline() == nil || len(cs.WatchPipeline()) != 0 {
		t.Errorf("database scope: %v %v", cs.Scope(), cs.WatchPipeline())
	}
	opts = applyChangeStreamOptions(t, cs.ChangeStreamOptions())
	if opts.FullDocument != nil || opts.FullDocumentBeforeChange != nil {
		t.Errorf("default modes must send nothing: %+v", opts)
	}
	s.Database = ""
	s.Lanes = 8
	if cs, _ = s.compile(); cs.Scope() != engine.ScopeCluster || cs.Lanes != 8 {
		t.Errorf("cluster scope: %v lanes %d", cs.Scope(), cs.Lanes)
	}
	s.Mode, s.OnInvalidate, s.SplitLargeEvents = SingleLeader, InvalidateRestart, SplitOff
	if cs, _ = s.compile(); !cs.SingleLeader || !cs.InvalidateRestart || cs.Split != engine.SplitOff || modeOf(cs) != SingleLeader {
		t.Errorf("SingleLeader, InvalidateRestart, SplitOff: %+v", cs)
	}
}

func applyChangeStreamOptions(t *testing.T, b *options.ChangeStreamOptionsBuilder) *options.ChangeStreamOptions {
	t.Helper()
	o := &options.ChangeStreamOptions{}
	for _, f := range b.List() {
		if err := f(o); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

func TestMarshalPipelineForms(t *testing.T) {
	match := bson.D{{Key: "$match", Value: bson.D{{Key: "x", Value: 1}}}}
	matchRaw, _ := bson.Marshal(match)
	tests := []struct {
		name string
		p    any
		n    int
	}{
		{"nil", nil, 0},
		{"nil mongo.Pipeline", mongo.Pipeline(nil), 0},
		{"empty bson.A", bson.A{}, 0},
		{"mongo.Pipeline", mongo.Pipeline{match, match}, 2},
		{"bson.A of bson.D", bson.A{match}, 1},
		{"bson.A of bson.M", bson.A{bson.M{"$match": bson.M{}}}, 1},
		{"[]bson.M", []bson.M{{"$limit": 1}}, 1},
		{"[]bson.Raw", []bson.Raw{matchRaw}, 1},
		{"array", [1]bson.D{match}, 1},
		{"struct stage", []any{struct {
			Match bson.M `bson:"$match"`
		}{bson.M{}}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, perr := marshalPipeline(tt.p)
			if perr != nil {
				t.Fatalf("error: %s %s", perr.field, perr.rule)
			}
			if len(got) != tt.n {
				t.Fatalf("got %d stages, want %d", len(got), tt.n)
			}
		})
	}
}

// recorder records handler calls for the router tests.
type recorder struct {
	calls []string
}

func (r *recorder) handler(name string, err error) Handler[testOrder] {
	return func(ctx context.Context, ev *Event[testOrder]) error {
		r.calls = append(r.calls, name+":"+string(ev.OperationType())+":"+ev.ID()+":"+string(rune('0'+ev.Attempt())))
		return err
	}
}

func TestRouter(t *testing.T) {
	ns := bson.E{Key: "ns", Value: nsDoc("shop", "orders")}
	doc := bson.E{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: 1}, {Key: "total", Value: 5}}}
	badDoc := bson.E{Key: "fullDocument", Value: bson.D{{Key: "total", Value: "five"}}}
	ev := func(op string, extra ...bson.E) bson.Raw {
		return changeEvent(t, op, "82"+op, append([]bson.E{ns}, extra...)...)
	}

	all := func(r *recorder) Stream[testOrder] {
		return Stream[testOrder]{Name: "s", OnInsert: r.handler("insert", nil), OnUpdate: r.handler("update", nil),
			OnReplace: r.handler("replace", nil), OnDelete: r.handler("delete", nil), OnChange: r.handler("change", nil)}
	}
	onlyChange := func(r *recorder) Stream[testOrder] {
		return Stream[testOrder]{Name: "s", OnChange: r.handler("change", nil)}
	}
	onlyInsert := func(r *recorder) Stream[testOrder] {
		return Stream[testOrder]{Name: "s", OnInsert: r.handler("insert", nil)}
	}

	tests := []struct {
		name    string
		stream  func(r *recorder) Stream[testOrder]
		filter  func(*Event[testOrder]) bool
		raw     bson.Raw
		outcome messages.Outcome
		call    string // the recorded call after Call(ctx, 2); "" = no invocation
		decode  bool   // a decode error is expected
	}{
		{"typed insert", all, nil, ev("insert", doc), messages.Outcome_OUTCOME_UNSPECIFIED, "insert:insert:82insert:2", false},
		{"typed update", all, nil, ev("update"), messages.Outcome_OUTCOME_UNSPECIFIED, "update:update:82update:2", false},
		{"typed replace", all, nil, ev("replace", doc), messages.Outcome_OUTCOME_UNSPECIFIED, "replace:replace:82replace:2", false},
		{"typed delete", all, nil, ev("delete"), messages.Outcome_OUTCOME_UNSPECIFIED, "delete:delete:82delete:2", false},
		{"drop reaches OnChange", all, nil, ev("drop"), messages.Outcome_OUTCOME_UNSPECIFIED, "change:drop:82drop:2", false},
		{"invalidate reaches OnChange", all, nil, changeEvent(t, "invalidate", "82inv"), messages.Outcome_OUTCOME_UNSPECIFIED, "change:invalidate:82inv:2", false},
		{"expanded event reaches OnChange", all, nil, ev("createIndexes"), messages.Outcome_OUTCOME_UNSPECIFIED, "change:createIndexes:82createIndexes:2", false},
		{"fallback to OnChange", onlyChange, nil, ev("update"), messages.Outcome_OUTCOME_UNSPECIFIED, "change:update:82update:2", false},
		{"no handler: unhandled", onlyInsert, nil, ev("delete"), messages.Outcome_OUTCOME_UNHANDLED, "", false},
		{"no handler: an undecodable document does not matter", onlyInsert, nil, ev("replace", badDoc), messages.Outcome_OUTCOME_UNHANDLED, "", false},
		{"filter rejects", all, func(e *Event[testOrder]) bool { return e.FullDocument.Total > 10 }, ev("insert", doc), messages.Outcome_OUTCOME_FILTERED, "", false},
		{"filter accepts", all, func(e *Event[testOrder]) bool { return e.FullDocument.Total == 5 }, ev("insert", doc), messages.Outcome_OUTCOME_UNSPECIFIED, "insert:insert:82insert:2", false},
		{"undecodable document with a handler", all, nil, ev("insert", badDoc), messages.Outcome_OUTCOME_UNSPECIFIED, "", true},
		{"missing operationType", all, nil, func() bson.Raw {
			b, _ := bson.Marshal(bson.D{{Key: "_id", Value: bson.D{{Key: "_data", Value: "82"}}}})
			return b
		}(), messages.Outcome_OUTCOME_UNSPECIFIED, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			s := tt.stream(rec)
			filterCalls := 0
			if tt.filter != nil {
				s.Filter = func(e *Event[testOrder]) bool {
					filterCalls++
					if e.Attempt() != 0 {
						t.Errorf("Attempt in Filter = %d, want 0", e.Attempt())
					}
					return tt.filter(e)
				}
			} else {
				s.Filter = func(*Event[testOrder]) bool { filterCalls++; return true }
			}
			cs, err := s.compile()
			if err != nil {
				t.Fatal(err)
			}
			inv, outcome, err := cs.Router.Route(tt.raw)
			if tt.decode {
				var de *DecodeError
				if !errors.As(err, &de) || classOf(cs.Router, err) != dispatcher.Permanent || inv != nil {
					t.Fatalf("want a permanent decode error and no invocation, got %v %v", inv, err)
				}
				if filterCalls != 0 {
					t.Error("filter called on an undecodable event")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if outcome != tt.outcome {
				t.Fatalf("outcome = %v, want %v", outcome, tt.outcome)
			}
			if tt.call == "" {
				if inv != nil {
					t.Fatal("want no invocation")
				}
				if tt.outcome == messages.Outcome_OUTCOME_UNHANDLED && filterCalls != 0 {
					t.Error("filter called for an unhandled event")
				}
				return
			}
			if filterCalls != 1 {
				t.Errorf("filter called %d times, want 1", filterCalls)
			}
			if inv == nil {
				t.Fatal("no invocation")
			}
			if err := inv.Call(context.Background(), 2); err != nil {
				t.Fatal(err)
			}
			if len(rec.calls) != 1 || rec.calls[0] != tt.call {
				t.Fatalf("calls = %q, want [%q]", rec.calls, tt.call)
			}
		})
	}
}

// TestInvocationAttempts calls one invocation three times, as the dispatcher does on retries:
// the event is decoded once, shared, and sees each attempt number.
func TestInvocationAttempts(t *testing.T) {
	var seen []*Event[testOrder]
	var attempts []int
	boom := errors.New("boom")
	s := Stream[testOrder]{Name: "s", OnInsert: func(ctx context.Context, ev *Event[testOrder]) error {
		seen = append(seen, ev)
		attempts = append(attempts, ev.Attempt())
		if ev.Attempt() < 3 {
			return boom
		}
		return nil
	}}
	cs, err := s.compile()
	if err != nil {
		t.Fatal(err)
	}
	inv, _, err := cs.Router.Route(changeEvent(t, "insert", "82", bson.E{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: 1}}}))
	if err != nil {
		t.Fatal(err)
	}
	for a := 1; a <= 3; a++ {
		err := inv.Call(context.Background(), a)
		if a < 3 && (!errors.Is(err, boom) || classOf(cs.Router, err) != dispatcher.Retryable) {
			t.Fatalf("attempt %d: %v", a, err)
		}
		if a == 3 && err != nil {
			t.Fatalf("attempt 3: %v", err)
		}
	}
	if len(seen) != 3 || seen[0] != seen[1] || seen[1] != seen[2] {
		t.Error("attempts must share one decoded event")
	}
	if attempts[0] != 1 || attempts[1] != 2 || attempts[2] != 3 {
		t.Errorf("attempts = %v", attempts)
	}
}

// TestRouterDoesNotRecoverPanics documents that handler and filter panics reach the dispatcher.
func TestRouterDoesNotRecoverPanics(t *testing.T) {
	s := Stream[testOrder]{Name: "s", OnChange: func(context.Context, *Event[testOrder]) error { panic("handler") }}
	cs, _ := s.compile()
	inv, _, err := cs.Router.Route(changeEvent(t, "drop", "82"))
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if recover() != "handler" {
				t.Error("handler panic was swallowed")
			}
		}()
		_ = inv.Call(context.Background(), 1)
	}()
	s.Filter = func(*Event[testOrder]) bool { panic("filter") }
	cs, _ = s.compile()
	defer func() {
		if recover() != "filter" {
			t.Error("filter panic was swallowed")
		}
	}()
	_, _, _ = cs.Router.Route(changeEvent(t, "drop", "82"))
}

// classOf is r.Classify's class.
func classOf(r dispatcher.Router, err error) dispatcher.ErrorClass {
	c, _ := r.Classify(err)
	return c
}

func TestRouterClassify(t *testing.T) {
	cs, _ := validStream().compile()
	r := cs.Router
	if classOf(r, errors.New("x")) != dispatcher.Retryable || classOf(r, Permanent(errors.New("x"))) != dispatcher.Permanent ||
		classOf(r, Skip("dup")) != dispatcher.Skipped {
		t.Fatal("Classify mismatch")
	}
	// The skip's detail is the reason given to Skip, however the error is wrapped (and even
	// when the reason looks like another skip's text); other classes have none.
	for _, err := range []error{Skip("dup: watchtree: skipped: x"), fmt.Errorf("handler: %w", Skip("dup: watchtree: skipped: x"))} {
		if c, detail := r.Classify(err); c != dispatcher.Skipped || detail != "dup: watchtree: skipped: x" {
			t.Errorf("Classify(%v) = %v, %q", err, c, detail)
		}
	}
	if _, detail := r.Classify(Permanent(errors.New("x"))); detail != "" {
		t.Errorf("a permanent error has the skip detail %q", detail)
	}
	for _, c := range []dispatcher.ErrorClass{dispatcher.Retryable, dispatcher.Permanent, dispatcher.Skipped, 9} {
		if c.String() == "" {
			t.Errorf("empty String for %d", int(c))
		}
	}
}

func TestOptionStrings(t *testing.T) {
	// StartPosition and HistoryLostPolicy are tested with their definition, in package policy.
	tests := []struct{ got, want string }{
		{AllInstances.String(), "AllInstances"},
		{SingleLeader.String(), "SingleLeader"},
		{Mode(5).String(), "Mode(5)"},
		{InvalidateStop.String(), "InvalidateStop"},
		{InvalidateRestart.String(), "InvalidateRestart"},
		{Dedicated.String(), "Dedicated"},
		{Shared.String(), "Shared"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func BenchmarkRoute(b *testing.B) {
	s := Stream[bson.Raw]{Name: "s", OnInsert: func(context.Context, *Event[bson.Raw]) error { return nil }}
	cs, err := s.compile()
	if err != nil {
		b.Fatal(err)
	}
	raw := changeEvent(b, "insert", "8266EFEDC000000001", bson.E{Key: "ns", Value: nsDoc("shop", "orders")},
		bson.E{Key: "documentKey", Value: bson.D{{Key: "_id", Value: 7}}},
		bson.E{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: 7}, {Key: "total", Value: 10}}})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		inv, _, err := cs.Router.Route(raw)
		if err != nil {
			b.Fatal(err)
		}
		if err := inv.Call(ctx, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRouterNamespaceCache routes events of alternating namespaces, from several goroutines as
// the lanes do: the cached namespace must never leak from one event into another.
func TestRouterNamespaceCache(t *testing.T) {
	s := Stream[bson.Raw]{Name: "s", Database: "shop", OnChange: func(ctx context.Context, ev *Event[bson.Raw]) error {
		want := ev.Raw().Lookup("ns", "db").StringValue() + "." + ev.Raw().Lookup("ns", "coll").StringValue()
		if got := ev.Namespace().String(); got != want {
			return fmt.Errorf("namespace %q, want %q", got, want)
		}
		return nil
	}}
	cs, err := s.compile()
	if err != nil {
		t.Fatal(err)
	}
	raws := []bson.Raw{
		changeEvent(t, "insert", "8201", bson.E{Key: "ns", Value: nsDoc("shop", "orders")}),
		changeEvent(t, "insert", "8202", bson.E{Key: "ns", Value: nsDoc("shop", "people")}),
		changeEvent(t, "insert", "8203", bson.E{Key: "ns", Value: nsDoc("shop", "orders")}),
		changeEvent(t, "insert", "8204", bson.E{Key: "ns", Value: nsDoc("shoq", "orders")}),
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				inv, _, err := cs.Router.Route(raws[(g+i)%len(raws)])
				if err == nil {
					err = inv.Call(context.Background(), 1)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestRouterKeptDocumentsSurviveReuse: the router reuses an invocation (and its Event) once
// the dispatcher releases it, but every document a handler kept after returning keeps its
// value: FullDocument, the pre-image and the update description are the event's own.
func TestRouterKeptDocumentsSurviveReuse(t *testing.T) {
	var kept []*testOrder
	var keptBefore []*testOrder
	var keptUD []*UpdateDescription
	s := Stream[testOrder]{Name: "s", OnChange: func(_ context.Context, ev *Event[testOrder]) error {
		kept = append(kept, ev.FullDocument)
		keptBefore = append(keptBefore, ev.FullDocumentBeforeChange)
		keptUD = append(keptUD, ev.UpdateDescription)
		return nil
	}}
	cs, err := s.compile()
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		raw := changeEvent(t, "update", fmt.Sprintf("82%04d", i),
			bson.E{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: i}, {Key: "total", Value: 10 * i}}},
			bson.E{Key: "fullDocumentBeforeChange", Value: bson.D{{Key: "_id", Value: i}, {Key: "total", Value: 10*i - 1}}},
			bson.E{Key: "updateDescription", Value: bson.D{{Key: "updatedFields", Value: bson.D{{Key: "total", Value: 10 * i}}},
				{Key: "removedFields", Value: bson.A{fmt.Sprint("f", i)}}}})
		inv, _, err := cs.Router.Route(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := inv.Call(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		rel, ok := inv.(dispatcher.Releaser)
		if !ok {
			t.Fatal("the router's invocation is not a dispatcher.Releaser")
		}
		rel.Release() // as the dispatcher does once the event settled: the next Route may reuse it
	}
	for i := range n {
		if kept[i] == nil || kept[i].ID != i || kept[i].Total != 10*i {
			t.Errorf("event %d: kept FullDocument is %+v", i, kept[i])
		}
		if keptBefore[i] == nil || keptBefore[i].Total != 10*i-1 {
			t.Errorf("event %d: kept FullDocumentBeforeChange is %+v", i, keptBefore[i])
		}
		if keptUD[i] == nil || !keptUD[i].Changed("total") || len(keptUD[i].RemovedFields) != 1 || keptUD[i].RemovedFields[0] != fmt.Sprint("f", i) {
			t.Errorf("event %d: kept UpdateDescription is %+v", i, keptUD[i])
		}
		for j := range i {
			if kept[i] == kept[j] {
				t.Fatalf("events %d and %d share a FullDocument", j, i)
			}
		}
	}
}

// TestEphemeralHistoryLostDefault: an Ephemeral stream's zero OnHistoryLost compiles to
// ResumeFromNow; Fail set explicitly, or any other stream's zero value, stays Fail.
func TestEphemeralHistoryLostDefault(t *testing.T) {
	kind := func(s Stream[testOrder]) policyx.HistoryLostKind {
		t.Helper()
		cs, err := s.compile()
		if err != nil {
			t.Fatal(err)
		}
		return policyx.HistoryLostKindOf(cs.OnHistoryLost)
	}
	eph := validStream()
	eph.Checkpoint = CheckpointPolicy{Ephemeral: true}
	if k := kind(eph); k != policyx.HistoryResumeFromNow {
		t.Errorf("Ephemeral, OnHistoryLost unset: kind %v, want ResumeFromNow", k)
	}
	eph.OnHistoryLost = Fail
	if k := kind(eph); k != policyx.HistoryFail {
		t.Errorf("Ephemeral, OnHistoryLost Fail: kind %v, want Fail", k)
	}
	if k := kind(validStream()); k != policyx.HistoryFail {
		t.Errorf("durable stream, OnHistoryLost unset: kind %v, want Fail", k)
	}
}
