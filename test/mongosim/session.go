package mongosim

import (
	"encoding/hex"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// sessionTimeout is logicalSessionTimeoutMinutes as hello reports it: a session idle for
// longer may be forgotten (its retryable-write history with it).
const sessionTimeout = 30 * time.Minute

// sessionReapInterval is how often, at most, a session lookup scans the table for expired
// sessions. Reaping is lazy: there is no background goroutine.
const sessionReapInterval = time.Minute

// sessionState is the server-side state of one logical session (keyed by lsid.id).
type sessionState struct {
	lastUse time.Time
	// txnNumber is the highest retryable-write txnNumber this session has started; valid
	// when hasTxn.
	txnNumber int64
	hasTxn    bool
	// reply is the stored reply (fields before ok) of the successful write with txnNumber,
	// nil until that write succeeded. A retry with the same txnNumber gets it back.
	reply bson.D
	// stmts holds the statements of the write with txnNumber that executed, by index, when
	// the onPrimaryTransactionalWrite fail point was configured (retrywrite.go): a retry
	// without a stored reply skips them.
	stmts map[int]stmtOutcome
}

// sessionTable holds the logical sessions the server knows of. Guarded by engine.mu.
type sessionTable struct {
	m        map[string]*sessionState
	lastReap time.Time
	started  time.Time // when the server started (serverStatus uptime)
}

func (t *sessionTable) init() {
	t.m = make(map[string]*sessionState)
	t.started = time.Now()
}

// sessionKey is the table key of an lsid.id: its 16 raw bytes.
func sessionKey(id bson.Binary) string { return string(id.Data) }

// sessionLocked returns the state of the session lsid, creating it, and marks it used now.
// Caller holds e.mu.
func (e *engine) sessionLocked(lsid bson.Binary) *sessionState {
	now := e.s.opts.Now()
	e.reapSessionsLocked(now)
	key := sessionKey(lsid)
	st := e.sessions.m[key]
	if st == nil {
		st = &sessionState{}
		e.sessions.m[key] = st
	}
	st.lastUse = now
	return st
}

// touchSessionLocked marks the command's session (if any) as used. Caller holds e.mu.
func (e *engine) touchSessionLocked(c *command) {
	if c.LSID != nil {
		e.sessionLocked(*c.LSID)
	}
}

// reapSessionsLocked forgets sessions idle for longer than sessionTimeout; it scans the
// table at most once per sessionReapInterval. Caller holds e.mu.
func (e *engine) reapSessionsLocked(now time.Time) {
	t := &e.sessions
	if t.lastReap.IsZero() || now.Before(t.lastReap) {
		t.lastReap = now // first use, or the injected clock went backwards
		return
	}
	if now.Sub(t.lastReap) < sessionReapInterval {
		return
	}
	t.lastReap = now
	for k, st := range t.m {
		if now.Sub(st.lastUse) > sessionTimeout {
			delete(t.m, k)
		}
	}
}

// endSessionLocked forgets the session with the given key (sessionKey of its lsid.id).
// Caller holds e.mu.
func (e *engine) endSessionLocked(key string) {
	delete(e.sessions.m, key)
}

// retryLookupLocked implements the server half of retryable writes (reference §2.2). For a
// retryable write (txnNumber without autocommit) it compares txnNumber with the highest one
// the session has started:
//   - lower (than the last retryable write's or transaction's): error TransactionTooOld (225),
//     nothing is executed;
//   - equal, and that write already succeeded: found is true and reply is the stored reply,
//     which the caller returns as is, without executing the command again;
//   - equal without a stored reply, or higher: found is false and the caller executes the
//     command (a higher number starts a new retryable write and drops the old reply).
//
// It is a no-op (nil, false, nil) for any other command. Caller holds e.mu.
func (e *engine) retryLookupLocked(c *command) (reply bson.D, found bool, err error) {
	if !c.RetryableWrite() || c.LSID == nil {
		return nil, false, nil
	}
	st := e.sessionLocked(*c.LSID)
	n := *c.TxnNumber
	// txnNumbers are shared with the session's multi-document transactions (txn.go).
	if tx := e.txnsLocked().m[sessionKey(*c.LSID)]; tx != nil && n < tx.number {
		return nil, false, errorf(codeTransactionTooOld,
			"Retryable write with txnNumber %d is prohibited on session %s because a newer transaction with txnNumber %d has already started on this session.",
			n, formatLSID(*c.LSID), tx.number)
	}
	switch {
	case st.hasTxn && n < st.txnNumber:
		return nil, false, errorf(codeTransactionTooOld,
			"Retryable write with txnNumber %d is prohibited on session %s because a newer retryable write with txnNumber %d has already started on this session.",
			n, formatLSID(*c.LSID), st.txnNumber)
	case st.hasTxn && n == st.txnNumber:
		if st.reply != nil {
			return slices.Clip(st.reply), true, nil
		}
		return nil, false, nil
	default:
		st.txnNumber, st.hasTxn, st.reply, st.stmts = n, true, nil, nil
		return nil, false, nil
	}
}

// retryStoreLocked stores reply as the outcome of the command's retryable write, so that a
// retry with the same (lsid, txnNumber) is answered with it. The stored slice is clipped so
// that callers appending to either copy never share memory; its nested values are never
// modified (see the plan's data model). No-op unless c is a retryable write whose txnNumber
// is still the session's current one. Caller holds e.mu.
func (e *engine) retryStoreLocked(c *command, reply bson.D) {
	if !c.RetryableWrite() || c.LSID == nil {
		return
	}
	st := e.sessionLocked(*c.LSID)
	if !st.hasTxn || st.txnNumber != *c.TxnNumber {
		return
	}
	if reply == nil {
		reply = bson.D{}
	}
	st.reply = slices.Clip(slices.Clone(reply))
}

// formatLSID renders an lsid.id as the server prints UUIDs in messages.
func formatLSID(id bson.Binary) string {
	h := hex.EncodeToString(id.Data)
	if len(h) != 32 {
		return h
	}
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// sessionIDsArg parses the array of {id: UUID} documents of endSessions, killSessions and
// refreshSessions into session keys.
func sessionIDsArg(c *command) ([]string, error) {
	v := c.Body[0].Value
	arr, ok := v.(bson.A)
	if !ok {
		return nil, errorf(codeTypeMismatch, "BSON field '%s' is the wrong type '%s', expected type 'array'", c.Name, typeName(v))
	}
	keys := make([]string, 0, len(arr))
	for _, x := range arr {
		d, ok := x.(bson.D)
		if !ok {
			return nil, errorf(codeTypeMismatch, "BSON field '%s' must be an array of objects", c.Name)
		}
		idV, ok := lookupD(d, "id")
		if !ok {
			return nil, errorf(codeFailedToParse, "BSON field '%s.id' is missing but a required field", c.Name)
		}
		id, ok := idV.(bson.Binary)
		if !ok || id.Subtype != 4 || len(id.Data) != 16 {
			return nil, errorf(codeTypeMismatch, "BSON field '%s.id' must be a UUID (binary subtype 4)", c.Name)
		}
		keys = append(keys, sessionKey(id))
	}
	return keys, nil
}
