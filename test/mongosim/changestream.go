package mongosim

// PLACEHOLDER: replaced by the change-stream implementation.
type streamHub struct{}

func (h *streamHub) init()      {}
func (h *streamHub) closeAll()  {}
func (h *streamHub) interrupt() {}

func (h *streamHub) notifyLocked([]*oplogEntry) {}
