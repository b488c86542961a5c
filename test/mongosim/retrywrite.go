package mongosim

import (
	"go.mongodb.org/mongo-driver/v2/bson"
)

// Statement-level retryable writes and the onPrimaryTransactionalWrite fail point.
//
// A server runs each statement of a retryable write (insert, update, delete, findAndModify,
// bulkWrite) in its own storage transaction and records the statement as executed when it
// commits. The fail point fires at that commit, once per statement that wrote a document
// (a statement matching nothing writes nothing and does not fire it), never for a statement a
// retry finds already executed:
//   - closeConnection (default true) ends the client's connection; the write still commits,
//     unless failBeforeCommitExceptionCode is set too;
//   - failBeforeCommitExceptionCode fails the statement with that code and rolls it back.
//
// With both (the default for failBeforeCommitExceptionCode), the statements before the failed
// one are committed and recorded, the driver sees a network error, retries, and the retry
// executes only the statements not yet recorded. With closeConnection false, the failed
// statement is a write error of the reply (a command error for findAndModify), and a retry
// with the same txnNumber runs it again.
//
// The simulator applies writes to memory at once, so while the fail point is configured the
// writes of a retryable statement are held back: its oplog entries are logged, and the undo
// record dropped, only when the statement "commits" (writeCtx.endStatement).

// stmtOutcome is what one executed statement of a retryable write contributed to the reply.
type stmtOutcome struct {
	n          int32 // documents inserted, matched (+1 for an upsert) or deleted
	modified   int32
	upserted   bool
	upsertedID any
}

// undoRec restores one document of coll to prev (nil: the document did not exist).
type undoRec struct {
	coll *collection
	key  string
	prev *docSlot
}

// errStmtDropped is endStatement's answer when the fail point failed the statement and closes
// the connection: the caller keeps the executed statements and drops the connection.
var errStmtDropped = &cmdError{Code: codeInternalError, Msg: "mongosim: statement failed before commit; closing the connection"}

// armFailPoint prepares w for the onPrimaryTransactionalWrite fail point: only retryable
// writes outside transactions are subject to it, and only while it is configured (one atomic
// load otherwise). It also loads the statements a previous attempt of the same write executed.
func (w *writeCtx) armFailPoint() {
	c := w.c
	if w.txn != nil || !c.RetryableWrite() || c.LSID == nil {
		return
	}
	w.fpArmed = w.e.s.fp.txnWriteSet.Load()
	st := w.e.sessions.m[sessionKey(*c.LSID)]
	if st != nil && st.hasTxn && st.txnNumber == *c.TxnNumber {
		w.history = st.stmts
	}
}

// executed returns the outcome of statement i if a previous attempt of this retryable write
// executed it.
func (w *writeCtx) executed(i int) (stmtOutcome, bool) {
	if w.history == nil {
		return stmtOutcome{}, false
	}
	o, ok := w.history[i]
	return o, ok
}

// keepOutcome records statement i as executed, for a retry of this write that does not find
// a stored reply (the write was cut short by the fail point). Caller holds e.mu.
func (w *writeCtx) keepOutcome(i int, o stmtOutcome) {
	if !w.fpArmed && w.history == nil {
		return
	}
	if w.history == nil {
		st := w.e.sessionLocked(*w.c.LSID)
		if !st.hasTxn || st.txnNumber != *w.c.TxnNumber {
			return
		}
		if st.stmts == nil {
			st.stmts = make(map[int]stmtOutcome)
		}
		w.history = st.stmts
	}
	w.history[i] = o
}

// noteWrite remembers, while the fail point is armed, how to undo a document write.
func (w *writeCtx) noteWrite(coll *collection, key string, prev *docSlot) {
	if w.fpArmed {
		w.undo = append(w.undo, undoRec{coll: coll, key: key, prev: prev})
	}
}

// endStatement finishes one statement: with the fail point armed and the statement having
// written, the fail point is evaluated; it may roll the statement back (returning its error,
// or errStmtDropped when the connection is to be closed) or ask for the connection to be
// closed after the reply is computed. err is the statement's own outcome. Caller holds e.mu.
func (w *writeCtx) endStatement(err *cmdError) *cmdError {
	if !w.fpArmed {
		return err
	}
	pending, undo := w.pending, w.undo
	w.pending, w.undo = nil, nil
	if err == nil && len(pending) > 0 {
		ferr, closeConn := w.e.s.fp.evalTransactionalWrite()
		if ferr != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i].restore()
			}
			w.fpFailed = true
			if closeConn {
				return errStmtDropped
			}
			return ferr
		}
		if closeConn {
			w.c.closeAfter = true
		}
	}
	for _, en := range pending {
		en.ts = w.e.clock.tick()
		w.e.logLocked(en)
	}
	return err
}

// restore puts the document back as it was before the statement.
func (u undoRec) restore() {
	cur := u.coll.slot(u.key)
	switch {
	case u.prev == nil:
		u.coll.removeSlot(u.key)
	case cur != nil:
		_ = u.coll.replaceSlot(u.prev)
	default:
		// A deleted document comes back at the end of the natural order.
		_ = u.coll.insertSlot(u.prev)
	}
}

// storeReplyLocked stores the reply of a retryable write that ran to its end, unless the fail
// point failed one of its statements without closing the connection: then a retry must run
// that statement again, from the recorded statements.
func (w *writeCtx) storeReplyLocked(reply bson.D) {
	if w.fpFailed {
		return
	}
	w.e.retryStoreLocked(w.c, reply)
}

// multiRetryableErr is a server's answer to a multi-document statement in a retryable write:
// it cannot be retried safely, so drivers send updateMany and deleteMany without txnNumber.
func multiRetryableErr(c *command, msg string) *cmdError {
	if c.RetryableWrite() {
		return errorf(codeInvalidOptions, "%s", msg)
	}
	return nil
}
