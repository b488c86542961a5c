package mongosim

import (
	"crypto/rand"
	"os"
	"runtime"
	"slices"
	"sort"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func init() {
	registerCommand(kindAdmin, cmdEndSessions, "endSessions")
	registerCommand(kindAdmin, cmdKillSessions, "killSessions")
	registerCommand(kindAdmin, cmdKillAllSessions, "killAllSessions")
	registerCommand(kindAdmin, cmdRefreshSessions, "refreshSessions")
	registerCommand(kindAdmin, cmdStartSession, "startSession")
	registerCommand(kindAdmin, cmdWhatsMyURI, "whatsmyuri")
	registerCommand(kindAdmin, cmdConnectionStatus, "connectionStatus")
	registerCommand(kindAdmin, cmdHostInfo, "hostInfo")
	registerCommand(kindAdmin, cmdServerStatus, "serverStatus")
	registerCommand(kindAdmin, cmdListCommands, "listCommands")
	registerCommand(kindAdmin, cmdGetLog, "getLog")
	registerCommand(kindRead, cmdDBStats, "dbStats", "dbstats")
	registerCommand(kindRead, cmdCollStats, "collStats", "collstats")
}

// endSessionsLocked forgets the given sessions, aborts their open transactions and returns
// their open cursors, already removed from the cursor table, for the caller to close after
// releasing e.mu. all ends every session (keys is then ignored). Caller holds e.mu.
func (e *engine) endSessionsLocked(keys []string, all bool) []cursor {
	set := make(map[string]bool, len(keys))
	for _, k := range keys {
		set[k] = true
	}
	if all {
		for k := range e.sessions.m {
			set[k] = true
		}
	}
	var toClose []cursor
	for id, ent := range e.cursors.open {
		if ent.lsid == nil {
			continue
		}
		k := sessionKey(*ent.lsid)
		if all || set[k] {
			set[k] = true // a session known only through its cursor: abort its transaction too
			delete(e.cursors.open, id)
			toClose = append(toClose, ent.cur)
		}
	}
	for k := range set {
		e.endSessionLocked(k)
		e.abortSessionTxnsLocked(k)
	}
	if all {
		// Including sessions that only ran transactions, known to txn.go alone.
		e.abortAllTxnsLocked()
	}
	return toClose
}

func (e *engine) endSessionsAndClose(keys []string, all bool) {
	e.mu.Lock()
	toClose := e.endSessionsLocked(keys, all)
	e.mu.Unlock()
	for _, cur := range toClose {
		cur.close()
	}
}

// cmdEndSessions ends sessions (Client.Disconnect sends it): their retryable-write history
// is forgotten, open transactions are aborted and their cursors killed. Unknown ids are
// ignored, as on a real server.
func cmdEndSessions(s *Server, c *command) (bson.D, error) {
	keys, err := sessionIDsArg(c)
	if err != nil {
		return nil, err
	}
	s.eng.endSessionsAndClose(keys, false)
	return bson.D{}, nil
}

// cmdKillSessions kills the listed sessions: like endSessions.
func cmdKillSessions(s *Server, c *command) (bson.D, error) {
	keys, err := sessionIDsArg(c)
	if err != nil {
		return nil, err
	}
	s.eng.endSessionsAndClose(keys, false)
	return bson.D{}, nil
}

// cmdKillAllSessions kills every session: the simulator has no users, so any user pattern
// matches every session. Open transactions are aborted and session cursors killed.
func cmdKillAllSessions(s *Server, c *command) (bson.D, error) {
	if _, ok := c.Body[0].Value.(bson.A); !ok {
		return nil, errorf(codeTypeMismatch, "BSON field 'killAllSessions' is the wrong type '%s', expected type 'array'", typeName(c.Body[0].Value))
	}
	s.eng.endSessionsAndClose(nil, true)
	return bson.D{}, nil
}

// cmdRefreshSessions marks sessions as used now, so they are not reaped.
func cmdRefreshSessions(s *Server, c *command) (bson.D, error) {
	keys, err := sessionIDsArg(c)
	if err != nil {
		return nil, err
	}
	e := s.eng
	now := s.opts.Now()
	e.mu.Lock()
	for _, k := range keys {
		if st := e.sessions.m[k]; st != nil {
			st.lastUse = now
		}
	}
	e.mu.Unlock()
	return bson.D{}, nil
}

// cmdStartSession creates a server-generated session, as the shell's startSession does.
func cmdStartSession(s *Server, _ *command) (bson.D, error) {
	id := bson.Binary{Subtype: 4, Data: randomSessionUUID()}
	e := s.eng
	e.mu.Lock()
	e.sessionLocked(id)
	e.mu.Unlock()
	return bson.D{
		{Key: "id", Value: bson.D{{Key: "id", Value: id}}},
		{Key: "timeoutMinutes", Value: int32(sessionTimeout / time.Minute)},
	}, nil
}

// randomSessionUUID returns 16 random bytes shaped as a version-4 UUID.
func randomSessionUUID() []byte {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	return b
}

func cmdWhatsMyURI(_ *Server, c *command) (bson.D, error) {
	return bson.D{{Key: "you", Value: c.conn.nc.RemoteAddr().String()}}, nil
}

// cmdConnectionStatus reports no authenticated users: the simulator has no authentication.
func cmdConnectionStatus(_ *Server, c *command) (bson.D, error) {
	info := bson.D{
		{Key: "authenticatedUsers", Value: bson.A{}},
		{Key: "authenticatedUserRoles", Value: bson.A{}},
	}
	if v, ok := c.Arg("showPrivileges"); ok {
		if b, _ := v.(bool); b {
			info = append(info, bson.E{Key: "authenticatedUserPrivileges", Value: bson.A{}})
		}
	}
	return bson.D{{Key: "authInfo", Value: info}}, nil
}

func cmdHostInfo(s *Server, _ *command) (bson.D, error) {
	host, _ := os.Hostname()
	return bson.D{
		{Key: "system", Value: bson.D{
			{Key: "currentTime", Value: bson.NewDateTimeFromTime(s.opts.Now())},
			{Key: "hostname", Value: host},
			{Key: "cpuAddrSize", Value: int32(64)},
			{Key: "numCores", Value: int32(runtime.NumCPU())},
			{Key: "cpuArch", Value: runtime.GOARCH},
			{Key: "numaEnabled", Value: false},
		}},
		{Key: "os", Value: bson.D{{Key: "type", Value: runtime.GOOS}, {Key: "name", Value: "mongosim"}}},
		{Key: "extra", Value: bson.D{}},
	}, nil
}

// serverVersion returns the version string buildInfo reports.
func serverVersion(s *Server) string {
	d, _ := cmdBuildInfo(s, nil)
	v, _ := lookupD(d, "version")
	str, _ := v.(string)
	return str
}

// cmdServerStatus reports a small but truthful subset of serverStatus: identity, uptime,
// connections, open cursors and sessions, and the replica-set role.
func cmdServerStatus(s *Server, _ *command) (bson.D, error) {
	e := s.eng
	e.mu.Lock()
	started := e.sessions.started
	nSessions := len(e.sessions.m)
	nCursors := len(e.cursors.open)
	e.mu.Unlock()
	s.connMu.Lock()
	current, created := len(s.conns), s.nextConn
	s.connMu.Unlock()
	up := time.Since(started)
	primary, electionID := s.state.roleInfo()
	return bson.D{
		{Key: "host", Value: s.addr},
		{Key: "version", Value: serverVersion(s)},
		{Key: "process", Value: "mongod"},
		{Key: "pid", Value: int64(os.Getpid())},
		{Key: "uptime", Value: up.Seconds()},
		{Key: "uptimeMillis", Value: up.Milliseconds()},
		{Key: "uptimeEstimate", Value: int64(up / time.Second)},
		{Key: "localTime", Value: bson.NewDateTimeFromTime(s.opts.Now())},
		{Key: "connections", Value: bson.D{
			{Key: "current", Value: int32(current)},
			{Key: "available", Value: int32(1_000_000 - current)},
			{Key: "totalCreated", Value: int64(created)},
		}},
		{Key: "logicalSessionRecordCache", Value: bson.D{
			{Key: "activeSessionsCount", Value: int32(nSessions)},
		}},
		{Key: "metrics", Value: bson.D{
			{Key: "cursor", Value: bson.D{{Key: "open", Value: bson.D{{Key: "total", Value: int64(nCursors)}}}}},
		}},
		{Key: "repl", Value: bson.D{
			{Key: "setName", Value: s.opts.ReplicaSet},
			{Key: "isWritablePrimary", Value: primary},
			{Key: "secondary", Value: !primary},
			{Key: "hosts", Value: bson.A{s.addr}},
			{Key: "me", Value: s.addr},
			{Key: "electionId", Value: electionID},
		}},
	}, nil
}

// cmdListCommands lists every command the simulator implements.
func cmdListCommands(_ *Server, _ *command) (bson.D, error) {
	names := make([]string, 0, len(commandTable))
	for n := range commandTable {
		names = append(names, n)
	}
	sort.Strings(names)
	cmds := make(bson.D, 0, len(names))
	for _, n := range names {
		spec := commandTable[n]
		cmds = append(cmds, bson.E{Key: n, Value: bson.D{
			{Key: "help", Value: "mongosim implementation of " + n},
			{Key: "requiresAuth", Value: false},
			{Key: "secondaryOk", Value: spec.kind != kindWrite},
			{Key: "adminOnly", Value: slices.Contains(adminOnlyCommands, n)},
		}})
	}
	return bson.D{{Key: "commands", Value: cmds}}, nil
}

// adminOnlyCommands must run against the admin database.
var adminOnlyCommands = []string{"configureFailPoint", "killAllSessions", "renameCollection", "listDatabases"}

// cmdGetLog answers getLog: "*" lists the (empty) logs the simulator keeps; any log name
// returns no lines.
func cmdGetLog(_ *Server, c *command) (bson.D, error) {
	name, ok := c.Body[0].Value.(string)
	if !ok {
		return nil, errorf(codeTypeMismatch, "Argument to getLog must be of type String; found %v of type %s", c.Body[0].Value, typeName(c.Body[0].Value))
	}
	if name == "*" {
		return bson.D{{Key: "names", Value: bson.A{"global", "startupWarnings"}}}, nil
	}
	if name != "global" && name != "startupWarnings" {
		return nil, errorf(codeOperationFailed, "No log named '%s'", name)
	}
	return bson.D{{Key: "totalLinesWritten", Value: int32(0)}, {Key: "log", Value: bson.A{}}}, nil
}

// statsScale returns the scale argument of dbStats/collStats (default 1; sizes are divided by
// it).
func statsScale(c *command) (int64, error) {
	v, ok := c.Arg("scale")
	if !ok {
		return 1, nil
	}
	n, ok := asInt64(v)
	if !ok || n < 1 {
		return 0, errorf(codeBadValue, "scale has to be >= 1")
	}
	return n, nil
}

// collStatsLocked returns the live document count and data size (encoded bytes) of a
// collection, and its index names. Caller holds e.mu.
func collStatsLocked(coll *collection) (count int64, size int64, indexes []string) {
	for _, ix := range coll.indexes {
		indexes = append(indexes, ix.name)
	}
	return int64(coll.count()), coll.size, indexes
}

// cmdDBStats reports the committed size of a database: collections, documents and their
// encoded size. Storage and index sizes are not simulated and reported as the data size and 0.
// A database that does not exist reports zeros, as on a real server.
func cmdDBStats(s *Server, c *command) (bson.D, error) {
	scale, err := statsScale(c)
	if err != nil {
		return nil, err
	}
	e := s.eng
	var colls, nIndexes int32
	var objects, size int64
	e.mu.Lock()
	if d := e.dbs[c.DB]; d != nil {
		for _, coll := range d.colls {
			n, sz, ix := collStatsLocked(coll)
			colls++
			objects += n
			size += sz
			nIndexes += int32(len(ix))
		}
	}
	e.mu.Unlock()
	avg := 0.0
	if objects > 0 {
		avg = float64(size) / float64(objects)
	}
	scaled := float64(size / scale)
	return bson.D{
		{Key: "db", Value: c.DB},
		{Key: "collections", Value: int64(colls)},
		{Key: "views", Value: int64(0)},
		{Key: "objects", Value: objects},
		{Key: "avgObjSize", Value: avg},
		{Key: "dataSize", Value: scaled},
		{Key: "storageSize", Value: scaled},
		{Key: "indexes", Value: int64(nIndexes)},
		{Key: "indexSize", Value: 0.0},
		{Key: "totalSize", Value: scaled},
		{Key: "scaleFactor", Value: scale},
	}, nil
}

// cmdCollStats reports a collection's committed document count and data size, and its index
// names (index sizes are not simulated: 0). A missing collection fails with NamespaceNotFound
// (26), as on MongoDB 7.0+.
func cmdCollStats(s *Server, c *command) (bson.D, error) {
	name, ok := c.Body[0].Value.(string)
	if !ok || name == "" {
		return nil, errorf(codeInvalidNamespace, "collection name has invalid type %s", typeName(c.Body[0].Value))
	}
	scale, err := statsScale(c)
	if err != nil {
		return nil, err
	}
	e := s.eng
	e.mu.Lock()
	if isOplogView(c.DB, name) {
		st, _ := e.storageStatsLocked(c.DB, name, scale) // stats.go
		e.mu.Unlock()
		return append(bson.D{{Key: "ns", Value: c.DB + "." + name}}, st...), nil
	}
	coll := e.collLocked(c.DB, name)
	if coll == nil {
		e.mu.Unlock()
		return nil, errorf(codeNamespaceNotFound, "Collection [%s.%s] not found.", c.DB, name)
	}
	n, size, indexes := collStatsLocked(coll)
	e.mu.Unlock()
	avg := int64(0)
	if n > 0 {
		avg = size / n
	}
	sizes := make(bson.D, 0, len(indexes))
	for _, ix := range indexes {
		sizes = append(sizes, bson.E{Key: ix, Value: int64(0)})
	}
	return bson.D{
		{Key: "ns", Value: c.DB + "." + name},
		{Key: "size", Value: size / scale},
		{Key: "count", Value: n},
		{Key: "avgObjSize", Value: avg},
		{Key: "storageSize", Value: size / scale},
		{Key: "nindexes", Value: int64(len(indexes))},
		{Key: "totalIndexSize", Value: int64(0)},
		{Key: "indexSizes", Value: sizes},
		{Key: "scaleFactor", Value: scale},
	}, nil
}
