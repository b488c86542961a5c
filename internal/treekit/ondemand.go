package treekit

// The codes of messages.OnDemandSnapshotReply; the empty code means the snapshot was accepted.
// The supervisor answers OnDemandNotRunning and OnDemandUnsupported itself, the on-demand
// snapshot actor the others.
const (
	// OnDemandBusy: an on-demand snapshot is already running (the reply's running names it).
	OnDemandBusy = "busy"
	// OnDemandNotRunning: the stream is not running on this instance.
	OnDemandNotRunning = "not_running"
	// OnDemandUnsupported: the stream has no on-demand snapshot actor (it watches no collection).
	OnDemandUnsupported = "unsupported"
	// OnDemandFailed: the request was refused (a filter that is not a query document).
	OnDemandFailed = "failed"
)
