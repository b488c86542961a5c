package mongosim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func init() {
	registerCommand(kindAdmin, cmdConfigureFailPoint, "configureFailPoint")
}

// Fail point names accepted by configureFailPoint.
const (
	fpFailCommand              = "failCommand"
	fpFailGetMoreAfterCheckout = "failGetMoreAfterCursorCheckout"
	// fpOnPrimaryTransactionalWrite fires at the commit of each statement of a retryable write
	// that wrote a document (retrywrite.go): it closes the connection (closeConnection, the
	// default) and, with failBeforeCommitExceptionCode, fails the statement with that code
	// and rolls it back.
	fpOnPrimaryTransactionalWrite = "onPrimaryTransactionalWrite"
)

// failPoints holds the configured fail points (the server's test-only fault injection).
type failPoints struct {
	mu     sync.Mutex
	points map[string]*failPoint
	// txnWriteSet is true while onPrimaryTransactionalWrite is configured (written under mu).
	txnWriteSet atomic.Bool
}

type failPoint struct {
	// mode
	alwaysOn bool
	times    int64   // remaining activations when > 0 (mode {times: n})
	skip     int64   // activations still to skip (mode {skip: n})
	prob     float64 // mode {activationProbability: p}
	entered  int32   // activations so far, reported as count

	// data
	commands    []string
	allCommands bool
	errorCode   *int32
	errorLabels []string
	hasLabels   bool
	closeConn   bool
	block       time.Duration
	appName     string
	namespace   string
	wce         bson.D

	// onPrimaryTransactionalWrite
	failBeforeCommit *int32
}

// failAction is what an activated fail point does to one command.
type failAction struct {
	blockFor          time.Duration
	closeConn         bool
	err               *cmdError
	writeConcernError bson.D
}

func cmdConfigureFailPoint(s *Server, c *command) (bson.D, error) {
	if c.DB != "admin" {
		return nil, errorf(codeUnauthorized, "configureFailPoint may only be run against the admin database.")
	}
	count, err := s.fp.configure(c.Body)
	if err != nil {
		return nil, err
	}
	return bson.D{{Key: "count", Value: count}}, nil
}

const codeUnauthorized = 13

// ConfigureFailPoint applies a configureFailPoint command document from Go, exactly as the
// wire command would, for example:
//
//	srv.ConfigureFailPoint(bson.D{{"configureFailPoint", "failCommand"},
//		{"mode", bson.D{{"times", 1}}},
//		{"data", bson.D{{"failCommands", bson.A{"getMore"}}, {"closeConnection", true}}}})
func (s *Server) ConfigureFailPoint(cmd bson.D) error {
	raw, err := bson.Marshal(cmd)
	if err != nil {
		return fmt.Errorf("mongosim: encode fail point: %w", err)
	}
	d, err := decodeDoc(raw) // normalise Go types (int, bson.M) to their decoded BSON forms
	if err != nil {
		return err
	}
	if _, cerr := s.fp.configure(d); cerr != nil {
		return cerr
	}
	return nil
}

func (f *failPoints) configure(body bson.D) (int32, *cmdError) {
	name, _ := body[0].Value.(string)
	if name != fpFailCommand && name != fpFailGetMoreAfterCheckout && name != fpOnPrimaryTransactionalWrite {
		return 0, errorf(codeBadValue, "Cannot find failpoint with name %s", name)
	}
	fp := &failPoint{closeConn: name == fpOnPrimaryTransactionalWrite} // its default
	modeV, ok := lookupD(body, "mode")
	if !ok {
		return 0, errorf(codeBadValue, "Missing mode")
	}
	off := false
	switch m := modeV.(type) {
	case string:
		switch m {
		case "alwaysOn":
			fp.alwaysOn = true
		case "off":
			off = true
		default:
			return 0, errorf(codeBadValue, "unknown mode: %s", m)
		}
	case bson.D:
		// A server reads the mode document field by field: {times: n, skip: m} skips m
		// activations and then fires n times; activationProbability may join either.
		if len(m) == 0 {
			return 0, errorf(codeBadValue, "mode object must have one of 'times', 'skip' or 'activationProbability'")
		}
		hasTimes := false
		for _, el := range m {
			switch el.Key {
			case "times":
				n, ok := asInt64(el.Value)
				if !ok || n < 0 {
					return 0, errorf(codeBadValue, "mode.times must be a non-negative integer")
				}
				fp.times, hasTimes = n, true
			case "skip":
				n, ok := asInt64(el.Value)
				if !ok || n < 0 {
					return 0, errorf(codeBadValue, "mode.skip must be a non-negative integer")
				}
				fp.skip = n
			case "activationProbability":
				p, ok := el.Value.(float64)
				if !ok || p < 0 || p > 1 {
					return 0, errorf(codeBadValue, "mode.activationProbability must be a double in [0, 1]")
				}
				fp.prob = p
			default:
				return 0, errorf(codeBadValue, "unknown mode field: %s", el.Key)
			}
		}
		switch {
		case hasTimes && fp.times == 0:
			off = true
		case !hasTimes && fp.prob == 0:
			fp.alwaysOn = true // {skip: n} alone: skip n, then always on
		}
	default:
		return 0, errorf(codeTypeMismatch, "mode must be a string or an object")
	}
	if dataV, ok := lookupD(body, "data"); ok && !off {
		data, ok := dataV.(bson.D)
		if !ok {
			return 0, errorf(codeTypeMismatch, "data must be an object")
		}
		if err := fp.parseData(name, data); err != nil {
			return 0, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.points == nil {
		f.points = make(map[string]*failPoint)
	}
	var prev int32
	if old := f.points[name]; old != nil {
		prev = old.entered
	}
	if off {
		delete(f.points, name)
	} else {
		f.points[name] = fp
	}
	_, set := f.points[fpOnPrimaryTransactionalWrite]
	f.txnWriteSet.Store(set)
	return prev, nil
}

func (fp *failPoint) parseData(name string, data bson.D) *cmdError {
	if name == fpOnPrimaryTransactionalWrite {
		for _, e := range data {
			switch e.Key {
			case "closeConnection":
				b, ok := e.Value.(bool)
				if !ok {
					return errorf(codeTypeMismatch, "data.closeConnection must be a boolean")
				}
				fp.closeConn = b
			case "failBeforeCommitExceptionCode":
				n, ok := asInt64(e.Value)
				if !ok {
					return errorf(codeTypeMismatch, "data.failBeforeCommitExceptionCode must be an integer")
				}
				code := int32(n)
				fp.failBeforeCommit = &code
			default:
				return errorf(codeBadValue, "unknown onPrimaryTransactionalWrite data field: %s", e.Key)
			}
		}
		return nil
	}
	for _, e := range data {
		switch e.Key {
		case "failCommands":
			arr, ok := e.Value.(bson.A)
			if !ok {
				return errorf(codeTypeMismatch, "data.failCommands must be an array of strings")
			}
			for _, v := range arr {
				s, ok := v.(string)
				if !ok {
					return errorf(codeTypeMismatch, "data.failCommands must be an array of strings")
				}
				fp.commands = append(fp.commands, s)
			}
		case "failAllCommands":
			fp.allCommands, _ = e.Value.(bool)
		case "errorCode":
			n, ok := asInt64(e.Value)
			if !ok {
				return errorf(codeTypeMismatch, "data.errorCode must be an integer")
			}
			code := int32(n)
			fp.errorCode = &code
		case "errorLabels":
			arr, ok := e.Value.(bson.A)
			if !ok {
				return errorf(codeTypeMismatch, "data.errorLabels must be an array of strings")
			}
			fp.hasLabels = true
			fp.errorLabels = []string{}
			for _, v := range arr {
				s, ok := v.(string)
				if !ok {
					return errorf(codeTypeMismatch, "data.errorLabels must be an array of strings")
				}
				fp.errorLabels = append(fp.errorLabels, s)
			}
		case "closeConnection":
			fp.closeConn, _ = e.Value.(bool)
		case "blockConnection":
			if b, _ := e.Value.(bool); b {
				fp.block = -1 // needs blockTimeMS
			}
		case "blockTimeMS":
			n, ok := asInt64(e.Value)
			if !ok || n < 0 {
				return errorf(codeBadValue, "data.blockTimeMS must be a non-negative integer")
			}
			if fp.block != 0 || hasKey(data, "blockConnection") {
				fp.block = time.Duration(n) * time.Millisecond
			}
		case "appName":
			fp.appName, _ = e.Value.(string)
		case "namespace":
			fp.namespace, _ = e.Value.(string)
		case "writeConcernError":
			d, ok := e.Value.(bson.D)
			if !ok {
				return errorf(codeTypeMismatch, "data.writeConcernError must be an object")
			}
			fp.wce = d
		case "threadName", "failInternalCommands", "errorExtraInfo", "failLocalClients", "tassert":
			// Server-internal switches; accepted and ignored as they do not apply to a simulator.
		default:
			return errorf(codeBadValue, "unknown failCommand data field: %s", e.Key)
		}
	}
	if fp.block < 0 {
		return errorf(codeBadValue, "data.blockTimeMS is required when blockConnection is true")
	}
	if name == fpFailCommand && len(fp.commands) == 0 && !fp.allCommands {
		return errorf(codeBadValue, "data.failCommands is required")
	}
	return nil
}

// isHello reports whether name is the handshake/monitoring command.
func isHello(name string) bool { return name == "hello" || name == "isMaster" || name == "ismaster" }

// recordAppName stores the handshake's client.application.name on the connection before the
// fail points are evaluated, so that a failCommand filtered by appName matches the handshake
// itself and every command after it.
func recordAppName(c *command) {
	cl, _ := c.Arg("client")
	d, _ := cl.(bson.D)
	app, _ := lookupD(d, "application")
	ad, _ := app.(bson.D)
	if name, ok := lookupD(ad, "name"); ok {
		if s, ok := name.(string); ok {
			c.conn.setAppName(s)
		}
	}
}

func hasKey(d bson.D, key string) bool {
	_, ok := lookupD(d, key)
	return ok
}

// activate consumes one activation if the fail point's mode allows it.
func (fp *failPoint) activate() bool {
	switch {
	case fp.skip > 0:
		fp.skip--
		return false
	case fp.alwaysOn:
	case fp.times > 0:
		fp.times--
	case fp.prob > 0:
		if rand.Float64() >= fp.prob {
			return false
		}
	default:
		return false
	}
	fp.entered++
	return true
}

func (fp *failPoint) exhausted() bool {
	return !fp.alwaysOn && fp.times == 0 && fp.prob == 0
}

// evalFailCommand returns what the failCommand fail point does to c, or nil.
func (f *failPoints) evalFailCommand(c *command) *failAction {
	f.mu.Lock()
	defer f.mu.Unlock()
	fp := f.points[fpFailCommand]
	if fp == nil {
		return nil
	}
	if !fp.allCommands && !slices.Contains(fp.commands, c.Name) {
		return nil
	}
	if fp.appName != "" && c.conn.application() != fp.appName {
		return nil
	}
	if fp.namespace != "" && c.DB+"."+c.Target() != fp.namespace {
		return nil
	}
	if fp.errorCode == nil && !fp.closeConn && fp.block == 0 && fp.wce == nil {
		return nil
	}
	if !fp.activate() {
		return nil
	}
	if fp.exhausted() {
		delete(f.points, fpFailCommand)
	}
	act := &failAction{blockFor: fp.block, closeConn: fp.closeConn, writeConcernError: fp.wce}
	if fp.errorCode != nil {
		act.err = &cmdError{Code: *fp.errorCode, Msg: "Failing command via 'failCommand' failpoint"}
		if fp.hasLabels {
			act.err.Labels = fp.errorLabels
		} else if c.Name == "getMore" {
			// The fail point fires before the cursor is checked out, so the server cannot know
			// the getMore belongs to a change stream (SERVER-46091): compute labels without it.
			act.err.Labels = computeLabels(&command{Name: c.Name, TxnNumber: c.TxnNumber, Autocommit: c.Autocommit}, *fp.errorCode)
			if act.err.Labels == nil {
				act.err.Labels = []string{} // computed: none (nil would mean "compute from c")
			}
		}
	}
	return act
}

// evalGetMoreAfterCheckout returns the error the failGetMoreAfterCursorCheckout fail point
// injects into a getMore whose cursor was found, or nil. Labels are computed normally.
func (f *failPoints) evalGetMoreAfterCheckout() (err *cmdError, closeConn bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fp := f.points[fpFailGetMoreAfterCheckout]
	if fp == nil || !fp.activate() {
		return nil, false
	}
	if fp.exhausted() {
		delete(f.points, fpFailGetMoreAfterCheckout)
	}
	if fp.closeConn {
		return nil, true
	}
	if fp.errorCode == nil {
		return nil, false
	}
	e := &cmdError{Code: *fp.errorCode, Msg: "Failing command via 'failGetMoreAfterCursorCheckout' failpoint"}
	if fp.hasLabels {
		e.Labels = fp.errorLabels
	}
	return e, false
}

// evalTransactionalWrite returns what the onPrimaryTransactionalWrite fail point does to one
// statement of a retryable write that wrote a document (retrywrite.go): fail it before it
// commits (err, with failBeforeCommitExceptionCode) and/or close the connection (closeConn,
// the default). A failed statement is rolled back; a closed connection still gets a
// committed statement without failBeforeCommitExceptionCode.
func (f *failPoints) evalTransactionalWrite() (err *cmdError, closeConn bool) {
	if !f.txnWriteSet.Load() {
		return nil, false // the common case: no lock taken per write
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fp := f.points[fpOnPrimaryTransactionalWrite]
	if fp == nil || !fp.activate() {
		return nil, false
	}
	if fp.exhausted() {
		delete(f.points, fpOnPrimaryTransactionalWrite)
		f.txnWriteSet.Store(false)
	}
	if fp.failBeforeCommit != nil {
		err = &cmdError{Code: *fp.failBeforeCommit, Msg: "Failing write due to failpoint. The write must not be reflected."}
	}
	return err, fp.closeConn
}
