package treekit

import (
	"math/rand/v2"
	"reflect"
	"time"

	"go.uber.org/zap"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/logx"
	"github.com/watchtree/watchtree/observe"
)

// Defaults fills the fields every actor config of a stream tree defaults alike: a nil clock
// reads the real time, a nil logger discards, the logger names the stream on every line
// (logx.With keeps the no-op logger as it is), and a nil observer is observe.Nop. The configs
// differ in everything else, so they pass their own fields rather than share a struct that
// would change their exported API.
func Defaults(stream string, clk *clock.Clock, log **zap.Logger, obs *observe.Observer) {
	if *clk == nil {
		*clk = clock.Real()
	}
	if *log == nil {
		*log = zap.NewNop()
	}
	*log = logx.With(*log, zap.String("stream", stream))
	if *obs == nil {
		*obs = observe.Nop{}
	}
}

// FillRand sets a nil jitter source to math/rand/v2's Float64 (uniform in [0, 1), safe for
// concurrent use), the default Rand of the configs that draw retry jitter.
func FillRand(f *func() float64) {
	if *f == nil {
		*f = rand.Float64
	}
}

// The names of a stream tree's actors under its supervisor, and the bound of one store or
// source call of an actor, as every actor's DefaultConfig and the engine's tree use them. They
// are defaults shared by several actors (the supervisor, the stream actor and the snapshot
// actor all find the dispatcher by name), so they live here once rather than in each actor.
const (
	CheckpointerName = "checkpointer"
	DispatcherName   = "dispatcher"
	StreamName       = "stream"
	SnapshotName     = "snapshot"
	OnDemandName     = "ondemand"
	LeaderName       = "leader"
	// MaxLanes is the most lanes a dispatcher runs (dispatcher.Config.Lanes and
	// watchtree.Stream.Lanes).
	MaxLanes = 1024
	// DefaultIOTimeout is the default IOTimeout of the checkpointer, leader and snapshot
	// actors (the runtime passes Config.ConnectTimeout instead).
	DefaultIOTimeout = 10 * time.Second
)

// FillZero sets every zero exported field of *c to d's value of that field: an actor's
// withDefaults calls it with its DefaultConfig, so that the value of each default is written
// once, there, and a default added to DefaultConfig is applied without another line. Fields
// that need more than "zero means the default" (a policy filled field by field, a bound that
// depends on another field) are settled by the caller first; they are then no longer zero.
// C must be a struct type.
func FillZero[C any](c *C, d C) {
	cv, dv := reflect.ValueOf(c).Elem(), reflect.ValueOf(d)
	for i := range cv.NumField() {
		if f := cv.Field(i); f.CanSet() && f.IsZero() {
			f.Set(dv.Field(i))
		}
	}
}

// Fill sets *p to d when *p is the zero value: an actor's New fills the zero fields of its
// Config from its DefaultConfig with it, field by field, so that the value of each default is
// written once, in DefaultConfig.
func Fill[T comparable](p *T, d T) {
	var zero T
	if *p == zero {
		*p = d
	}
}
