package otel

import "github.com/watchtree/watchtree/observe"

// notExported are the event kinds OnEvent exports nothing for (no span, no metric), each with
// the reason: every other kind feeds a span or a metric. A new kind must go to one or the
// other (the package's test checks that every kind of observe.Kinds is in exactly one).
var notExported = map[observe.Kind]string{
	observe.KindStarted:          "a start is the watchtree.stream.state gauge (running); a restart is the restart span and watchtree.restarts",
	observe.KindInvalidated:      "an invalidate that stops the stream is a crashed, terminal stop (watchtree.stops, the restart span); one that reopens is not a failure",
	observe.KindNamespaceMissing: "a warning with a state, repeated every minute while it holds: StreamStatus.Warnings and the console's note carry it",
}
