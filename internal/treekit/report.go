package treekit

import (
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/observe"
)

// Report hands ev to obs, recovering a panic of obs and logging it as "<actor> Observer
// panicked" with the event's kind: the Observer is user code, and no actor of a tree may break
// because of it. Every actor reports its events through it.
func Report(obs observe.Observer, log *zap.Logger, actor string, ev observe.Event) {
	defer func() {
		if r := recover(); r != nil {
			log.Error(actor+" Observer panicked", zap.Stringer("event", ev.Kind()), zap.Any("panic", r))
		}
	}()
	obs.OnEvent(ev)
}
