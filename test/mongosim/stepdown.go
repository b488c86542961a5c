package mongosim

import (
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func init() {
	registerCommand(kindAdmin, cmdReplSetStepDown, "replSetStepDown")
}

// cmdReplSetStepDown is replSetStepDown: {replSetStepDown: <seconds>} on admin steps the single
// member down for that many seconds (Server.StepDown), after which it is re-elected. A real
// one-member set refuses without force, having no electable secondary; the simulator steps down
// either way (force and secondaryCatchUpPeriodSecs are accepted and ignored), so that a client
// outside the process (a chaos test) can cause the election that Server.StepDown causes.
func cmdReplSetStepDown(s *Server, c *command) (bson.D, error) {
	if c.DB != "admin" {
		return nil, errorf(codeUnauthorized, "replSetStepDown may only be run against the admin database.")
	}
	secs, ok := asFloat(c.Body[0].Value)
	if !ok || secs <= 0 || secs > 1e6 || math.IsNaN(secs) {
		return nil, errorf(codeBadValue, "replSetStepDown: stepDownSecs must be a positive number of seconds, got %v", c.Body[0].Value)
	}
	if primary, _ := s.state.roleInfo(); !primary {
		return nil, errorf(codeNotWritablePrimary, "not primary so can't step down")
	}
	if err := s.StepDown(time.Duration(secs * float64(time.Second))); err != nil {
		return nil, errorf(codeShutdownInProgress, "%v", err)
	}
	return bson.D{}, nil
}

// asFloat reads a BSON number as a float64.
func asFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	}
	return 0, false
}
