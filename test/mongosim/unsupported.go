package mongosim

// unsupportedCommands are commands a MongoDB 8.0 server has that mongosim does not implement.
// They fail with the "not supported" Location code (9000001) and a message naming the feature,
// rather than CommandNotFound: a test learns what is missing, not that the command is unknown.
// A registered handler of the same name (another file) takes precedence.
var unsupportedCommands = map[string]string{
	// One member: no elections, membership or replication changes (replSetStepDown and
	// Server.StepDown simulate a step-down and re-election of the single member).
	"replSetStepUp": "replica-set elections (replSetStepUp)", "replSetFreeze": "replica-set elections (replSetFreeze)",
	"replSetReconfig": "replica-set membership changes (replSetReconfig)", "replSetInitiate": "replica-set membership changes (replSetInitiate)",
	"replSetMaintenance": "replica-set maintenance mode (replSetMaintenance)", "replSetSyncFrom": "replication sources (replSetSyncFrom)",
	"replSetResizeOplog": "oplog resizing (replSetResizeOplog; use Options.OplogCapacity)",
	// Sharding.
	"shardCollection": "sharding (shardCollection)", "enableSharding": "sharding (enableSharding)", "addShard": "sharding (addShard)",
	"reshardCollection": "sharding (reshardCollection)",
	// Authentication and users.
	"saslStart": "authentication (saslStart)", "saslContinue": "authentication (saslContinue)", "authenticate": "authentication (authenticate)",
	"logout": "authentication (logout)", "createUser": "users and roles (createUser)", "updateUser": "users and roles (updateUser)",
	"dropUser": "users and roles (dropUser)", "usersInfo": "users and roles (usersInfo)", "createRole": "users and roles (createRole)",
	"rolesInfo": "users and roles (rolesInfo)", "grantRolesToUser": "users and roles (grantRolesToUser)",
	// Collection kinds and maintenance.
	"convertToCapped": "capped collections (convertToCapped)", "cloneCollectionAsCapped": "capped collections (cloneCollectionAsCapped)",
	"compact": "storage maintenance (compact)", "reIndex": "index rebuilds (reIndex)", "mapReduce": "map-reduce (mapReduce)",
	"applyOps": "applyOps", "setFeatureCompatibilityVersion": "feature compatibility versions (setFeatureCompatibilityVersion)",
	"fsync": "fsync (everything is in memory)", "shutdown": "shutdown over the wire (use Server.Close)",
}
