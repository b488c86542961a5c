package mongosim

import (
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Codes of the generic command arguments.
const (
	codeUnknownReplWriteConcern   = 79
	codeUnsatisfiableWriteConcern = 100
	codeAPIVersionError           = 322
	codeAPIStrictError            = 323
	codeAPIStrictWithoutVersion   = 4886600
)

// apiV1Commands are the commands of Stable API version 1 (the server's list for 8.0); with
// apiStrict: true any other command fails with APIStrictError (323).
var apiV1Commands = []string{
	"abortTransaction", "aggregate", "authenticate", "bulkWrite", "collMod", "commitTransaction",
	"count", "create", "createIndexes", "delete", "drop", "dropDatabase", "dropIndexes",
	"endSessions", "explain", "find", "findAndModify", "getMore", "hello", "insert",
	"killCursors", "listCollections", "listDatabases", "listIndexes", "ping", "refreshSessions",
	"update",
}

// checkGenericArgs validates the arguments every command may carry — apiVersion/apiStrict,
// readConcern, writeConcern and maxTimeMS — as a server does before running the command. It
// sets c.deadline (maxTimeMS) and c.unsatisfiedWC (a write concern a one-member set cannot
// meet, reported as a writeConcernError once the write is applied, as a server reports it).
func (s *Server) checkGenericArgs(c *command) *cmdError {
	// Most commands carry none of these: one pass over the body decides.
	present := false
	for _, f := range c.Body {
		switch f.Key {
		case "apiVersion", "apiStrict", "apiDeprecationErrors", "readConcern", "writeConcern", "maxTimeMS":
			present = true
		}
	}
	if !present {
		return nil
	}
	if err := checkAPIArgs(c); err != nil {
		return err
	}
	if err := checkReadConcernArg(c); err != nil {
		return err
	}
	if err := s.checkWriteConcernArg(c); err != nil {
		return err
	}
	if c.Name == "getMore" || c.Name == "hello" || c.Name == "isMaster" || c.Name == "ismaster" {
		// getMore's maxTimeMS is the await time of a tailable cursor (cursor.go); hello has
		// maxAwaitTimeMS of its own.
		return nil
	}
	if v, ok := c.Arg("maxTimeMS"); ok && v != nil {
		ms, ok := asInt64(v)
		if !ok {
			return errorf(codeBadValue, "maxTimeMS must be a number")
		}
		if ms < 0 {
			return errorf(codeBadValue, "%d value for maxTimeMS is out of range [0, 2147483647]", ms)
		}
		if ms > 0 {
			// From when the command is taken up (after a Pause, as a frozen server reads the
			// request only once it runs again).
			c.deadline = time.Now().Add(time.Duration(ms) * time.Millisecond)
		}
	}
	return nil
}

// errMaxTimeExpired is the server's answer to an operation that ran past its maxTimeMS.
func errMaxTimeExpired() *cmdError {
	return errorf(codeMaxTimeMSExpired, "operation exceeded time limit")
}

// expired reports whether the command's maxTimeMS has passed.
func (c *command) expired() bool {
	return !c.deadline.IsZero() && !time.Now().Before(c.deadline)
}

func checkAPIArgs(c *command) *cmdError {
	ver, hasVer := c.Arg("apiVersion")
	strict, hasStrict := c.Arg("apiStrict")
	_, hasDep := c.Arg("apiDeprecationErrors")
	if !hasVer {
		if hasStrict || hasDep {
			return errorf(codeAPIStrictWithoutVersion, "Provided apiStrict and/or apiDeprecationErrors without passing apiVersion")
		}
		return nil
	}
	if vs, ok := ver.(string); !ok || vs != "1" {
		return errorf(codeAPIVersionError, "API version must be \"1\"")
	}
	if b, _ := strict.(bool); b && !slices.Contains(apiV1Commands, c.Name) {
		if _, known := commandTable[c.Name]; known {
			return errorf(codeAPIStrictError, "Provided apiStrict:true, but the command %s is not in API Version 1. Information on supported commands and migrations in API Version 1 can be found at https://www.mongodb.com/docs/manual/reference/stable-api/", c.Name)
		}
	} else if b {
		return checkAPIStrictStages(c) // apistrict.go
	}
	return nil
}

// checkReadConcernArg validates readConcern. Level snapshot is accepted in transactions and,
// outside them, on find, aggregate and distinct (snapshotread.go), with an optional
// atClusterTime; count refuses it, and any other command (writes included) too, as a server
// does.
func checkReadConcernArg(c *command) *cmdError {
	v, ok := c.Arg("readConcern")
	if !ok {
		return nil
	}
	rc, ok := v.(bson.D)
	if !ok {
		return errorf(codeTypeMismatch, "BSON field 'readConcern' is the wrong type '%s', expected type 'object'", typeName(v))
	}
	if c.InTransaction() && !c.StartTxn && len(rc) > 0 {
		return errorf(codeInvalidOptions, "Only the first command in a transaction may specify a readConcern")
	}
	level, _ := lookupD(rc, "level")
	if _, ok := lookupD(rc, "atClusterTime"); ok && level != "snapshot" {
		return errorf(codeInvalidOptions, "readConcern level must be 'snapshot' to specify atClusterTime")
	}
	switch level {
	case nil, "local", "majority", "linearizable", "available":
		return nil
	case "snapshot":
		at, hasAt, err := readConcernAt(rc)
		if err != nil {
			return err
		}
		if c.InTransaction() {
			c.snapshotAt, c.snapshotAtSet = at, hasAt // the transaction's read time (txn.go)
			return nil
		}
		switch c.Name {
		case "find", "aggregate", "distinct":
			c.snapshot, c.snapshotAt, c.snapshotAtSet = true, at, hasAt
			return nil
		case "count":
			return errorf(codeInvalidOptions, "read concern snapshot not supported")
		}
		return errorf(codeInvalidOptions, "Command %s does not support { readConcern: { level: \"snapshot\" } }", c.Name)
	default:
		return errorf(codeFailedToParse, "BSON field 'readConcern.level' has an invalid value '%v'", level)
	}
}

// checkWriteConcernArg validates writeConcern. w greater than the one member, or a tag set the
// replica-set configuration does not define, cannot be satisfied: the write is applied and the
// reply carries a writeConcernError (100 or 79), as on a server.
func (s *Server) checkWriteConcernArg(c *command) *cmdError {
	v, ok := c.Arg("writeConcern")
	if !ok || v == nil {
		return nil
	}
	wc, ok := v.(bson.D)
	if !ok {
		return errorf(codeTypeMismatch, "BSON field 'writeConcern' is the wrong type '%s', expected type 'object'", typeName(v))
	}
	isTxnEnd := c.Name == "commitTransaction" || c.Name == "abortTransaction"
	if c.InTransaction() && !isTxnEnd && len(wc) > 0 {
		return errorf(codeInvalidOptions, "Cannot set write concern after starting a transaction.")
	}
	w, ok := lookupD(wc, "w")
	if !ok {
		return nil
	}
	switch x := w.(type) {
	case string:
		if x != "majority" {
			c.unsatisfiedWC = bson.D{{Key: "code", Value: int32(codeUnknownReplWriteConcern)},
				{Key: "codeName", Value: codeName(codeUnknownReplWriteConcern)},
				{Key: "errmsg", Value: "No write concern mode named '" + x + "' found in replica set configuration"}}
		}
	default:
		n, ok := asInt64(w)
		if !ok {
			return errorf(codeFailedToParse, "w has to be a number or string; found: %s", typeName(w))
		}
		if n < 0 {
			return errorf(codeFailedToParse, "w has to be a non-negative number and not greater than 50; found: %d", n)
		}
		if n > 50 {
			return errorf(codeFailedToParse, "w has to be a non-negative number and not greater than 50; found: %d", n)
		}
		if n > 1 {
			c.unsatisfiedWC = bson.D{{Key: "code", Value: int32(codeUnsatisfiableWriteConcern)},
				{Key: "codeName", Value: codeName(codeUnsatisfiableWriteConcern)},
				{Key: "errmsg", Value: "Not enough data-bearing nodes"}}
		}
	}
	return nil
}
