package store

// Scope names whose records a checkpoint, a dead letter or a gap record is: the stream, and,
// for a stream that runs on every instance (AllInstances), the instance. Each instance of such
// a stream keeps its own position, dead letters and gaps, so one instance's progress or failures
// never move or show up in another's.
//
// An empty Instance is the stream's shared scope: the one position of a SingleLeader stream
// (written only by the lease holder, under its epoch), and the only scope earlier versions had.
// Which scope a stream uses is decided by its mode, in one place of the root package; stores
// treat both alike.
type Scope struct {
	// Stream is the stream name.
	Stream string
	// Instance is the instance name (watchtree.Config.InstanceName); empty for the shared scope.
	Instance string
}

// Shared reports whether s is the stream's shared scope (no instance).
func (s Scope) Shared() bool { return s.Instance == "" }

// String returns "stream" for the shared scope and "stream@instance" otherwise.
func (s Scope) String() string {
	if s.Instance == "" {
		return s.Stream
	}
	return s.Stream + "@" + s.Instance
}
