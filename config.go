package watchtree

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/watchtree/watchtree/internal/configcheck"
	"github.com/watchtree/watchtree/internal/policyx"
	"os"
	"reflect"
	"strconv"
	"time"
	"unicode"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/consoleserver"
	"github.com/watchtree/watchtree/internal/engine"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/store"
)

// defaultShutdownTimeout bounds Stop when the caller's context has no deadline.
const defaultShutdownTimeout = 30 * time.Second

// defaultConnectTimeout is the default Config.ConnectTimeout.
const defaultConnectTimeout = 10 * time.Second

// maxInstanceID is the longest Config.InstanceID accepted.
const maxInstanceID = 200

// Config configures a runtime. The zero value of every field but Client means its documented
// default. Validate (also run by New) fails fast with a *ConfigError naming the field and the
// rule.
type Config struct {
	// Client is the MongoDB client (driver v2) of the default stores (checkpoints, dead letters,
	// gap records, snapshots, leases) and of every stream that does not bring its own
	// Stream.Client.
	// Required, also when every store is set: streams watch through it.
	Client *mongo.Client
	// Database is the default database: where the default stores live, and the watched
	// database of a stream that sets a Collection but no Database. When empty (the default), the stores of each
	// stream live in that stream's own Database, and a stream that watches a collection or the
	// whole cluster must then name a Database itself (Spawn fails otherwise; a cluster-wide
	// stream needs none when every store is set).
	Database string
	// Logger receives the runtime's logs; protoactor's slog output is bridged into it. Every
	// line carries the stream name. Default zap.NewNop().
	Logger *zap.Logger
	// ActorSystem is an existing protoactor system to embed the stream trees into. Default: the
	// runtime creates its own, and shuts it down on Stop.
	ActorSystem *actor.ActorSystem
	// Observer receives the typed events of package observe (see observe.Observer), through a
	// bounded queue: it never blocks or breaks the runtime (Runtime.ObserverStats counts what it
	// missed). When it also implements observe.HandlerObserver, every handler call is timed for
	// it; when it implements observe.HandlerTracer, every handler call runs inside its
	// TraceHandler (the OpenTelemetry adapter's process span). Default observe.Nop.
	Observer observe.Observer
	// InstanceID identifies this run of the process: the owner of its SingleLeader leases
	// (LeaseStatus.Owner, observe.LeadershipChanged.Owner), of the checkpoints it writes, and its name
	// in the console. It must differ between two processes running at once, and it changes on
	// every run, so that a restarted process never passes for its predecessor's lease. Default
	// "<InstanceName>-<pid>-<6 random hex digits>" (with InstanceName's default, the hostname),
	// so that a lease owner names the instance it belongs to. At most 200 printable characters.
	// InstanceName, not InstanceID, is what stays the same across restarts.
	InstanceID string
	// InstanceName is the stable identity of this instance, the same across restarts: an
	// AllInstances stream keys its checkpoint, dead letters and gap records by (stream,
	// InstanceName), so an instance resumes from its own position after a restart, and never
	// from another's. Default the hostname (os.Hostname), which is the pod name on Kubernetes:
	// stable for a StatefulSet's pods; a Deployment's pods get new names on every rollout, so
	// their old checkpoints expire after CheckpointPolicy.Retention. Two processes running with
	// the same InstanceName share one position, as if they were one instance: give each
	// process on a host its own. Like a stream name: 1-100 characters from [A-Za-z0-9._-],
	// starting with a letter or digit; a hostname that breaks the rule fails New, naming it.
	InstanceName string
	// ShutdownTimeout bounds Stop when its context has no earlier deadline: draining in-flight
	// events, flushing checkpoints and releasing leases. Default 30s. Must be >= 0; 0 means the
	// default.
	ShutdownTimeout time.Duration

	// Checkpoints keeps the streams' resume positions (store.CheckpointStore). Default: the
	// MongoDB store (store/mongostore on Client, collection _wt_checkpoints in the store
	// database: Database, else the stream's own Database). A store set here serves every
	// stream on the runtime and keys its records by stream and instance; store/memstore is one,
	// for your own tests. Any store must pass store/storetest.TestCheckpointStore. Client is
	// still required: streams watch through it.
	Checkpoints store.CheckpointStore
	// DeadLetters keeps the dead letters (store.DeadLetterStore). Default: the MongoDB store
	// (store/mongostore on Client, in the store database, in each stream's
	// DeadLetterPolicy.Collection). A store set here serves every stream, so a stream's
	// DeadLetterPolicy.Collection must then be left empty (Spawn refuses it otherwise). Any
	// store must pass store/storetest.TestDeadLetterStore.
	DeadLetters store.DeadLetterStore
	// Gaps keeps the records of history skipped on purpose (store.GapStore). Default: the
	// MongoDB store (store/mongostore on Client, collection _wt_gaps in the store database).
	// Any store must pass store/storetest.TestGapStore.
	Gaps store.GapStore
	// Snapshots keeps the progress of the streams' snapshots (Stream.Snapshot and
	// RebuildFromSnapshot; store.SnapshotStore). Default: the MongoDB store (store/mongostore
	// on Client, collection _wt_snapshots in the store database) when Checkpoints is nil too. A
	// snapshot's record belongs with the stream's checkpoint (its handoff position is one, and
	// a start resumes an interrupted copy from the record), so with Checkpoints set and
	// Snapshots nil there is no snapshot store: Spawn refuses a stream that snapshots with a
	// *ConfigError naming Config.Snapshots (set it, e.g. to the memstore.Store of Checkpoints).
	// An Ephemeral stream keeps its snapshot progress in memory and needs none. Any store must
	// pass store/storetest.TestSnapshotStore.
	Snapshots store.SnapshotStore
	// Leases holds the leases of SingleLeader streams and the instance heartbeats of balanced
	// leadership (store.LeaseStore). Default: the MongoDB store (store/mongostore on Client,
	// collections _wt_leases and _wt_instances in the store database), whatever the other
	// store fields; store/redisstore keeps them in Redis, memstore.NewLeases in memory (your
	// own tests). Only SingleLeader streams use it. Any store must pass
	// store/storetest.TestLeaseStore.
	Leases store.LeaseStore
	// Lease governs the leases of every SingleLeader stream on the runtime. The zero value is
	// the default: TTL 60s, RenewEvery 15s, StandbyPoll 20s, Margin TTL/10, Balance on.
	Lease LeasePolicy

	// ConnectTimeout bounds every wait for a reachable MongoDB server, so that a dead or
	// unreachable server fails within ConnectTimeout instead of after the driver's server
	// selection timeout (30s by default):
	//   - Start pings the primary of Client and creates the store indexes within ConnectTimeout
	//     (or ctx's deadline when earlier); otherwise it fails with an error matching
	//     ErrUnreachable, and the runtime stays unstarted (Start may be called again).
	//   - A stream's open of its change stream, its checkpointer's capture of the current
	//     position and each checkpoint load, save and gap record get ConnectTimeout each; a
	//     getMore gets MaxAwaitTime (1s) + ConnectTimeout. When one runs out the stream fails,
	//     shows StateBackoff with the driver's error as its cause, and its RestartPolicy
	//     retries it.
	// Default 10s. Must be >= 0; 0 means the default.
	ConnectTimeout time.Duration

	// Console turns on the remote console (see ConsoleConfig). Default off.
	Console ConsoleConfig

	// Clock is the runtime's time source, for tests: its Now stamps events, records and
	// statuses, and its AfterFunc drives every timer of the stream trees (renewals, polls,
	// flushes, retries, restart delays). Default nil: the real clock (time.Now and
	// time.AfterFunc). Lease expiry is judged by the lease store's clock, never by this one, and
	// the leader measures its term's validity on a monotonic clock (Mono() time.Duration when the
	// Clock has that method, else the process's), so a Now that jumps or drifts changes no
	// lease decision. A Clock whose time moves only when a test says so should have Mono too.
	Clock Clock
}

// Clock is the time source of Config.Clock (for tests): Now and AfterFunc, safe for concurrent
// use. AfterFunc(d, f) calls f once d has elapsed (d <= 0: at once) and returns a Timer that
// cancels it. It is package clock's, where clock.Real (the default) and clock.NewFake (a clock
// a test advances by hand) are.
type Clock = clock.Clock

// Timer is a pending Clock.AfterFunc call: Stop prevents it if it has not started, reporting
// whether it did.
type Timer = clock.Timer

// Validate checks c without contacting any server. It returns nil, or the broken rules as
// *ConfigError values joined with errors.Join, for example
// `watchtree: Config.ShutdownTimeout must be > 0 (0 means the default 30s), got -1s`.
func (c Config) Validate() error {
	ce := configcheck.NewErrors("Config.")
	switch {
	case c.Client == nil && len(c.storeFields()) > 0:
		ce.Add("Client", "is required even when stores are set (streams watch through it), got nil")
	case c.Client == nil:
		ce.Add("Client", "is required, got nil")
	}
	optionalName(ce, "Database", c.Database, databaseNameRule)
	optionalName(ce, "InstanceID", c.InstanceID, instanceIDRule)
	optionalName(ce, "InstanceName", c.InstanceName, streamNameRule)
	for _, f := range c.storeFields() {
		if isNilPointer(f.value) {
			ce.Add(f.name, "must be nil (the default store) or a usable store, got a nil %T", f.value)
		}
	}
	policyx.ValidateInto(ce, "Lease", c.Lease)
	if c.ShutdownTimeout < 0 {
		ce.Add("ShutdownTimeout", "must be > 0 (0 means the default %v), got %v", defaultShutdownTimeout, c.ShutdownTimeout)
	}
	if c.ConnectTimeout < 0 {
		ce.Add("ConnectTimeout", "must be >= 0 (0 means the default %v), got %v", defaultConnectTimeout, c.ConnectTimeout)
	}
	var fe *consoleserver.FieldError
	if err := c.Console.config().Validate(); errors.As(err, &fe) {
		ce.Add("Console."+fe.Field, "%s", fe.Rule)
	}
	return ce.Err()
}

// storeField is one store field of Config, by name.
type storeField struct {
	name  string
	value any // nil when unset
}

// storeFields lists the store fields that are set.
func (c Config) storeFields() []storeField {
	var out []storeField
	add := func(name string, set bool, v any) {
		if set {
			out = append(out, storeField{name, v})
		}
	}
	add("Checkpoints", c.Checkpoints != nil, c.Checkpoints)
	add("DeadLetters", c.DeadLetters != nil, c.DeadLetters)
	add("Gaps", c.Gaps != nil, c.Gaps)
	add("Snapshots", c.Snapshots != nil, c.Snapshots)
	add("Leases", c.Leases != nil, c.Leases)
	return out
}

// engine is the engine's configuration of c (defaulted).
func (c Config) engine() engine.Config {
	return engine.Config{
		Client: c.Client, Database: c.Database, Logger: c.Logger, ActorSystem: c.ActorSystem, Observer: c.Observer,
		InstanceID: c.InstanceID, InstanceName: c.InstanceName,
		ShutdownTimeout: c.ShutdownTimeout, ConnectTimeout: c.ConnectTimeout,
		Stores: engine.Stores{Checkpoints: c.Checkpoints, DeadLetters: c.DeadLetters, Gaps: c.Gaps, Snapshots: c.Snapshots, Leases: c.Leases},
		Lease:  policyx.WithDefaults(c.Lease), Console: c.Console.config(), Clock: c.Clock,
	}
}

// isNilPointer reports whether v holds a nil pointer (a store field set to a typed nil, which
// would fail at its first call instead of at New).
func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// withDefaults returns c with every zero field but Client, Database and ActorSystem replaced by
// its default.
func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Observer == nil {
		c.Observer = observe.Nop{}
	}
	if c.InstanceName == "" {
		c.InstanceName = hostname()
	}
	if c.InstanceID == "" {
		c.InstanceID = defaultInstanceID(c.InstanceName)
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = defaultShutdownTimeout
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = defaultConnectTimeout
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	return c
}

func instanceIDRule(id string) string {
	if len(id) > maxInstanceID {
		return "must be at most " + strconv.Itoa(maxInstanceID) + " bytes"
	}
	for _, r := range id {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return "must be printable characters without spaces"
		}
	}
	return ""
}

// hostname returns os.Hostname(), or "" when it fails (New then reports InstanceName).
func hostname() string {
	host, err := os.Hostname()
	if err != nil {
		return ""
	}
	return host
}

// defaultInstanceNameError reports a hostname that cannot be the default InstanceName.
func defaultInstanceNameError(host string) error {
	if host == "" {
		return &ConfigError{Field: "Config.InstanceName", Rule: "must be set: it defaults to the hostname, which is unavailable"}
	}
	if rule := streamNameRule(host); rule != "" {
		return &ConfigError{Field: "Config.InstanceName", Rule: fmt.Sprintf("must be set: it defaults to the hostname, which %s, got %q", rule, host)}
	}
	return nil
}

// defaultInstanceID returns "<name>-<pid>-<6 random hex digits>", name being the instance's
// InstanceName ("unknown" when empty).
func defaultInstanceID(name string) string {
	host := name
	if host == "" {
		host = "unknown"
	}
	var b [3]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	id := fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	if instanceIDRule(id) != "" { // an exotic hostname: keep only the safe part
		id = fmt.Sprintf("host-%d-%s", os.Getpid(), hex.EncodeToString(b[:]))
	}
	return id
}
