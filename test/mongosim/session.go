package mongosim

// PLACEHOLDER: replaced by the sessions implementation.
type sessionTable struct{}

func (t *sessionTable) init() {}
