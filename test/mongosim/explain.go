package mongosim

import (
	"fmt"
	"math"
	"net"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/test/mongosim/internal/query"
)

func init() {
	registerCommand(kindRead, cmdExplain, "explain")
}

// explain describes how mongosim runs a find, aggregate, count or distinct, in a server's
// explain shapes (explainVersion "1"): the queryPlanner's winning plan is the plan mongosim
// really executes, a collection scan (COLLSCAN, with the filter) or, for an equality on _id,
// the _id index lookup (EXPRESS_IXSCAN on 8.0, IDHACK on 7.0), under SORT, SKIP, LIMIT and
// PROJECTION stages as the command asks; there are never rejected plans, since mongosim has no
// planner. The executionStats and allPlansExecution verbosities run the command and report the
// documents returned and examined. Explain of writes (update, delete, findAndModify) is
// refused as not supported.

var explainVerbosities = map[string]bool{"queryPlanner": true, "executionStats": true, "allPlansExecution": true}

func cmdExplain(s *Server, c *command) (bson.D, error) {
	inner, ok := c.Body[0].Value.(bson.D)
	if !ok || len(inner) == 0 {
		return nil, errorf(codeFailedToParse, "explain command requires a nested object")
	}
	verbosity := "allPlansExecution"
	if v, ok := c.Arg("verbosity"); ok {
		str, _ := v.(string)
		if !explainVerbosities[str] {
			return nil, errorf(codeBadValue, "verbosity string must be one of {'queryPlanner', 'executionStats', 'allPlansExecution'}")
		}
		verbosity = str
	}
	switch inner[0].Key {
	case "find", "aggregate", "count", "distinct":
	default:
		return nil, unsupported("explain of %s", inner[0].Key)
	}
	body := append(bson.D{}, inner...)
	if _, ok := lookupD(body, "$db"); !ok {
		body = append(body, bson.E{Key: "$db", Value: c.DB})
	}
	ic := *c
	ic.Name, ic.Body = inner[0].Key, body
	return s.explain(&ic, verbosity)
}

// aggregateExplainVerbosity reads an aggregate's explain option: false, true (queryPlanner)
// or a verbosity string.
func aggregateExplainVerbosity(c *command) (string, bool, error) {
	v, ok := c.Arg("explain")
	if !ok {
		return "", false, nil
	}
	switch x := v.(type) {
	case bool:
		return "queryPlanner", x, nil
	case string:
		if explainVerbosities[x] {
			return x, true, nil
		}
	}
	return "", false, errorf(codeTypeMismatch, "BSON field 'aggregate.explain' is the wrong type '%s', expected type 'bool'", typeName(v))
}

// explain builds the explain reply of c (a find, aggregate, count or distinct).
func (s *Server) explain(c *command, verbosity string) (bson.D, error) {
	target, _ := c.Body[0].Value.(string)
	if target == "" {
		return nil, unsupported("explain of a database-level %s", c.Name)
	}
	ns := c.DB + "." + target
	argDoc := func(name string) bson.D { v, _ := c.Arg(name); d, _ := v.(bson.D); return d }
	argInt := func(name string) int64 { v, _ := c.Arg(name); n, _ := asInt64(v); return n }
	var filter bson.D
	var rest bson.A // aggregate stages after the leading $match
	var plan bson.D
	byID := false
	switch c.Name {
	case "find":
		filter = argDoc("filter")
		plan, byID = s.scanPlan(filter, c)
		sorted := false
		if sortSpec := argDoc("sort"); len(sortSpec) > 0 {
			if _, natural := naturalSort(sortSpec); !natural {
				sd := bson.D{{Key: "stage", Value: "SORT"}, {Key: "sortPattern", Value: sortSpec},
					{Key: "memLimit", Value: int64(104857600)}}
				if l := argInt("limit"); l != 0 {
					sd = append(sd, bson.E{Key: "limitAmount", Value: abs64(l) + argInt("skip")})
				}
				plan = append(sd, bson.E{Key: "type", Value: "simple"}, bson.E{Key: "inputStage", Value: plan})
				sorted = true
			}
		}
		if k := argInt("skip"); k > 0 {
			plan = bson.D{{Key: "stage", Value: "SKIP"}, {Key: "skipAmount", Value: k}, {Key: "inputStage", Value: plan}}
		}
		if l := argInt("limit"); l != 0 && !sorted { // a sort applies the limit itself
			plan = bson.D{{Key: "stage", Value: "LIMIT"}, {Key: "limitAmount", Value: abs64(l)}, {Key: "inputStage", Value: plan}}
		}
		if p := argDoc("projection"); len(p) > 0 {
			plan = bson.D{{Key: "stage", Value: "PROJECTION_DEFAULT"}, {Key: "transformBy", Value: p}, {Key: "inputStage", Value: plan}}
		}
	case "count":
		filter = argDoc("query")
		if len(filter) == 0 {
			plan = bson.D{{Key: "stage", Value: "RECORD_STORE_FAST_COUNT"}}
		} else {
			var in bson.D
			in, byID = s.scanPlan(filter, c)
			plan = bson.D{{Key: "stage", Value: "COUNT"}, {Key: "inputStage", Value: in}}
		}
	case "distinct":
		filter = argDoc("query")
		var in bson.D
		in, byID = s.scanPlan(filter, c)
		kv, _ := c.Arg("key")
		key, _ := kv.(string)
		if key == "" {
			return nil, errorf(codeFailedToParse, "BSON field 'distinct.key' is missing but a required field")
		}
		plan = bson.D{{Key: "stage", Value: "PROJECTION_DEFAULT"}, {Key: "transformBy", Value: bson.D{{Key: "_id", Value: int32(0)}, {Key: key, Value: int32(1)}}},
			{Key: "inputStage", Value: in}}
	case "aggregate":
		pv, _ := c.Arg("pipeline")
		pipeline, _ := pv.(bson.A)
		rest = pipeline
		if len(pipeline) > 0 {
			if st, ok := pipeline[0].(bson.D); ok && len(st) == 1 && st[0].Key == "$match" {
				filter, _ = st[0].Value.(bson.D)
				rest = pipeline[1:]
			}
			for _, st := range pipeline {
				if sd, ok := st.(bson.D); ok && len(sd) == 1 {
					switch sd[0].Key {
					case "$changeStream", "$currentOp", "$collStats", "$out", "$merge":
						return nil, unsupported("explain of an aggregate with %s", sd[0].Key)
					}
				}
			}
		}
		if _, err := query.CompilePipeline(pipeline); err != nil {
			return nil, readQueryErr(err)
		}
		plan, byID = s.scanPlan(filter, c)
	}
	if _, err := query.CompileFilter(filter); err != nil {
		return nil, readQueryErr(err)
	}
	if filter == nil {
		filter = bson.D{}
	}
	winning := append(bson.D{{Key: "isCached", Value: false}}, plan...)
	qp := bson.D{
		{Key: "namespace", Value: ns},
		{Key: "parsedQuery", Value: filter},
		{Key: "indexFilterSet", Value: false},
		{Key: "optimizationTimeMillis", Value: int32(0)},
		{Key: "maxIndexedOrSolutionsReached", Value: false},
		{Key: "maxIndexedAndSolutionsReached", Value: false},
		{Key: "maxScansToExplodeReached", Value: false},
		{Key: "prunedSimilarIndexes", Value: false},
		{Key: "winningPlan", Value: winning},
		{Key: "rejectedPlans", Value: bson.A{}},
	}
	var stats bson.D
	if verbosity != "queryPlanner" {
		var err error
		if stats, err = s.executionStats(c, plan, byID, verbosity); err != nil {
			return nil, err
		}
	}
	out := bson.D{{Key: "explainVersion", Value: "1"}}
	if c.Name == "aggregate" && len(rest) > 0 {
		cur := bson.D{{Key: "queryPlanner", Value: qp}}
		if stats != nil {
			cur = append(cur, bson.E{Key: "executionStats", Value: stats})
		}
		stages := bson.A{bson.D{{Key: "$cursor", Value: cur}}}
		stages = append(stages, rest...)
		out = append(out, bson.E{Key: "stages", Value: stages})
	} else {
		out = append(out, bson.E{Key: "queryPlanner", Value: qp})
		if stats != nil {
			out = append(out, bson.E{Key: "executionStats", Value: stats})
		}
	}
	host, port, _ := net.SplitHostPort(s.addr)
	p, _ := strconv.Atoi(port)
	return append(out,
		bson.E{Key: "command", Value: c.Body},
		bson.E{Key: "serverInfo", Value: bson.D{{Key: "host", Value: host}, {Key: "port", Value: int32(p)},
			{Key: "version", Value: serverVersion(s)}, {Key: "gitVersion", Value: "mongosim"}}},
	), nil
}

// scanPlan is the access stage mongosim uses for filter: the _id lookup for an equality on
// _id alone; for one beside other conditions (find, count and distinct: readSnapshot's
// rdIDPinned), a FETCH of the _id index's one key with the other conditions as its filter, as
// a server's plan; else a collection scan (backward for a {$natural: -1} hint or sort).
func (s *Server) scanPlan(filter bson.D, c *command) (bson.D, bool) {
	if _, ok := rdIDEquality(filter); ok {
		stage := "EXPRESS_IXSCAN"
		if s.opts.WireVersion == 21 {
			stage = "IDHACK"
		}
		return bson.D{{Key: "stage", Value: stage}, {Key: "keyPattern", Value: "{ _id: 1 }"}, {Key: "indexName", Value: "_id_"}}, true
	}
	if id, ok := rdIDPinned(filter); ok && c.Name != "aggregate" {
		var others bson.D
		for _, e := range filter {
			if e.Key != "_id" {
				others = append(others, e)
			}
		}
		ix := bson.D{{Key: "stage", Value: "IXSCAN"}, {Key: "keyPattern", Value: bson.D{{Key: "_id", Value: int32(1)}}},
			{Key: "indexName", Value: "_id_"}, {Key: "isUnique", Value: true}, {Key: "direction", Value: "forward"},
			{Key: "indexBounds", Value: bson.D{{Key: "_id", Value: bson.A{fmt.Sprintf("[%v, %v]", id, id)}}}}}
		return bson.D{{Key: "stage", Value: "FETCH"}, {Key: "filter", Value: others}, {Key: "inputStage", Value: ix}}, true
	}
	d := bson.D{{Key: "stage", Value: "COLLSCAN"}}
	if len(filter) > 0 {
		d = append(d, bson.E{Key: "filter", Value: filter})
	}
	dir := "forward"
	if v, ok := c.Arg("sort"); ok {
		if sd, ok := v.(bson.D); ok {
			if n, natural := naturalSort(sd); natural && n < 0 {
				dir = "backward"
			}
		}
	}
	if rdReverseNaturalHint(c) {
		dir = "backward"
	}
	return append(d, bson.E{Key: "direction", Value: dir}), false
}

// executionStats runs c for real, without leaving a cursor open, and reports what it returned
// and examined.
func (s *Server) executionStats(c *command, plan bson.D, byID bool, verbosity string) (bson.D, error) {
	run := *c
	run.Body = make(bson.D, 0, len(c.Body)+2)
	for _, e := range c.Body {
		if e.Key != "batchSize" && e.Key != "singleBatch" && e.Key != "cursor" {
			run.Body = append(run.Body, e)
		}
	}
	switch c.Name {
	case "find":
		run.Body = append(run.Body, bson.E{Key: "batchSize", Value: int64(math.MaxInt32)}, bson.E{Key: "singleBatch", Value: true})
	case "aggregate":
		run.Body = append(run.Body, bson.E{Key: "cursor", Value: bson.D{{Key: "batchSize", Value: int64(math.MaxInt32)}}})
	}
	target, _ := c.Body[0].Value.(string)
	s.eng.mu.Lock()
	var examined int64
	if coll := s.eng.collLocked(c.DB, target); coll != nil {
		examined = int64(coll.count())
	} else if isOplogView(c.DB, target) {
		examined = int64(s.eng.oplog.len())
	}
	s.eng.mu.Unlock()
	start := time.Now()
	reply, err := commandTable[c.Name].handler(s, &run)
	if err != nil {
		return nil, err
	}
	elapsed := time.Since(start).Milliseconds()
	var returned int64
	switch c.Name {
	case "count":
		v, _ := lookupD(reply, "n")
		returned, _ = asInt64(v)
	case "distinct":
		v, _ := lookupD(reply, "values")
		a, _ := v.(bson.A)
		returned = int64(len(a))
	default:
		cv, _ := lookupD(reply, "cursor")
		cd, _ := cv.(bson.D)
		v, _ := lookupD(cd, "firstBatch")
		a, _ := v.(bson.A)
		returned = int64(len(a))
	}
	keys := int64(0)
	if byID {
		keys, examined = min(returned, 1), min(returned, 1)
	}
	stages := append(append(bson.D{}, plan...), bson.E{Key: "nReturned", Value: returned},
		bson.E{Key: "executionTimeMillisEstimate", Value: elapsed}, bson.E{Key: "docsExamined", Value: examined})
	stats := bson.D{
		{Key: "executionSuccess", Value: true},
		{Key: "nReturned", Value: returned},
		{Key: "executionTimeMillis", Value: elapsed},
		{Key: "totalKeysExamined", Value: keys},
		{Key: "totalDocsExamined", Value: examined},
		{Key: "executionStages", Value: stages},
	}
	if verbosity == "allPlansExecution" {
		stats = append(stats, bson.E{Key: "allPlansExecution", Value: bson.A{}})
	}
	return stats, nil
}

func abs64(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
