package mongosim

import (
	"go.mongodb.org/mongo-driver/v2/bson"
)

// stagesOutsideAPIV1 are the aggregation stages a server refuses under apiStrict: true in
// Stable API version 1 (they are diagnostic or internal: the sessions, operations, plan-cache,
// index-statistics and catalog listings, and the Atlas search stages).
var stagesOutsideAPIV1 = map[string]bool{
	"$currentOp": true, "$indexStats": true, "$listLocalSessions": true, "$listSessions": true,
	"$planCacheStats": true, "$listCatalog": true, "$listCachedAndActiveUsers": true,
	"$queryStats": true, "$listSearchIndexes": true, "$search": true, "$searchMeta": true,
	"$vectorSearch": true, "$listClusterCatalog": true, "$shardedDataDistribution": true,
}

// checkAPIStrictStages refuses, under apiStrict, an aggregate (on a collection or a database)
// whose pipeline has a stage outside API version 1, with APIStrictError (323) naming the
// stage, as a server does before running anything.
func checkAPIStrictStages(c *command) *cmdError {
	if c.Name != "aggregate" {
		return nil
	}
	p, _ := c.Arg("pipeline")
	stages, _ := p.(bson.A)
	for _, st := range stages {
		d, _ := st.(bson.D)
		if len(d) > 0 && stagesOutsideAPIV1[d[0].Key] {
			return errorf(codeAPIStrictError, "%s is not allowed with 'apiStrict: true' in API Version 1", d[0].Key)
		}
	}
	return nil
}
