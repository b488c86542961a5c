package mongosim

// viewWriteErrorLocked is the error of a write to db.coll when it is a view, else nil.
func (e *engine) viewWriteErrorLocked(db, coll string) *cmdError { return nil }
