package mongosim

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/test/mongosim/internal/query"
)

// aggregateSpecial runs the aggregates that do not read a collection's documents: explain
// (explain: true or a verbosity), and pipelines whose first stage makes the documents itself,
// $currentOp and $collStats. The stages after it run as in any pipeline. handled is false for
// every other aggregate.
func aggregateSpecial(s *Server, c *command) (reply bson.D, handled bool, err error) {
	verbosity, explain, err := aggregateExplainVerbosity(c)
	if err != nil {
		return nil, true, err
	}
	if explain {
		body := make(bson.D, 0, len(c.Body))
		for _, e := range c.Body {
			if e.Key != "explain" && e.Key != "cursor" {
				body = append(body, e)
			}
		}
		ic := *c
		ic.Body = body
		reply, err := s.explain(&ic, verbosity)
		return reply, true, err
	}
	pv, _ := c.Arg("pipeline")
	pipeline, _ := pv.(bson.A)
	if len(pipeline) == 0 {
		return nil, false, nil
	}
	first, _ := pipeline[0].(bson.D)
	if len(first) != 1 {
		return nil, false, nil
	}
	var docs []bson.D
	var ns string
	switch first[0].Key {
	case "$currentOp":
		docs, err = currentOpStage(s, c, first[0].Value)
		ns = "admin.$cmd.aggregate"
	case "$collStats":
		docs, err = collStatsStage(s, c, first[0].Value)
		coll, _ := c.Body[0].Value.(string)
		ns = c.DB + "." + coll
	default:
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	if cv, ok := c.Arg("cursor"); !ok {
		return nil, true, errorf(codeFailedToParse, "The 'cursor' option is required, except for aggregate with the explain argument")
	} else if _, ok := cv.(bson.D); !ok {
		return nil, true, errorf(codeTypeMismatch, "BSON field 'aggregate.cursor' is the wrong type '%s', expected type 'object'", typeName(cv))
	}
	env, err := readEnv(s, c)
	if err != nil {
		return nil, true, err
	}
	p, err := query.CompilePipeline(pipeline[1:])
	if err != nil {
		return nil, true, readQueryErr(err)
	}
	out, err := p.Run(docs, env)
	if err != nil {
		return nil, true, readQueryErr(err)
	}
	res := make([]any, len(out))
	for i, d := range out {
		res[i] = d
	}
	batchSize, _ := batchSizeArg(c)
	reply, err = s.eng.firstBatch(c, newStaticCursor(ns, res), int(batchSize))
	return reply, true, err
}
