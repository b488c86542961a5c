package mongosim

// setVersion marks a document entry with the document's key and the version it replaced
// (nil: the document did not exist), which snapshot reads undo to see the data as it was.
func (en *oplogEntry) setVersion(key string, prev *docSlot) {
	en.key, en.prev, en.versioned = key, prev, true
}
