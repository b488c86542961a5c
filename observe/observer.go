// Package observe defines what a watchtree runtime reports about its streams: the Observer
// interface and the events it receives (Started, Stopped, Restarted, RetryScheduled, Skipped,
// DeadLettered, DeadLetterFailed, Checkpointed, CheckpointFailed, CheckpointRefused, HistoryLost, GapRecorded,
// Invalidated, LeadershipChanged, the Snapshot* events, NamespaceMissing and CursorChanged), each with its Kind.
//
// The events are built once, by the actors of a stream's tree where the thing happens, and
// reach Config.Observer as they are: the console's live feed, the Prometheus adapter
// (metrics/prometheus) and the OpenTelemetry adapter (module otel) consume the same values. Set an Observer as watchtree.Config.Observer:
//
//	obs := observe.Func(func(ev observe.Event) {
//		switch e := ev.(type) {
//		case observe.DeadLettered:
//			alert(e.EventMeta().Stream, e.EventID, e.Err)
//		case observe.Stopped:
//			if e.Terminal {
//				page(e.String())
//			}
//		}
//	})
//	rt, err := watchtree.New(watchtree.Config{Client: client, Database: "shop", Observer: obs})
package observe

import "time"

// Observer receives the runtime's typed events: lifecycle, retries, skips, dead letters,
// checkpoints, history loss, gaps, invalidation, leadership and snapshots. Metrics adapters
// (Prometheus), audit logs and tests implement it.
//
// Observer has one method taking a sealed Event rather than one method per kind: adding an
// event kind in a later version does not break existing implementations, an implementation
// handles only the kinds it cares about with a type switch, and Multi and the runtime's queue
// stay one-liners. The event set is closed (Event has an unexported method), so a switch can
// list every kind (Kinds lists them).
//
// The runtime never calls an Observer on its own goroutines: events go through a bounded
// queue drained by one goroutine, so OnEvent is never called concurrently with itself, a slow
// Observer delays only other observer events, and when the queue (1024 events) is full events
// are dropped and counted rather than blocking a stream. A panic in OnEvent is recovered,
// counted and logged. watchtree.Runtime.ObserverStats returns the counts.
type Observer interface {
	// OnEvent receives one event, on the runtime's single observer goroutine, in order.
	OnEvent(ev Event)
}

// Func adapts a function to Observer.
type Func func(ev Event)

// OnEvent calls f(ev).
func (f Func) OnEvent(ev Event) { f(ev) }

// Nop ignores every event. It is the default watchtree.Config.Observer.
type Nop struct{}

// OnEvent does nothing.
func (Nop) OnEvent(Event) {}

// HandlerObserver is an optional interface of an Observer: when watchtree.Config.Observer
// implements it, ObserveHandler is called after every handler call (each attempt, and each
// Replay) with the stream's name, how long the handler ran and its error (nil on success). It
// feeds latency histograms; the Prometheus adapter implements it.
//
// Unlike OnEvent it is called synchronously, on the lane goroutine that ran the handler,
// concurrently for different lanes and streams: it must be safe for concurrent use and must
// not block (an atomic histogram update is the expected cost). A panic in it is recovered and
// logged; it never fails the event. Multi passes it on to the members that implement it.
type HandlerObserver interface {
	// ObserveHandler reports one handler call of stream: its wall time and its result (nil,
	// or the error or recovered panic it ended with).
	ObserveHandler(stream string, took time.Duration, err error)
}

// Multi returns an Observer that passes every event to each of obs in order, skipping nil
// ones. A panic in one observer does not keep the others from seeing the event: it is
// re-raised after all have been called (and then recovered and counted by the runtime). The
// result implements HandlerObserver exactly when a member does, and then passes each handler
// call on to the members that implement it; the same holds for HandlerTracer.
func Multi(obs ...Observer) Observer {
	out := make(multi, 0, len(obs))
	handlers, tracers := false, false
	for _, o := range obs {
		if o == nil {
			continue
		}
		out = append(out, o)
		if _, ok := o.(HandlerObserver); ok {
			handlers = true
		}
		if _, ok := o.(HandlerTracer); ok {
			tracers = true
		}
	}
	switch {
	case handlers && tracers:
		return traceHandlerMulti{multiHandler{out}}
	case handlers:
		return multiHandler{out}
	case tracers:
		return traceMulti{out}
	}
	return out
}

type multi []Observer

func (m multi) OnEvent(ev Event) {
	var first any
	for _, o := range m {
		func() {
			defer func() {
				if p := recover(); p != nil && first == nil {
					first = p
				}
			}()
			o.OnEvent(ev)
		}()
	}
	if first != nil {
		panic(first)
	}
}

// multiHandler is a Multi with at least one HandlerObserver member: the runtime times the
// handler calls only when someone listens.
type multiHandler struct{ multi }

func (m multiHandler) ObserveHandler(stream string, took time.Duration, err error) {
	for _, o := range m.multi {
		if ho, ok := o.(HandlerObserver); ok {
			ho.ObserveHandler(stream, took, err)
		}
	}
}
