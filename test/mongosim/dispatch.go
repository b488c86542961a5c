package mongosim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/test/mongosim/internal/query"
)

// command is one decoded client command, as handlers see it.
type command struct {
	Name string // the command name exactly as sent (first key of the body)
	DB   string // $db
	Body bson.D // the body with kind-1 sequences merged in as arrays
	conn *conn
	ctx  context.Context // done when the connection dies or the server closes

	// Session fields, parsed once by the dispatcher.
	LSID         *bson.Binary // lsid.id, when present
	TxnNumber    *int64       // txnNumber, when present
	Autocommit   *bool        // autocommit, when present (false inside transactions)
	StartTxn     bool         // startTransaction: true
	ChangeStream bool         // set by handlers: the command is an aggregate/getMore of a change stream

	deadline      time.Time // maxTimeMS; zero for none (generic.go)
	unsatisfiedWC bson.D    // the writeConcernError a write concern this set cannot meet gets
	closeAfter    bool      // set by handlers: drop the connection instead of replying (retrywrite.go)

	// Snapshot reads (snapshotread.go): snapshot is set for readConcern level snapshot outside
	// a transaction; snapshotAt is the time read at (atClusterTime, or chosen by the read),
	// valid when snapshotAtSet. In a transaction, snapshotAtSet alone gives its read time.
	snapshot      bool
	snapshotAt    bson.Timestamp
	snapshotAtSet bool
}

// Arg returns the value of a top-level field of the command body.
func (c *command) Arg(key string) (any, bool) {
	for _, e := range c.Body {
		if e.Key == key {
			return e.Value, true
		}
	}
	return nil, false
}

// Target returns the command's first value as a string (a collection name), or "".
func (c *command) Target() string {
	if len(c.Body) == 0 {
		return ""
	}
	s, _ := c.Body[0].Value.(string)
	return s
}

// InTransaction reports whether the command runs inside a multi-document transaction.
func (c *command) InTransaction() bool {
	return c.TxnNumber != nil && c.Autocommit != nil && !*c.Autocommit
}

// RetryableWrite reports whether the command is a retryable write (txnNumber, no autocommit).
func (c *command) RetryableWrite() bool {
	return c.TxnNumber != nil && c.Autocommit == nil
}

// handlerFunc executes a command and returns the reply fields before ok, $clusterTime and
// operationTime, which the dispatcher appends. A *cmdError becomes an {ok:0} reply; any other
// error is reported as InternalError.
type handlerFunc func(s *Server, c *command) (bson.D, error)

// cmdKind tells the dispatcher how a command behaves while the node is not primary.
type cmdKind int

const (
	kindAdmin cmdKind = iota // always allowed (hello, ping, configureFailPoint, endSessions, ...)
	kindRead                 // fails with NotPrimaryNoSecondaryOk while stepped down
	kindWrite                // fails with NotWritablePrimary while stepped down
)

type cmdSpec struct {
	handler handlerFunc
	kind    cmdKind
}

var commandTable = map[string]cmdSpec{}

// registerCommand adds a command handler; names are matched case-sensitively, as real
// servers do, so aliases (isMaster/ismaster) are registered separately.
func registerCommand(kind cmdKind, h handlerFunc, names ...string) {
	for _, n := range names {
		if _, dup := commandTable[n]; dup {
			panic("mongosim: command registered twice: " + n)
		}
		commandTable[n] = cmdSpec{handler: h, kind: kind}
	}
}

var requestIDs atomic.Int32

func (s *Server) nextRequestID() int32 { return requestIDs.Add(1) }

// handle runs one request and returns the encoded reply document (nil for no reply), or
// closeConn when the connection must be dropped without a reply.
func (s *Server) handle(cn *conn, req *request) (reply []byte, closeConn bool) {
	if len(req.body) == 0 {
		out, _, _ := s.encodeReply(nil, errorf(codeFailedToParse, "empty command document"), nil)
		return out, false
	}
	start := time.Now()
	c := &command{Name: req.body[0].Key, Body: req.body, conn: cn, ctx: cn.ctx}
	if db, ok := c.Arg("$db"); ok {
		c.DB, _ = db.(string)
	}
	// Every path below records the command once, with the error it ended in (nil on success),
	// the code and the labels actually sent.
	var (
		outcome error
		code    int32
		labels  []string
	)
	defer func() { s.cmdLog.record(c, start, outcome, code, labels) }()
	fail := func(err error) ([]byte, bool) {
		outcome = err
		var out []byte
		out, code, labels = s.encodeReply(c, err, nil)
		return out, false
	}
	drop := func() ([]byte, bool) {
		outcome = errCloseConnection
		return nil, true
	}

	if err := parseSessionFields(c); err != nil {
		return fail(err)
	}
	switch c.Name {
	case "aggregate":
		c.ChangeStream = isChangeStreamPipeline(c)
	case "getMore":
		// Known before the handler runs, so that errors raised by the dispatcher itself (not
		// primary) get change-stream labels too.
		if id, ok := c.Body[0].Value.(int64); ok {
			c.ChangeStream = s.eng.cursorIsChangeStream(id)
		}
	}
	if !s.waitUnpaused(c.ctx) {
		return drop()
	}
	if req.legacy && c.Name != "isMaster" && c.Name != "ismaster" && c.Name != "hello" {
		return fail(errorf(codeUnsupportedOpQueryCommand,
			"Unsupported OP_QUERY command: %s. The client driver may require an upgrade.", c.Name))
	}
	spec, known := commandTable[c.Name]
	if known {
		if err := s.checkGenericArgs(c); err != nil {
			return fail(err)
		}
	}
	if isHello(c.Name) {
		// The handshake's app name is known before any fail point looks at it.
		recordAppName(c)
	}

	var wce bson.D
	if c.Name != "configureFailPoint" {
		if act := s.fp.evalFailCommand(c); act != nil {
			if act.blockFor > 0 {
				// The block is interruptible, as the server's is: maxTimeMS ends it.
				wait, expires := act.blockFor, false
				if !c.deadline.IsZero() && time.Until(c.deadline) < wait {
					wait, expires = max(time.Until(c.deadline), 0), true
				}
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-c.ctx.Done():
					t.Stop()
					return drop()
				}
				if expires {
					return fail(errMaxTimeExpired())
				}
			}
			if act.closeConn {
				return drop()
			}
			if act.err != nil {
				return fail(act.err)
			}
			wce = act.writeConcernError
		}
	}
	if !known {
		if feature, ok := unsupportedCommands[c.Name]; ok {
			return fail(unsupported("%s", feature))
		}
		return fail(errorf(codeCommandNotFound, "no such command: '%s'", c.Name))
	}
	if err := s.state.checkPrimary(spec.kind); err != nil {
		return fail(err)
	}
	if c.expired() {
		return fail(errMaxTimeExpired())
	}
	fields, err := spec.handler(s, c)
	if errors.Is(err, errCloseConnection) || (err == nil && c.closeAfter) {
		return drop()
	}
	if err != nil {
		return fail(err)
	}
	if wce == nil && spec.kind == kindWrite && c.unsatisfiedWC != nil && !hasKey(fields, "writeConcernError") {
		wce = c.unsatisfiedWC
	}
	if wce != nil {
		fields = append(fields, bson.E{Key: "writeConcernError", Value: wce})
		// A real server labels a reply by its writeConcernError code too; driver v2 retries a
		// write-concern error only when the label is there.
		if v, ok := lookupD(wce, "code"); ok && !hasKey(fields, "errorLabels") {
			if n, ok := asInt64(v); ok {
				if ls := writeConcernLabels(c, int32(n)); len(ls) > 0 {
					fields = append(fields, bson.E{Key: "errorLabels", Value: ls})
					labels = ls
				}
			}
		}
	}
	out, _, _ := s.encodeReply(c, nil, fields)
	return out, false
}

// isChangeStreamPipeline reports whether an aggregate's first stage is $changeStream.
func isChangeStreamPipeline(c *command) bool {
	p, _ := c.Arg("pipeline")
	arr, _ := p.(bson.A)
	if len(arr) == 0 {
		return false
	}
	st, _ := arr[0].(bson.D)
	return len(st) > 0 && st[0].Key == "$changeStream"
}

// errCloseConnection asks the dispatcher to drop the connection without replying.
var errCloseConnection = errors.New("close connection")

func parseSessionFields(c *command) *cmdError {
	if v, ok := c.Arg("lsid"); ok {
		d, ok := v.(bson.D)
		if !ok {
			return errorf(codeTypeMismatch, "BSON field 'lsid' is the wrong type '%s', expected type 'object'", typeName(v))
		}
		for _, e := range d {
			if e.Key == "id" {
				b, ok := e.Value.(bson.Binary)
				if !ok || b.Subtype != 4 || len(b.Data) != 16 {
					return errorf(codeTypeMismatch, "BSON field 'lsid.id' must be a UUID (binary subtype 4)")
				}
				c.LSID = &b
			}
		}
		if c.LSID == nil {
			return errorf(codeFailedToParse, "BSON field 'lsid.id' is missing but a required field")
		}
	}
	if v, ok := c.Arg("txnNumber"); ok {
		n, ok := v.(int64)
		if !ok {
			return errorf(codeTypeMismatch, "BSON field 'txnNumber' is the wrong type '%s', expected type 'long'", typeName(v))
		}
		if c.LSID == nil {
			return errorf(codeInvalidOptions, "Transaction number requires a session ID to also be specified")
		}
		c.TxnNumber = &n
	}
	if v, ok := c.Arg("autocommit"); ok {
		b, ok := v.(bool)
		if !ok {
			return errorf(codeTypeMismatch, "BSON field 'autocommit' is the wrong type '%s', expected type 'bool'", typeName(v))
		}
		if b {
			return errorf(codeInvalidOptions, "autocommit must be false")
		}
		c.Autocommit = &b
	}
	if v, ok := c.Arg("startTransaction"); ok {
		b, _ := v.(bool)
		if !b {
			return errorf(codeInvalidOptions, "startTransaction must be true")
		}
		c.StartTxn = true
	}
	return nil
}

// encodeReply appends ok, the error fields and the cluster time to fields, and encodes it. For an
// error it also returns the code and the labels it sent.
func (s *Server) encodeReply(c *command, err error, fields bson.D) (out []byte, code int32, labels []string) {
	ct := s.eng.clock.last()
	var doc bson.D
	if err != nil {
		var ce *cmdError
		if !errors.As(err, &ce) {
			ce = &cmdError{Code: codeInternalError, Msg: err.Error()}
		}
		doc = bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: ce.Msg},
			{Key: "code", Value: ce.Code}, {Key: "codeName", Value: codeName(ce.Code)}}
		doc = append(doc, ce.Extra...)
		code = ce.Code
		labels = ce.Labels
		if labels == nil && c != nil {
			labels = computeLabels(c, ce.Code)
		}
		if len(labels) > 0 {
			doc = append(doc, bson.E{Key: "errorLabels", Value: labels})
		}
		if tv, ok := s.state.topologyVersionFor(ce.Code, s.isClosing()); ok {
			doc = append(doc, bson.E{Key: "topologyVersion", Value: tv})
		}
	} else {
		doc = append(fields, bson.E{Key: "ok", Value: 1.0})
	}
	doc = append(doc,
		bson.E{Key: "$clusterTime", Value: bson.D{
			{Key: "clusterTime", Value: ct},
			{Key: "signature", Value: bson.D{
				{Key: "hash", Value: bson.Binary{Subtype: 0, Data: make([]byte, 20)}},
				{Key: "keyId", Value: int64(0)},
			}},
		}},
		bson.E{Key: "operationTime", Value: ct},
	)
	out, merr := bson.Marshal(doc)
	if merr != nil {
		out, _ = bson.Marshal(bson.D{{Key: "ok", Value: 0.0},
			{Key: "errmsg", Value: fmt.Sprintf("mongosim: cannot encode reply: %v", merr)},
			{Key: "code", Value: int32(codeInternalError)}, {Key: "codeName", Value: "InternalError"}})
		code, labels = codeInternalError, nil
	}
	return out, code, labels
}

// Codes on which a retryable write or a change stream may be retried
// (retryable-writes spec, "Determining Retryable Write Errors").
var retriableCodes = []int32{6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436}

// Extra codes that make a change-stream error resumable.
var resumableCSCodes = []int32{63, 150, 13388, 234, 133}

// transientTxnCodes are the codes a server labels TransientTransactionError on any statement of
// a transaction, commitTransaction and abortTransaction included: write conflicts, lock
// timeouts, a prepared transaction in the way, the snapshot errors (SnapshotTooOld 239,
// SnapshotUnavailable 246) and the shard-retargeting ones (63, 150, 13388).
var transientTxnCodes = []int32{codeWriteConflict, codeLockTimeout, 267, 239, 246, 63, 150, 13388}

// computeLabels applies the server's label rules to a command error the simulator raised on
// its own (fail points with errorLabels bypass this):
//   - TransientTransactionError on a statement of a transaction (txnNumber and autocommit) for
//     the transient codes; on other statements also for the retriable codes and
//     NoSuchTransaction; on commitTransaction/abortTransaction for NoSuchTransaction only
//     without a write-concern error;
//   - RetryableWriteError on a retryable write, commitTransaction or abortTransaction for the
//     retriable codes;
//   - the change-stream labels on the aggregate and getMores of a change stream.
func computeLabels(c *command, code int32) []string {
	var labels []string
	retriable := slices.Contains(retriableCodes, code)
	isTxnEnd := c.Name == "commitTransaction" || c.Name == "abortTransaction"
	inTxn := c.TxnNumber != nil && (c.Autocommit != nil || isTxnEnd)
	if inTxn {
		transient := slices.Contains(transientTxnCodes, code)
		if isTxnEnd {
			transient = transient || code == codeNoSuchTransaction
		} else {
			transient = transient || retriable || code == codeNoSuchTransaction
		}
		if transient {
			labels = append(labels, "TransientTransactionError")
		}
	}
	if c.TxnNumber != nil && (c.Autocommit == nil || isTxnEnd) && retriable {
		labels = append(labels, "RetryableWriteError")
	}
	if c.ChangeStream {
		switch {
		case retriable || slices.Contains(resumableCSCodes, code):
			labels = append(labels, "ResumableChangeStreamError")
		case code == codeChangeStreamFatalError || code == codeChangeStreamHistoryLost:
			labels = append(labels, "NonResumableChangeStreamError")
		}
	}
	return labels
}

// writeConcernLabels returns the labels of a reply whose command succeeded but whose write
// concern failed with wcCode: RetryableWriteError for a retryable write, commitTransaction or
// abortTransaction when wcCode is retriable. A server never adds TransientTransactionError to
// a write-concern error: the command's own outcome is known.
func writeConcernLabels(c *command, wcCode int32) []string {
	isTxnEnd := c.Name == "commitTransaction" || c.Name == "abortTransaction"
	if c.TxnNumber != nil && (c.Autocommit == nil || isTxnEnd) && slices.Contains(retriableCodes, wcCode) {
		return []string{"RetryableWriteError"}
	}
	return nil
}

// typeName returns the BSON type alias of a decoded value, as server messages spell it.
func typeName(v any) string { return query.TypeName(v) }
