package watchtree

import ()

// The events of Config.Observer are defined in package observe, where the actors build them;
// this file is their one delivery path: a bounded queue and one goroutine between the actors
// and the user's Observer.

// ObserverStats counts what became of the events meant for Config.Observer since Start.
// Delivered + Dropped + Panicked is the number of events the runtime emitted, less those still
// queued.
type ObserverStats struct {
	// Delivered counts the events whose OnEvent call returned normally.
	Delivered uint64
	// Dropped counts the events the Observer never received: the queue (1024 events) was full
	// because OnEvent was slower than the events came, or they were still queued when Stop's
	// deadline passed. A growing Dropped means the Observer is too slow: its metrics or audit
	// trail miss events.
	Dropped uint64
	// Panicked counts the OnEvent calls that panicked (recovered and logged).
	Panicked uint64
}

// ObserverStats returns the counts of the runtime's Observer events: all zero before Start,
// and final after Stop. It is cheap (three atomic loads) and safe to call at any time, e.g.
// from a metrics scrape.
func (rt *Runtime) ObserverStats() ObserverStats {
	st := rt.e.ObserverStats()
	return ObserverStats{Delivered: st.Delivered, Dropped: st.Dropped, Panicked: st.Panicked}
}
