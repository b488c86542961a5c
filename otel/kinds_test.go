package otel

import (
	"testing"

	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/observe/observetest"
)

// prelude is what must come before a kind's sample for it to export anything: a snapshot's
// progress and end annotate the span its start opened.
func prelude(k observe.Kind) []observe.Event {
	switch k {
	case observe.KindSnapshotProgress, observe.KindSnapshotDone:
		return []observe.Event{observetest.Samples()[observe.KindSnapshotStarted]}
	}
	return nil
}

// TestEveryKindExportedOrListed: every observe kind either starts, changes or ends a span or
// changes a metric of the adapter, or is in notExported with a reason, never both.
func TestEveryKindExportedOrListed(t *testing.T) {
	observetest.EveryKind(t, notExported, func(ev observe.Event) bool {
		h := newHarness(t, Options{})
		for _, p := range prelude(ev.Kind()) {
			h.tel.OnEvent(p)
		}
		// The counters' zero points come with the stream, whatever the kind of its first event.
		h.tel.zero(ev.EventMeta().Stream)
		before := render(h.collect(t))
		started, ended := len(h.spans.Started()), len(h.spans.Ended())
		events := 0
		for _, s := range h.spans.Started() {
			events += len(s.Events())
		}
		h.tel.OnEvent(ev)
		eventsAfter := 0
		for _, s := range h.spans.Started() {
			eventsAfter += len(s.Events())
		}
		return render(h.collect(t)) != before || len(h.spans.Started()) != started ||
			len(h.spans.Ended()) != ended || eventsAfter != events
	})
}
