package mongosim

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func init() {
	registerCommand(kindWrite, cmdCommitTransaction, "commitTransaction")
	registerCommand(kindWrite, cmdAbortTransaction, "abortTransaction")
}

// Multi-document transactions.
//
// A transaction is identified by (lsid, txnNumber). It works on private copy-on-write views
// of the collections it accesses: a view is a clone of the committed collection made at the
// transaction's first access to it, read or write (reads see it through viewLocked), so each
// collection is read from a snapshot plus the transaction's own writes. (A real server takes
// one snapshot for all collections at the first operation.) Writes are recorded as pending
// oplog entries; commit re-applies them to the committed collections under e.mu with one
// cluster time, so the writes become visible, and reach change streams, all at once.
//
// Write conflicts: when the transaction first writes a document it remembers the version
// (slot) its snapshot holds. If the committed document is not that version (another writer,
// outside any transaction or by another transaction's commit, changed it since the snapshot),
// that write, a later one, or the commit fails with WriteConflict (112) and the transaction is
// aborted. A read-modify-write therefore never loses a concurrent write.
// A transaction writing a document another open transaction has written fails at once with
// WriteConflict, as on a real server. A write outside any transaction that would change such
// a document waits, as on a real server, until the transaction commits or aborts (then it
// runs against the new committed state) or its own maxTimeMS passes (MaxTimeMSExpired, 50);
// see txnwait.go.

type txnPhase int

const (
	txnActive txnPhase = iota
	txnCommitted
	txnAborted
)

// sessionTxn is the transaction state of one session.
type sessionTxn struct {
	number int64 // the session's highest transaction number
	phase  txnPhase
	txn    *transaction // the active transaction (nil once committed or aborted)
}

// transaction is an active multi-document transaction.
type transaction struct {
	lsid      bson.Binary
	number    int64
	startedBy *command
	views     map[string]*txnView // by "db.coll"
	ops       []txnOp
	owned     []string      // keys of txnTable.owners this transaction holds
	started   time.Time     // for TransactionLifetimeLimit
	done      chan struct{} // closed when the transaction commits or aborts
	// readAt is the cluster time the transaction reads at when its first statement gave
	// atClusterTime (readAtSet); otherwise each collection is read as of its first access.
	readAt    bson.Timestamp
	readAtSet bool
}

// txnView is the transaction's private copy of one collection.
type txnView struct {
	view    *collection
	base    *collection         // the committed collection when the view was made; nil if the txn created it
	seen    map[string]*docSlot // snapshot slot of each written _id at its first write (nil: absent)
	written bool                // the transaction has written to this collection
}

// txnOp is one pending write, re-applied at commit.
type txnOp struct {
	kind     string // create, insert, replace, update, delete
	db, coll string
	key      string   // _id hash key
	slot     *docSlot // the new version (insert, replace, update)
	entry    *oplogEntry
	created  *collection // create: the view (uuid, options)
	index    *index      // createIndexes: the index built in the view
}

// txnTable holds the transaction state of every session, keyed by string(lsid.id). Guarded by
// engine.mu.
type txnTable struct {
	m map[string]*sessionTxn
	// owners maps "db.coll\x00<_id hash>" to the active transaction that has written the
	// document: another transaction writing it fails at once with WriteConflict, as on a real
	// server, where the first writer holds the document until it commits or aborts.
	owners map[string]*transaction
	// waiting counts the writes outside transactions waiting for one of them (txnwait.go).
	waiting int
}

// end finishes the session's transaction with phase and releases its documents.
func (tab *txnTable) end(st *sessionTxn, phase txnPhase) {
	if st.txn != nil {
		for _, k := range st.txn.owned {
			if tab.owners[k] == st.txn {
				delete(tab.owners, k)
			}
		}
		st.txn.owned = nil
		close(st.txn.done) // wakes the writes waiting for it
	}
	st.phase, st.txn = phase, nil
}

// txnsLocked returns the engine's transaction table, creating it on first use. Caller holds
// e.mu.
func (e *engine) txnsLocked() *txnTable {
	if e.txns == nil {
		e.txns = &txnTable{m: make(map[string]*sessionTxn), owners: make(map[string]*transaction)}
	}
	return e.txns
}

// txnForCommandLocked returns the active transaction a command in a transaction belongs to,
// starting it when the command carries startTransaction. Errors: TransactionTooOld (225) for
// an old txnNumber, NoSuchTransaction (251) for an unknown or aborted one,
// TransactionCommitted (256) for a committed one. Caller holds e.mu.
func (e *engine) txnForCommandLocked(c *command) (*transaction, *cmdError) {
	if c.LSID == nil || c.TxnNumber == nil {
		return nil, errorf(codeInvalidOptions, "Transactions require a session id and a transaction number")
	}
	key, n := string(c.LSID.Data), *c.TxnNumber
	tab := e.txnsLocked()
	st := tab.m[key]
	if c.StartTxn {
		if st != nil {
			switch {
			case st.phase == txnActive && st.number == n && st.txn.startedBy == c:
				return st.txn, nil
			case n < st.number:
				return nil, errorf(codeTransactionTooOld, "Cannot start transaction %d on session %s because a newer transaction %d has already started.",
					n, formatLSID(*c.LSID), st.number)
			case n == st.number:
				return nil, errorf(codeConflictingOperationInProgress, "Cannot start a transaction at given transaction number %d a transaction with the same number is in state %s",
					n, [...]string{"TxnInProgress", "TxnCommitted", "TxnAborted"}[st.phase])
			}
		}
		if se := e.sessions.m[key]; se != nil && se.hasTxn && n < se.txnNumber {
			return nil, errorf(codeTransactionTooOld, "Cannot start transaction %d on session %s because a newer retryable write %d has already started.",
				n, formatLSID(*c.LSID), se.txnNumber)
		}
		var readAt bson.Timestamp
		if c.snapshotAtSet {
			// readConcern {level: snapshot, atClusterTime}: the transaction reads at that time.
			var cerr *cmdError
			if readAt, cerr = e.snapshotTimeLocked(c); cerr != nil {
				return nil, cerr
			}
			if tsLess(readAt, e.oplog.snapshotFloor()) {
				return nil, errorf(codeSnapshotTooOld, "Read timestamp %s is older than the oldest available timestamp.", formatTS(readAt))
			}
		}
		if st != nil && st.txn != nil {
			tab.end(st, txnAborted) // a newer transaction number aborts the open one
		}
		t := &transaction{lsid: *c.LSID, number: n, startedBy: c, views: make(map[string]*txnView),
			started: time.Now(), done: make(chan struct{}), readAt: readAt, readAtSet: c.snapshotAtSet}
		tab.m[key] = &sessionTxn{number: n, phase: txnActive, txn: t}
		return t, nil
	}
	switch {
	case st == nil || n > st.number:
		return nil, errorf(codeNoSuchTransaction, "Given transaction number %d does not match any in-progress transactions.", n)
	case n < st.number:
		return nil, errorf(codeTransactionTooOld, "txnNumber %d is less than last txnNumber %d seen in session %s", n, st.number, formatLSID(*c.LSID))
	}
	e.expireTxnLocked(st)
	switch st.phase {
	case txnAborted:
		return nil, errorf(codeNoSuchTransaction, "Transaction with { txnNumber: %d } has been aborted.", n)
	case txnCommitted:
		return nil, errorf(codeTransactionCommitted, "Transaction with { txnNumber: %d } has been committed.", n)
	}
	return st.txn, nil
}

// retryableVsTxnLocked orders a retryable write after the session's transactions: a
// txnNumber below the session's latest transaction fails with TransactionTooOld (225), a higher
// one aborts the session's open transaction, as a real server does. Caller holds e.mu.
func (e *engine) retryableVsTxnLocked(c *command) *cmdError {
	if c.LSID == nil || c.TxnNumber == nil {
		return nil
	}
	tab := e.txnsLocked()
	st := tab.m[string(c.LSID.Data)]
	switch {
	case st == nil:
	case *c.TxnNumber < st.number:
		return errorf(codeTransactionTooOld, "Retryable write with txnNumber %d is prohibited on session %s because a newer transaction with txnNumber %d has already started on this session.",
			*c.TxnNumber, formatLSID(*c.LSID), st.number)
	case st.phase == txnActive && st.number < *c.TxnNumber:
		tab.end(st, txnAborted)
	}
	return nil
}

// abortTxnLocked discards an active transaction. Caller holds e.mu.
func (e *engine) abortTxnLocked(t *transaction) {
	tab := e.txnsLocked()
	st := tab.m[string(t.lsid.Data)]
	if st != nil && st.txn == t {
		tab.end(st, txnAborted)
	}
}

// abortSessionTxnsLocked aborts the session's active transaction, if any, and forgets the
// session's transaction state (endSessions, killAllSessions). lsid is string(lsid.id bytes).
// Caller holds e.mu.
func (e *engine) abortSessionTxnsLocked(lsid string) {
	tab := e.txnsLocked()
	if st := tab.m[lsid]; st != nil {
		tab.end(st, txnAborted)
	}
	delete(tab.m, lsid)
}

// abortAllTxnsLocked aborts every session's transaction and forgets all transaction state
// (killAllSessions). Caller holds e.mu.
func (e *engine) abortAllTxnsLocked() {
	tab := e.txnsLocked()
	for _, st := range tab.m {
		tab.end(st, txnAborted)
	}
	clear(tab.m)
	clear(tab.owners)
}

// viewFor returns the transaction's view of db.coll, cloning the committed collection on
// first use. When the collection does not exist it is created in the view if create is
// set (a pending "create" operation), else nil is returned.
func (t *transaction) viewFor(e *engine, db, coll string, create bool) (*txnView, *cmdError) {
	ns := db + "." + coll
	if tv, ok := t.views[ns]; ok {
		return tv, nil
	}
	base := e.collLocked(db, coll)
	snap := base
	if t.readAtSet {
		var err *cmdError
		if snap, err = e.collectionAtLocked(db, coll, t.readAt, true); err != nil {
			return nil, err
		}
	}
	if snap == nil {
		if !create {
			return nil, nil
		}
		if err := validCollName(db, coll); err != nil {
			return nil, err
		}
		v := newCollection(db, coll)
		tv := &txnView{view: v, seen: make(map[string]*docSlot), written: true}
		t.views[ns] = tv
		t.ops = append(t.ops, txnOp{kind: "create", db: db, coll: coll, created: v, entry: createEntry(v)})
		return tv, nil
	}
	view := snap
	if snap == base {
		view = base.clone()
	} // else a reconstruction of its own (snapshotread.go)
	tv := &txnView{view: view, base: base, seen: make(map[string]*docSlot)}
	t.views[ns] = tv
	return tv, nil
}

func writeConflict() *cmdError {
	return errorf(codeWriteConflict, "Write conflict during plan execution and yielding is disabled. :: Please retry your operation or multi-document transaction.")
}

// touch records the committed version of a document the transaction is about to write and
// fails with WriteConflict when it changed since the transaction first touched it.
func (t *transaction) touch(e *engine, db, coll, key string) *cmdError {
	tv := t.views[db+"."+coll]
	if tv == nil {
		return nil
	}
	tab := e.txnsLocked()
	ownKey := db + "." + coll + "\x00" + key
	if o := tab.owners[ownKey]; o != t {
		if o != nil {
			if ost := tab.m[string(o.lsid.Data)]; ost != nil && ost.txn == o {
				return writeConflict() // another open transaction has written this document
			}
		}
		tab.owners[ownKey] = t
		t.owned = append(t.owned, ownKey)
	}
	tv.written = true
	committed := e.collLocked(db, coll)
	if committed != tv.base {
		return writeConflict()
	}
	var cur *docSlot
	if committed != nil {
		cur = committed.slot(key)
	}
	exp, seen := tv.seen[key]
	if !seen {
		exp = tv.view.slot(key)
		tv.seen[key] = exp
	}
	if cur != exp {
		return writeConflict()
	}
	return nil
}

// checkCommitLocked verifies that committing t cannot conflict: every collection and
// document it touched is unchanged, and no key its writes add to a unique index is held by a
// document it did not touch. Caller holds e.mu.
func (t *transaction) checkCommitLocked(e *engine) *cmdError {
	for _, tv := range t.views {
		if !tv.written {
			continue // only read: nothing to apply
		}
		committed := e.collLocked(tv.view.db, tv.view.name)
		if committed != tv.base {
			return writeConflict()
		}
		if committed == nil {
			continue
		}
		for key, exp := range tv.seen {
			if committed.slot(key) != exp {
				return writeConflict()
			}
		}
		if len(committed.indexes) != len(tv.view.indexes) {
			return writeConflict()
		}
		for i, ix := range committed.indexes {
			if tv.view.indexes[i].name != ix.name {
				return writeConflict()
			}
		}
	}
	for _, op := range t.ops {
		if op.slot == nil {
			continue
		}
		tv := t.views[op.db+"."+op.coll]
		committed := tv.base
		if committed == nil {
			continue
		}
		keys, err := committed.indexKeysOf(op.slot.doc)
		if err != nil {
			return err
		}
		for i, ks := range keys {
			for _, k := range ks {
				holder, ok := committed.indexes[i].entries[k.hash]
				if _, touched := tv.seen[holder]; ok && !touched {
					return writeConflict()
				}
			}
		}
	}
	return nil
}

// commitLocked applies t's pending writes to the committed catalog with one cluster time
// and logs them with txnOpIndex 0..n-1. Caller holds e.mu.
func (t *transaction) commitLocked(e *engine) *cmdError {
	if len(t.ops) == 0 {
		return nil
	}
	if err := t.checkCommitLocked(e); err != nil {
		return err
	}
	ts := e.clock.tick()
	lsid := bson.D{{Key: "id", Value: t.lsid}, {Key: "uid", Value: bson.Binary{Subtype: 0, Data: make([]byte, 32)}}}
	num := t.number
	entries := make([]*oplogEntry, 0, len(t.ops))
	for i, op := range t.ops {
		if op.kind == "create" {
			coll := newCollection(op.db, op.coll)
			coll.uuid, coll.options = op.created.uuid, op.created.options
			coll.preAndPostImages = op.created.preAndPostImages
			e.addCollectionLocked(coll, op.entry)
		} else if op.kind == "createIndexes" {
			coll := e.collLocked(op.db, op.coll)
			if coll == nil {
				return errorf(codeInternalError, "mongosim: transaction commit lost collection %s.%s", op.db, op.coll)
			}
			ix := op.index.clone()
			if ix.unique {
				ix.entries = make(map[string]string)
			}
			if err := coll.buildIndex(ix); err != nil {
				return errorf(codeInternalError, "mongosim: transaction commit failed half-way: %v", err)
			}
			coll.indexes = append(coll.indexes, ix)
		} else {
			coll := e.collLocked(op.db, op.coll)
			if coll == nil {
				return errorf(codeInternalError, "mongosim: transaction commit lost collection %s.%s", op.db, op.coll)
			}
			var err *cmdError
			prev := coll.slot(op.key)
			switch op.kind {
			case "insert":
				err = coll.insertSlot(op.slot)
			case "delete":
				coll.removeSlot(op.key)
			default:
				err = coll.replaceSlot(op.slot)
			}
			op.entry.setVersion(op.key, prev)
			if err != nil {
				return errorf(codeInternalError, "mongosim: transaction commit failed half-way: %v", err)
			}
		}
		en := op.entry
		en.ts, en.txnOpIndex, en.lsid, en.txnNumber = ts, uint32(i), lsid, &num
		entries = append(entries, en)
	}
	e.logLocked(entries...)
	return nil
}

// txnEndArgs checks the session fields of commitTransaction/abortTransaction.
func txnEndArgs(c *command) *cmdError {
	if c.DB != "admin" {
		return errorf(codeUnauthorized, "%s may only be run against the admin database.", c.Name)
	}
	if c.LSID == nil || c.TxnNumber == nil || c.Autocommit == nil {
		return errorf(codeInvalidOptions, "%s must be run within a transaction", c.Name)
	}
	return nil
}

func cmdCommitTransaction(s *Server, c *command) (bson.D, error) {
	if err := txnEndArgs(c); err != nil {
		return nil, err
	}
	e := s.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	tab := e.txnsLocked()
	st := tab.m[string(c.LSID.Data)]
	n := *c.TxnNumber
	switch {
	case st == nil || n > st.number:
		if c.StartTxn {
			return bson.D{}, nil // an empty transaction started and committed at once
		}
		return nil, errorf(codeNoSuchTransaction, "Given transaction number %d does not match any in-progress transactions.", n)
	case n < st.number:
		return nil, errorf(codeTransactionTooOld, "txnNumber %d is less than last txnNumber %d seen in session %s", n, st.number, formatLSID(*c.LSID))
	}
	e.expireTxnLocked(st)
	switch st.phase {
	case txnCommitted:
		return bson.D{}, nil // a retried commit: idempotent
	case txnAborted:
		return nil, errorf(codeNoSuchTransaction, "Transaction with { txnNumber: %d } has been aborted.", n)
	}
	t := st.txn
	if err := t.commitLocked(e); err != nil {
		tab.end(st, txnAborted)
		if err.Code == codeWriteConflict {
			// The whole transaction can be retried: label it so WithTransaction does.
			err.Labels = []string{"TransientTransactionError"}
		}
		return nil, err
	}
	tab.end(st, txnCommitted)
	return bson.D{}, nil
}

func cmdAbortTransaction(s *Server, c *command) (bson.D, error) {
	if err := txnEndArgs(c); err != nil {
		return nil, err
	}
	e := s.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	tab := e.txnsLocked()
	st := tab.m[string(c.LSID.Data)]
	n := *c.TxnNumber
	switch {
	case st == nil || n > st.number:
		return nil, errorf(codeNoSuchTransaction, "Given transaction number %d does not match any in-progress transactions.", n)
	case n < st.number:
		return nil, errorf(codeTransactionTooOld, "txnNumber %d is less than last txnNumber %d seen in session %s", n, st.number, formatLSID(*c.LSID))
	}
	switch st.phase {
	case txnCommitted:
		return nil, errorf(codeTransactionCommitted, "Transaction with { txnNumber: %d } has been committed.", n)
	case txnAborted:
		return nil, errorf(codeNoSuchTransaction, "Transaction with { txnNumber: %d } has been aborted.", n)
	}
	tab.end(st, txnAborted)
	return bson.D{}, nil
}
