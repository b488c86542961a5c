package mongosim

import (
	"time"
)

// Writes outside transactions wait for the open transactions that hold their documents.
//
// On a real server a transaction holds every document it has written until it commits or
// aborts; a write outside any transaction that needs one of them blocks (it retries its write
// conflict internally) until the transaction ends or the write's maxTimeMS passes. mongosim
// does the same: before a statement changes anything it checks that none of the documents it
// is about to write is held by an open transaction; if one is, it releases the engine lock,
// waits for that transaction to end (or for TransactionLifetimeLimit to abort it), and runs
// the statement again from the start, against the new committed state. Statements before it
// stay applied, as on a server. maxTimeMS expiring while waiting fails the whole command with
// MaxTimeMSExpired (50), as a server fails a write batch interrupted that way.

// errTxnBlocked is returned by a statement outside transactions that must wait for
// writeCtx.blockedBy; runWrite and findAndModify wait and retry on it, nobody replies with it.
var errTxnBlocked = &cmdError{Code: codeWriteConflict, Msg: "mongosim: write blocked by an open transaction"}

// slotKeys returns the _id hash keys of slots.
func slotKeys(slots []*docSlot) []string {
	if len(slots) == 0 {
		return nil
	}
	keys := make([]string, len(slots))
	for i, s := range slots {
		keys[i] = s.key
	}
	return keys
}

// checkNotHeld returns errTxnBlocked (and sets w.blockedBy) when a write outside transactions
// is about to change a document of w's collection that an open transaction has written.
// Transactions past TransactionLifetimeLimit are aborted instead of waited for. Caller holds
// e.mu.
func (w *writeCtx) checkNotHeld(keys ...string) *cmdError {
	tab := w.e.txns
	if w.txn != nil || tab == nil || len(tab.owners) == 0 || len(keys) == 0 {
		return nil
	}
	prefix := w.db + "." + w.name + "\x00"
	for _, k := range keys {
		o := tab.owners[prefix+k]
		if o == nil {
			continue
		}
		st := tab.m[string(o.lsid.Data)]
		if st == nil || st.txn != o {
			continue
		}
		if w.e.expireTxnLocked(st) {
			continue
		}
		w.blockedBy = o
		return errTxnBlocked
	}
	return nil
}

// expireTxnLocked aborts the session's open transaction when it is older than
// TransactionLifetimeLimit, as a real server's transaction reaper does, and reports whether
// it did. Caller holds e.mu.
func (e *engine) expireTxnLocked(st *sessionTxn) bool {
	if st.phase != txnActive || st.txn == nil || time.Since(st.txn.started) <= e.s.opts.TransactionLifetimeLimit {
		return false
	}
	e.txnsLocked().end(st, txnAborted)
	return true
}

// waitBlocked waits, without the engine lock, until w.blockedBy ends, reaches its lifetime
// limit, or the command's maxTimeMS passes (MaxTimeMSExpired). A dropped connection or a
// closing server ends the wait with errCloseConnection. Caller holds e.mu; it is held again
// on return.
func (w *writeCtx) waitBlocked() error {
	t := w.blockedBy
	w.blockedBy = nil
	e := w.e
	var deadline <-chan time.Time
	if !w.c.deadline.IsZero() { // the command's maxTimeMS (checkGenericArgs)
		tm := time.NewTimer(time.Until(w.c.deadline))
		defer tm.Stop()
		deadline = tm.C
	}
	expiry := time.NewTimer(time.Until(t.started.Add(e.s.opts.TransactionLifetimeLimit)))
	defer expiry.Stop()
	tab := e.txnsLocked()
	tab.waiting++
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		tab.waiting--
	}()
	select {
	case <-t.done:
		return nil
	case <-expiry.C:
		return nil // the retry aborts it (checkNotHeld) and proceeds
	case <-deadline:
		return errMaxTimeExpired()
	case <-w.c.ctx.Done():
		return errCloseConnection
	case <-e.s.closing:
		return errCloseConnection
	}
}
