package query

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Env carries the per-operation context for expressions: $$NOW, $$CLUSTER_TIME
// and let variables (names without the "$$" prefix). A nil *Env is allowed
// wherever an *Env is taken; it behaves like an Env with zero values.
type Env struct {
	Now         time.Time
	ClusterTime bson.Timestamp
	Vars        map[string]any
	// Collate is the operation's collation for query comparisons ($eq, $gt, $in, …), sorts,
	// $group keys and the comparison expressions ($eq, $ne, $gt, $gte, $lt, $lte, $cmp, $in);
	// nil is the simple binary one. $regex ignores it, as on a server.
	Collate Collate
}
