package mongosim

import (
	"sort"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/test/mongosim/internal/query"
)

func init() {
	registerCommand(kindAdmin, cmdCurrentOp, "currentOp")
}

// currentOp and $currentOp: what the server is doing, in a server's document shapes.
//
// Each connection serving a command is an active operation (type "op") with its command,
// namespace and running time; a getMore also shows its cursor, with the command that opened it
// (cursor.originatingCommand, which carries that command's comment), and shows that comment on
// its own command too, as servers do since 4.4. With idleConnections, connections between
// requests are listed as inactive operations; with idleCursors, cursors no getMore is using are
// listed as type "idleCursor". So a stream's cursor is found by its comment whether a getMore is
// waiting on it or not.

// currentOpOptions are the $currentOp stage options mongosim honours.
type currentOpOptions struct {
	idleConnections, idleCursors bool
}

// currentOps returns the operation documents, ordered by connection id, then idle cursors.
func (s *Server) currentOps(opts currentOpOptions) []bson.D {
	s.connMu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.connMu.Unlock()
	sort.Slice(conns, func(i, j int) bool { return conns[i].id < conns[j].id })
	now := time.Now()
	nowStr := s.opts.Now().Format("2006-01-02T15:04:05.000-07:00")
	type active struct {
		c  *conn
		op *inflight // nil: an idle connection
	}
	var acts []active
	for _, c := range conns {
		if op, ok := c.currentOp(); ok {
			acts = append(acts, active{c, &op})
		} else if opts.idleConnections {
			acts = append(acts, active{c, nil})
		}
	}
	e := s.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]bson.D, 0, len(acts))
	for _, a := range acts {
		d := bson.D{
			{Key: "type", Value: "op"},
			{Key: "host", Value: s.addr},
			{Key: "desc", Value: "conn" + itoa(int64(a.c.id))},
			{Key: "connectionId", Value: a.c.id},
			{Key: "client", Value: a.c.nc.RemoteAddr().String()},
		}
		if app := a.c.application(); app != "" {
			d = append(d, bson.E{Key: "appName", Value: app})
		}
		d = append(d, bson.E{Key: "active", Value: a.op != nil}, bson.E{Key: "currentOpTime", Value: nowStr})
		if a.op == nil {
			out = append(out, d)
			continue
		}
		body := a.op.body
		running := now.Sub(a.op.start)
		d = append(d, bson.E{Key: "threaded", Value: true}, bson.E{Key: "opid", Value: a.op.opid})
		if v, ok := lookupD(body, "lsid"); ok {
			d = append(d, bson.E{Key: "lsid", Value: v})
		}
		d = append(d,
			bson.E{Key: "secs_running", Value: int64(running / time.Second)},
			bson.E{Key: "microsecs_running", Value: running.Microseconds()},
			bson.E{Key: "op", Value: opKind(body)},
			bson.E{Key: "ns", Value: opNamespace(body)},
			bson.E{Key: "redacted", Value: false})
		var curDoc bson.D
		if body[0].Key == "getMore" {
			if id, ok := body[0].Value.(int64); ok {
				if ent := e.cursors.open[id]; ent != nil {
					curDoc = cursorInfo(id, ent)
					if cm, ok := lookupD(ent.origin, "comment"); ok {
						if _, has := lookupD(body, "comment"); !has {
							body = append(body[:len(body):len(body)], bson.E{Key: "comment", Value: cm})
						}
					}
				}
			}
		}
		d = append(d, bson.E{Key: "command", Value: body})
		if curDoc != nil {
			d = append(d, bson.E{Key: "cursor", Value: curDoc})
		}
		d = append(d,
			bson.E{Key: "numYields", Value: int32(0)},
			bson.E{Key: "locks", Value: bson.D{}},
			bson.E{Key: "waitingForLock", Value: false},
			bson.E{Key: "lockStats", Value: bson.D{}},
			bson.E{Key: "waitingForFlowControl", Value: false},
			bson.E{Key: "flowControlStats", Value: bson.D{}})
		out = append(out, d)
	}
	if opts.idleCursors {
		ids := make([]int64, 0, len(e.cursors.open))
		for id, ent := range e.cursors.open {
			if !ent.inUse {
				ids = append(ids, id)
			}
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		for _, id := range ids {
			ent := e.cursors.open[id]
			d := bson.D{{Key: "type", Value: "idleCursor"}, {Key: "host", Value: s.addr}, {Key: "ns", Value: ent.cur.namespace()}}
			if ent.lsid != nil {
				d = append(d, bson.E{Key: "lsid", Value: bson.D{{Key: "id", Value: *ent.lsid}}})
			}
			out = append(out, append(d, bson.E{Key: "cursor", Value: cursorInfo(id, ent)}))
		}
	}
	return out
}

// cursorInfo is the cursor document of currentOp. Caller holds e.mu.
func cursorInfo(id int64, ent *cursorEntry) bson.D {
	cs := ent.cur.isChangeStream()
	return bson.D{
		{Key: "cursorId", Value: id},
		{Key: "createdDate", Value: bson.NewDateTimeFromTime(ent.created)},
		{Key: "lastAccessDate", Value: bson.NewDateTimeFromTime(ent.lastUsed)},
		{Key: "nDocsReturned", Value: ent.nDocs},
		{Key: "nBatchesReturned", Value: ent.nBatches},
		{Key: "noCursorTimeout", Value: false},
		{Key: "tailable", Value: cs},
		{Key: "awaitData", Value: cs},
		{Key: "originatingCommand", Value: ent.origin},
	}
}

// opKind is currentOp's op field: the kind of operation a command is.
func opKind(body bson.D) string {
	switch body[0].Key {
	case "find":
		return "query"
	case "getMore":
		return "getmore"
	case "insert":
		return "insert"
	case "update":
		return "update"
	case "delete":
		return "remove"
	}
	return "command"
}

// opNamespace is currentOp's ns: db.collection for commands on a collection, db.$cmd else.
func opNamespace(body bson.D) string {
	db := ""
	if v, ok := lookupD(body, "$db"); ok {
		db, _ = v.(string)
	}
	if body[0].Key == "getMore" {
		if v, ok := lookupD(body, "collection"); ok {
			if coll, ok := v.(string); ok {
				return db + "." + coll
			}
		}
	}
	if coll, ok := body[0].Value.(string); ok && coll != "" && !strings.HasPrefix(body[0].Key, "$") {
		switch body[0].Key {
		case "hello", "isMaster", "ismaster", "getParameter", "getLog", "currentOp":
		default:
			return db + "." + coll
		}
	}
	return db + ".$cmd"
}

func itoa(n int64) string {
	var b [20]byte
	i := len(b)
	if n == 0 {
		return "0"
	}
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// currentOp's own fields; the others filter the operations, as a query would.
var currentOpArgs = map[string]bool{"currentOp": true, "$all": true, "$ownOps": true, "comment": true,
	"$db": true, "lsid": true, "$clusterTime": true, "$readPreference": true, "apiVersion": true,
	"apiStrict": true, "apiDeprecationErrors": true, "maxTimeMS": true,
	"readConcern": true, "writeConcern": true, "txnNumber": true, "autocommit": true}

// cmdCurrentOp answers {currentOp: 1, $all?, <filter fields>} with {inprog: [...]}. $all adds
// the idle connections; the other fields are a query filter over the operation documents.
func cmdCurrentOp(s *Server, c *command) (bson.D, error) {
	if c.DB != "admin" {
		return nil, errorf(codeUnauthorized, "currentOp may only be run against the admin database.")
	}
	all := false
	var filter bson.D
	for _, e := range c.Body {
		switch {
		case e.Key == "$all":
			all = truthy(e.Value)
		case currentOpArgs[e.Key]:
		default:
			filter = append(filter, e)
		}
	}
	f, err := query.CompileFilter(filter)
	if err != nil {
		return nil, qerrToCmd(err)
	}
	inprog := bson.A{}
	for _, op := range s.currentOps(currentOpOptions{idleConnections: all}) {
		ok, err := f.Match(op, nil)
		if err != nil {
			return nil, qerrToCmd(err)
		}
		if ok {
			inprog = append(inprog, op)
		}
	}
	return bson.D{{Key: "inprog", Value: inprog}}, nil
}

// currentOpStage runs an aggregate whose first stage is $currentOp: {aggregate: 1} on admin.
func currentOpStage(s *Server, c *command, spec any) ([]bson.D, error) {
	if n, ok := asInt64(c.Body[0].Value); c.DB != "admin" || !ok || n != 1 {
		return nil, errorf(codeInvalidNamespace, "$currentOp must be run against the 'admin' database with {aggregate: 1}")
	}
	sd, ok := spec.(bson.D)
	if !ok {
		return nil, errorf(codeFailedToParse, "$currentOp options must be specified in an object, but found: %s", typeName(spec))
	}
	var opts currentOpOptions
	for _, e := range sd {
		b, isBool := e.Value.(bool)
		switch e.Key {
		case "allUsers", "localOps", "truncateOps", "backtrace", "idleSessions", "targetAllNodes":
		case "idleConnections":
			opts.idleConnections = b
		case "idleCursors":
			opts.idleCursors = b
		default:
			return nil, errorf(codeFailedToParse, "Unrecognized option '%s' in $currentOp stage.", e.Key)
		}
		if !isBool {
			return nil, errorf(codeFailedToParse, "The '%s' parameter of the $currentOp stage must be a boolean value, but found: %s", e.Key, typeName(e.Value))
		}
	}
	return s.currentOps(opts), nil
}
