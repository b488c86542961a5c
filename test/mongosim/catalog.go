package mongosim

// PLACEHOLDER: replaced by the catalog implementation.
type database struct{}

func (e *engine) runTTLMonitor(stop <-chan struct{}) { <-stop }
