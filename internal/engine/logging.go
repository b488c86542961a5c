package engine

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"

	"github.com/watchtree/watchtree/internal/logx"
)

// deadLetterThrottle is the dead-letter log throttle interval of an actor system the runtime
// creates. protoactor keeps a goroutine alive for one interval after a dead letter; a short
// interval lets that goroutine end soon after Stop (goleak in users' tests), and still logs at
// most 3 dead letters per interval.
const deadLetterThrottle = 100 * time.Millisecond

// slogBridge returns protoactor's logger for an actor system the runtime creates: a slog.Logger
// whose records go to zl through zapslog, named "protoactor", with stacks on ERROR. protoactor
// logs supervision ("[ACTOR] Recovering") at INFO, supervision events at DEBUG and dead letters
// at INFO (throttled).
func slogBridge(zl *zap.Logger) *slog.Logger {
	return slog.New(zapslog.NewHandler(zl.Core(),
		zapslog.WithName("protoactor"),
		zapslog.AddStacktraceAt(slog.LevelError)))
}

// NewActorSystem creates the runtime's own actor system, with protoactor's slog bridged into
// zl, protoactor's metrics off, and a short dead-letter throttle.
func NewActorSystem(zl *zap.Logger, extra ...actor.ConfigOption) *actor.ActorSystem {
	opts := []actor.ConfigOption{
		actor.WithLoggerFactory(func(as *actor.ActorSystem) *slog.Logger {
			return slogBridge(zl).With(slog.String("actor_system", as.ID))
		}),
		actor.WithDeadLetterThrottleInterval(deadLetterThrottle),
	}
	return actor.NewActorSystem(append(opts, extra...)...)
}

// streamLogger returns the runtime logger with the stream name, carried by every line of the
// stream's actors.
func streamLogger(zl *zap.Logger, stream string) *zap.Logger {
	return logx.With(zl, zap.String("stream", stream))
}
