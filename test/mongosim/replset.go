package mongosim

import (
	"net"
	"os"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/test/mongosim/internal/query"
)

func init() {
	registerCommand(kindAdmin, cmdReplSetGetStatus, "replSetGetStatus")
	registerCommand(kindAdmin, cmdReplSetGetConfig, "replSetGetConfig")
	registerCommand(kindAdmin, cmdGetCmdLineOpts, "getCmdLineOpts")
}

// The replica set as operators see it: replSetGetStatus (rs.status()), replSetGetConfig
// (rs.conf()), getCmdLineOpts, and the admin, config and local databases a real member has
// from its first start (admin.system.version, config.system.sessions, local.system.replset,
// local.startup_log), so that a fresh server's listDatabases is not empty. local.oplog.rs is a
// read-only view of the change history (the change-stream oplog), built on each read.

// replicaSetID identifies the set in its config (settings.replicaSetId), fixed per server.
func (s *Server) replicaSetID() bson.ObjectID { return s.state.processID }

// replSetConfig is the set's configuration document: one voting member, this server.
func (s *Server) replSetConfig() bson.D {
	n := &s.state
	n.mu.Lock()
	term := n.term
	n.mu.Unlock()
	return bson.D{
		{Key: "_id", Value: s.opts.ReplicaSet},
		{Key: "version", Value: int32(1)},
		{Key: "term", Value: term},
		{Key: "members", Value: bson.A{bson.D{
			{Key: "_id", Value: int32(0)},
			{Key: "host", Value: s.addr},
			{Key: "arbiterOnly", Value: false},
			{Key: "buildIndexes", Value: true},
			{Key: "hidden", Value: false},
			{Key: "priority", Value: 1.0},
			{Key: "tags", Value: bson.D{}},
			{Key: "secondaryDelaySecs", Value: int64(0)},
			{Key: "votes", Value: int32(1)},
		}}},
		{Key: "protocolVersion", Value: int64(1)},
		{Key: "writeConcernMajorityJournalDefault", Value: true},
		{Key: "settings", Value: bson.D{
			{Key: "chainingAllowed", Value: true},
			{Key: "heartbeatIntervalMillis", Value: int32(2000)},
			{Key: "heartbeatTimeoutSecs", Value: int32(10)},
			{Key: "electionTimeoutMillis", Value: int32(10000)},
			{Key: "catchUpTimeoutMillis", Value: int32(-1)},
			{Key: "catchUpTakeoverDelayMillis", Value: int32(30000)},
			{Key: "getLastErrorModes", Value: bson.D{}},
			{Key: "getLastErrorDefaults", Value: bson.D{{Key: "w", Value: int32(1)}, {Key: "wtimeout", Value: int32(0)}}},
			{Key: "replicaSetId", Value: s.replicaSetID()},
		}},
	}
}

func cmdReplSetGetConfig(s *Server, c *command) (bson.D, error) {
	if c.DB != "admin" {
		return nil, errorf(codeUnauthorized, "replSetGetConfig may only be run against the admin database.")
	}
	return bson.D{{Key: "config", Value: s.replSetConfig()}}, nil
}

// cmdReplSetGetStatus reports the one member: PRIMARY (state 1), or SECONDARY (2) while
// stepped down, with the optimes of the last write.
func cmdReplSetGetStatus(s *Server, c *command) (bson.D, error) {
	if c.DB != "admin" {
		return nil, errorf(codeUnauthorized, "replSetGetStatus may only be run against the admin database.")
	}
	n := &s.state
	n.mu.Lock()
	primary, term, electedAt := !n.secondary, n.term, n.electedAt
	electedTS := bson.Timestamp{T: uint32(electedAt.Unix()), I: 1}
	n.mu.Unlock()
	e := s.eng
	e.mu.Lock()
	started := e.sessions.started
	var lastWall time.Time
	if l := e.oplog.len(); l > 0 {
		lastWall = e.oplog.at(l - 1).wall
	} else {
		lastWall = started
	}
	e.mu.Unlock()
	last := e.clock.last()
	opTime := bson.D{{Key: "ts", Value: last}, {Key: "t", Value: term}}
	wall := bson.NewDateTimeFromTime(lastWall)
	state, stateStr := int32(1), "PRIMARY"
	if !primary {
		state, stateStr = 2, "SECONDARY"
	}
	member := bson.D{
		{Key: "_id", Value: int32(0)},
		{Key: "name", Value: s.addr},
		{Key: "health", Value: 1.0},
		{Key: "state", Value: state},
		{Key: "stateStr", Value: stateStr},
		{Key: "uptime", Value: int32(time.Since(started).Seconds())},
		{Key: "optime", Value: opTime},
		{Key: "optimeDate", Value: bson.NewDateTimeFromTime(time.Unix(int64(last.T), 0))},
		{Key: "lastAppliedWallTime", Value: wall},
		{Key: "lastDurableWallTime", Value: wall},
		{Key: "syncSourceHost", Value: ""},
		{Key: "syncSourceId", Value: int32(-1)},
		{Key: "infoMessage", Value: ""},
	}
	if primary {
		member = append(member,
			bson.E{Key: "electionTime", Value: electedTS},
			bson.E{Key: "electionDate", Value: bson.NewDateTimeFromTime(electedAt)})
	}
	member = append(member,
		bson.E{Key: "configVersion", Value: int32(1)},
		bson.E{Key: "configTerm", Value: term},
		bson.E{Key: "self", Value: true},
		bson.E{Key: "lastHeartbeatMessage", Value: ""})
	return bson.D{
		{Key: "set", Value: s.opts.ReplicaSet},
		{Key: "date", Value: bson.NewDateTimeFromTime(s.opts.Now())},
		{Key: "myState", Value: state},
		{Key: "term", Value: term},
		{Key: "syncSourceHost", Value: ""},
		{Key: "syncSourceId", Value: int32(-1)},
		{Key: "heartbeatIntervalMillis", Value: int64(2000)},
		{Key: "majorityVoteCount", Value: int32(1)},
		{Key: "writeMajorityCount", Value: int32(1)},
		{Key: "votingMembersCount", Value: int32(1)},
		{Key: "writableVotingMembersCount", Value: int32(1)},
		{Key: "optimes", Value: bson.D{
			{Key: "lastCommittedOpTime", Value: opTime},
			{Key: "lastCommittedWallTime", Value: wall},
			{Key: "readConcernMajorityOpTime", Value: opTime},
			{Key: "appliedOpTime", Value: opTime},
			{Key: "durableOpTime", Value: opTime},
			{Key: "lastAppliedWallTime", Value: wall},
			{Key: "lastDurableWallTime", Value: wall},
		}},
		{Key: "members", Value: bson.A{member}},
	}, nil
}

// cmdGetCmdLineOpts reports the process's arguments and the options mongosim runs with, in
// the shape of mongod's parsed configuration.
func cmdGetCmdLineOpts(s *Server, c *command) (bson.D, error) {
	if c.DB != "admin" {
		return nil, errorf(codeUnauthorized, "getCmdLineOpts may only be run against the admin database.")
	}
	argv := bson.A{}
	for _, a := range os.Args {
		argv = append(argv, a)
	}
	host, port, _ := net.SplitHostPort(s.addr)
	p, _ := strconv.Atoi(port)
	return bson.D{
		{Key: "argv", Value: argv},
		{Key: "parsed", Value: bson.D{
			{Key: "net", Value: bson.D{{Key: "bindIp", Value: host}, {Key: "port", Value: int32(p)}}},
			{Key: "replication", Value: bson.D{
				{Key: "replSet", Value: s.opts.ReplicaSet},
				{Key: "oplogSizeEntries", Value: int64(s.opts.OplogCapacity)},
			}},
			{Key: "storage", Value: bson.D{{Key: "engine", Value: "mongosim"}, {Key: "inMemory", Value: true}}},
		}},
	}, nil
}

// createSystemCollectionsLocked creates the collections of admin, config and local that a
// replica-set member has from its start, without oplog entries (a server does not replicate
// them either). Caller holds e.mu.
func (e *engine) createSystemCollectionsLocked() {
	s := e.s
	host, _ := os.Hostname()
	started := e.sessions.started
	for _, sc := range []struct {
		db, coll string
		docs     []bson.D
	}{
		{"admin", "system.version", []bson.D{{
			{Key: "_id", Value: "featureCompatibilityVersion"},
			{Key: "version", Value: map[int]string{21: "7.0", 25: "8.0"}[s.opts.WireVersion]},
		}}},
		{"config", "system.sessions", nil},
		{"local", "system.replset", []bson.D{s.replSetConfig()}},
		{"local", "startup_log", []bson.D{{
			{Key: "_id", Value: host + "-" + strconv.FormatInt(started.UnixMilli(), 10)},
			{Key: "hostname", Value: host},
			{Key: "startTime", Value: bson.NewDateTimeFromTime(started)},
			{Key: "startTimeLocal", Value: started.Format("Mon Jan _2 15:04:05.000")},
			{Key: "pid", Value: int64(os.Getpid())},
			{Key: "buildinfo", Value: bson.D{{Key: "version", Value: serverVersion(s)}, {Key: "gitVersion", Value: "mongosim"}}},
		}}},
	} {
		coll := newCollection(sc.db, sc.coll)
		for _, d := range sc.docs {
			raw, _ := bson.Marshal(d)
			_ = coll.insertSlot(&docSlot{doc: d, key: query.HashKey(docID(d)), size: len(raw)})
		}
		db := e.dbs[sc.db]
		if db == nil {
			db = &database{name: sc.db, colls: make(map[string]*collection)}
			e.dbs[sc.db] = db
		}
		db.colls[sc.coll] = coll
	}
}
