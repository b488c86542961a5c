package supervisor

import (
	"fmt"
	"github.com/watchtree/watchtree/internal/configcheck"
	"github.com/watchtree/watchtree/internal/policyx"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/actors/streamtree"
	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/treekit"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/policy"
)

// DefaultConfig returns the defaults of every Config field that has a value default: the one
// source of them. New fills each zero field of the Config it is given from it (a partly set
// Policy field by field, from the same policy defaults), and the runtime builds its supervisors
// from it, so that no other layer holds a default of its own that could silently override this
// one (TestActorDefaults checks that New's filling equals DefaultConfig). The stream actor of
// the supervisor "order-stream" has the PID id "<parent>/order-stream/stream". The dependencies
// (Classify, Clock, Rand, Logger, Observer) are not values: nil means everything is transient,
// the real clock, math/rand/v2, no log and no events, as their docs say.
func DefaultConfig() Config {
	return Config{
		ChildName:    treekit.StreamName,
		Policy:       policyx.WithDefaults(policy.Restart{}),
		Dispatcher:   treekit.DispatcherName,
		Checkpointer: treekit.CheckpointerName,
		OnDemand:     treekit.OnDemandName,
		LeaderName:   treekit.LeaderName,
	}
}

// Sibling is an actor the supervisor spawns once, next to the stream actor, and does not restart
// when the stream actor restarts: the checkpointer and the dispatcher keep their
// settled-but-unflushed progress across cursor deaths.
type Sibling struct {
	// Name is the actor name under the supervisor, e.g. "checkpointer". Required and unique.
	Name string
	// Props spawns the sibling. Required, unless a Lazy sibling has NewProps.
	Props *actor.Props
	// Lazy defers the spawn to the first request that needs the sibling (the on-demand snapshot
	// actor: most streams never take one, and an idle stream should not pay for the actor).
	// Default false: spawned with the supervisor.
	Lazy bool
	// NewProps, for a Lazy sibling without Props, makes its props at its spawn: a stream that
	// never needs the sibling holds neither the actor nor its props and configuration. It runs
	// on the supervisor's goroutine; an error is logged and the request goes on as without
	// the sibling.
	NewProps func() (*actor.Props, error)
}

// Config configures one stream supervisor. Only Stream and Child are required; every other zero
// field means its default.
type Config struct {
	// Stream is the stream name, carried by every log line, Transition and StatusReply. Required.
	Stream string
	// Child spawns the restartable stream actor. The supervisor adds a receiver middleware that
	// numbers its incarnations (see Incarnation) and captures panic stacks. Required.
	Child *actor.Props
	// ChildName is the stream actor's name under the supervisor. Default "stream".
	ChildName string
	// Siblings are spawned, in this order, when the supervisor starts, before the stream actor.
	// protoactor stops children in reverse spawn order, so the stream actor stops first when the
	// supervisor stops.
	Siblings []Sibling
	// Policy is the stream's RestartPolicy (watchtree.RestartPolicy, converted): the delay
	// before each restart and the attempt limit. See watchtree.RestartPolicy for the fields,
	// defaults and formula; the jitter draws from Rand. It is validated by New.
	Policy policy.Restart
	// Classify decides whether a failure is terminal. Default streamtree.TerminalOn() (everything is
	// transient).
	Classify Classifier
	// Clock schedules restarts. Default clock.Real().
	Clock clock.Clock
	// Rand returns uniform numbers in [0, 1) for the jitter; it is called only when Policy.Jitter
	// is set, on the supervisor's goroutine. When several supervisors share it, it must be safe
	// for concurrent use. Default math/rand/v2.Float64.
	Rand func() float64
	// Logger receives every transition, with the field stream=<Stream>. Default zap.NewNop().
	Logger *zap.Logger
	// OnTransition, when set, is called for every state transition, on the supervisor's goroutine,
	// after the transition is logged. It must not block (hand the value to a channel or a
	// goroutine of your own); a panic in it is recovered and logged, it never breaks the
	// supervisor.
	OnTransition func(Transition)
	// Observer receives the stream's lifecycle events the transitions mean (observe.Stopped for
	// a backoff, a crash or a stop, observe.Restarted for a successful restart), with the
	// transition's time, on the supervisor's goroutine, before OnTransition. It must not block
	// (the root passes its queue); a panic in it is recovered and logged. Default observe.Nop.
	Observer observe.Observer
	// Dispatcher and Checkpointer name the siblings a graceful Stop drains and flushes. Defaults
	// "dispatcher" and "checkpointer". A step whose sibling does not exist is left out.
	Dispatcher, Checkpointer string
	// OnDemand names the on-demand snapshot sibling, which OnDemandSnapshot requests are
	// forwarded to (default "ondemand"; a stream without one answers "unsupported").
	OnDemand string
	// SenderMiddleware is added to the props of every actor the supervisor spawns (siblings and
	// stream actor); the supervisor's own props are the caller's to decorate. Tests use it to
	// check what crosses between the actors. Optional.
	SenderMiddleware []actor.SenderMiddleware
	// StartStopped leaves the stream in the stopped state when the supervisor starts, until an
	// operator Start. By default the stream actor is spawned at once.
	StartStopped bool
	// Leader, when set, makes the stream SingleLeader: the supervisor spawns this leader actor
	// (actors/leader) first, as LeaderName, and runs the stream actor only while the leader
	// actor holds the lease (LeaseGranted → starting; LeaseLost or a fenced write → the stream
	// actor and the handlers stop at once, standby). A graceful Stop releases the lease as its
	// last step; a give-up releases it too. Optional.
	Leader *actor.Props
	// LeaderName is the leader actor's name. Default "leader".
	LeaderName string
	// HandOverCooldown is how long a stream that handed its lease over for balance waits before
	// it may take it again. Default 0 (the leader actor's own balance rule applies).
	HandOverCooldown time.Duration
	// ReleaseCooldown is how long a stream whose lease an operator released (ReleaseLease)
	// waits before it may take it again, so that a standby takes over (the release window;
	// the runtime gives min(RenewEvery, StandbyPoll), and the leader actor ends it once another
	// instance took the lease). Default 0: none (this instance may win the lease back at once).
	ReleaseCooldown time.Duration
}

// Transition reports one state change of a stream.
type Transition struct {
	Stream string                   // the stream's name
	From   messages.SupervisorState // the state left
	To     messages.SupervisorState // the state entered
	// Why is the one-line reason, as in StatusReply.Why.
	Why string
	// At is the time of the transition (the supervisor's clock).
	At time.Time
	// Attempt is the attempt counter after the transition for starting, backoff and crashed; for
	// running it is the counter just before the reset (0 when the stream started without a
	// preceding death), so "restarted{attempt, cause}" can be reported.
	Attempt int
	// MaxAttempts is the policy limit; 0 means unlimited.
	MaxAttempts int
	// Delay is the scheduled restart delay, for backoff.
	Delay time.Duration
	// Cause is the error of the latest death, for backoff, crashed and running after a restart.
	Cause error
	// Incarnation is the stream actor incarnation concerned.
	Incarnation uint64
}

// validate checks the configuration. The error names the field (Config.Stream, Config.Child,
// Config.Siblings[i].Name, and Config.Policy.<Field> as a configerr.Error); several broken
// rules are joined.
func (c Config) validate() error {
	e := treekit.NewConfigErrors("supervisor", c.Stream)
	if c.Child == nil {
		e.Add("Child", "must not be nil")
	}
	names := map[string]bool{c.childName(): true}
	for i, s := range c.Siblings {
		sib := fmt.Sprintf("Siblings[%d]", i)
		switch {
		case s.Name == "":
			e.Add(sib+".Name", "must not be empty")
		case names[s.Name]:
			e.Add(sib+".Name", "%q is already used", s.Name)
		}
		names[s.Name] = true
		switch {
		case s.Props == nil && (!s.Lazy || s.NewProps == nil):
			e.Add(sib+".Props", "must not be nil (NewProps stands in for it only for a Lazy sibling)")
		case s.Props != nil && s.NewProps != nil:
			e.Add(sib+":", "Props and NewProps are exclusive")
		}
	}
	e.Policies(func(pe *configcheck.Errors) { policyx.ValidateInto(pe, "Policy", c.Policy) })
	return e.Err()
}

func (c Config) childName() string {
	treekit.Fill(&c.ChildName, DefaultConfig().ChildName)
	return c.ChildName
}

// withDefaults returns c with every zero field replaced by DefaultConfig's value.
func (c Config) withDefaults() Config {
	c.Policy = policyx.WithDefaults(c.Policy)
	treekit.FillZero(&c, DefaultConfig())
	if c.Classify == nil {
		c.Classify = streamtree.TerminalOn()
	}
	treekit.FillRand(&c.Rand)
	treekit.Defaults(c.Stream, &c.Clock, &c.Logger, &c.Observer)
	return c
}

// New validates cfg and returns the props of the supervisor actor. Spawn it under the runtime
// (or the user's own actor); it spawns its siblings and the stream actor when it starts. Each
// supervisor instance owns its state: if the supervisor itself is restarted by its parent, the
// tree starts afresh.
func New(cfg Config) (*actor.Props, error) {
	return treekit.New(cfg, Config.validate, func(c Config) Config { return c.withDefaults().wrapped() }, newSupervisor)
}

// wrapped returns c with its siblings and leader under the child middleware. Their props are
// wrapped once, in New, not on every start, and the caller's are dropped: a tree then keeps one
// Props per actor instead of two (the caller's Sibling slice and props are not changed).
func (c Config) wrapped() Config {
	sibs := make([]Sibling, len(c.Siblings))
	for i, sib := range c.Siblings {
		if sib.Props != nil {
			sib.Props = c.underMiddleware(sib.Props, nil)
		}
		sibs[i] = sib
	}
	c.Siblings = sibs
	if c.Leader != nil {
		c.Leader = c.underMiddleware(c.Leader, nil)
	}
	return c
}

// underMiddleware returns a copy of props with the child middleware (numbering incarnations
// from q when q is not nil) and the configured sender middleware.
func (c *Config) underMiddleware(props *actor.Props, q *incarnations) *actor.Props {
	return props.Clone(actor.WithReceiverMiddleware(childMiddleware(q)), actor.WithSenderMiddleware(c.SenderMiddleware...))
}
