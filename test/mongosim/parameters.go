package mongosim

import (
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func init() {
	registerCommand(kindAdmin, cmdGetParameter, "getParameter")
}

// serverParameter is one parameter getParameter reports, with the value this server runs with.
type serverParameter struct {
	value              func(s *Server) any
	runtime, atStartup bool // settableAtRuntime / settableAtStartup, for showDetails
}

// serverParameters are the parameters mongosim has, by name. Each value is the one the
// simulator actually behaves by (its options, its wire version), never a placeholder.
var serverParameters = map[string]serverParameter{
	"featureCompatibilityVersion": {value: func(s *Server) any {
		return bson.D{{Key: "version", Value: map[int]string{21: "7.0", 25: "8.0"}[s.opts.WireVersion]}}
	}},
	// configureFailPoint and the other test commands are always available.
	"enableTestCommands": {value: func(*Server) any { return true }, atStartup: true},
	// The Stable API is not required: commands without apiVersion are accepted.
	"requireApiVersion": {value: func(*Server) any { return false }, runtime: true, atStartup: true},
	// No authentication at all: no mechanism is offered.
	"authenticationMechanisms": {value: func(*Server) any { return bson.A{} }, atStartup: true},
	"transactionLifetimeLimitSeconds": {value: func(s *Server) any {
		return int32(s.opts.TransactionLifetimeLimit.Seconds())
	}, runtime: true, atStartup: true},
	"cursorTimeoutMillis":               {value: func(s *Server) any { return s.opts.CursorTimeout.Milliseconds() }, runtime: true, atStartup: true},
	"localLogicalSessionTimeoutMinutes": {value: func(*Server) any { return int32(30) }, atStartup: true},
	"ttlMonitorEnabled":                 {value: func(*Server) any { return true }, runtime: true, atStartup: true},
	"ttlMonitorSleepSecs": {value: func(s *Server) any {
		return int32(s.opts.TTLMonitorInterval.Seconds())
	}, atStartup: true},
	"notablescan": {value: func(*Server) any { return false }, runtime: true, atStartup: true},
	"quiet":       {value: func(*Server) any { return false }, runtime: true, atStartup: true},
	"logLevel":    {value: func(*Server) any { return int32(0) }, runtime: true, atStartup: true},
}

// getParameter's own fields, which are not parameter names.
var getParameterArgs = map[string]bool{"getParameter": true, "comment": true, "$db": true,
	"lsid": true, "$clusterTime": true, "$readPreference": true, "apiVersion": true,
	"apiStrict": true, "apiDeprecationErrors": true, "maxTimeMS": true,
	"readConcern": true, "writeConcern": true, "txnNumber": true, "autocommit": true}

// cmdGetParameter answers each named parameter with its value; getParameter: "*" (or
// {allParameters: true}) answers all of them, and {showDetails: true} adds whether each is
// settable. Names it does not know are skipped, as a real server does; when none is left it
// fails with InvalidOptions (72) "no option found to get".
func cmdGetParameter(s *Server, c *command) (bson.D, error) {
	if c.DB != "admin" {
		return nil, errorf(codeUnauthorized, "getParameter may only be run against the admin database.")
	}
	all, details := false, false
	switch v := c.Body[0].Value.(type) {
	case string:
		all = v == "*"
	case bson.D:
		for _, e := range v {
			switch e.Key {
			case "allParameters":
				all, _ = e.Value.(bool)
			case "showDetails":
				details, _ = e.Value.(bool)
			default:
				return nil, errorf(40415, "BSON field 'getParameter.%s' is an unknown field.", e.Key)
			}
		}
	}
	var names []string
	if all {
		for name := range serverParameters {
			names = append(names, name)
		}
		sort.Strings(names)
	} else {
		for _, e := range c.Body[1:] {
			if _, ok := serverParameters[e.Key]; ok && !getParameterArgs[e.Key] {
				names = append(names, e.Key)
			}
		}
	}
	if len(names) == 0 {
		return nil, errorf(codeInvalidOptions, "no option found to get")
	}
	out := make(bson.D, 0, len(names))
	for _, name := range names {
		p := serverParameters[name]
		var v any = p.value(s)
		if details {
			v = bson.D{{Key: "value", Value: v}, {Key: "settableAtRuntime", Value: p.runtime},
				{Key: "settableAtStartup", Value: p.atStartup}}
		}
		out = append(out, bson.E{Key: name, Value: v})
	}
	return out, nil
}
