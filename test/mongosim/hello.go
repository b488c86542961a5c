package mongosim

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func init() {
	registerCommand(kindAdmin, cmdHello, "hello", "isMaster", "ismaster")
	registerCommand(kindAdmin, cmdPing, "ping")
	registerCommand(kindAdmin, cmdBuildInfo, "buildInfo", "buildinfo")
}

// cmdHello answers the handshake and the monitoring heartbeats as a replica-set primary (or a
// secondary while stepped down). It always reports topologyVersion, so driver v2 uses the
// streaming protocol: an awaitable hello (topologyVersion + maxAwaitTimeMS) whose version is
// current is held until the topology changes or maxAwaitTimeMS passes.
func cmdHello(s *Server, c *command) (bson.D, error) {
	if cl, ok := c.Arg("client"); ok {
		if d, ok := cl.(bson.D); ok {
			if app, ok := lookupD(d, "application"); ok {
				if ad, ok := app.(bson.D); ok {
					if name, ok := lookupD(ad, "name"); ok {
						if ns, ok := name.(string); ok {
							c.conn.setAppName(ns)
						}
					}
				}
			}
		}
	}
	if tvArg, ok := c.Arg("topologyVersion"); ok {
		if err := s.awaitTopologyChange(c, tvArg); err != nil {
			return nil, err
		}
	}
	tv, _ := s.state.topologyVersion()
	primary, electionID := s.state.roleInfo()
	opts := s.opts
	writableKey := "isWritablePrimary"
	if c.Name != "hello" {
		writableKey = "ismaster"
	}
	d := bson.D{
		{Key: writableKey, Value: primary},
		{Key: "topologyVersion", Value: tv},
		{Key: "helloOk", Value: true},
		{Key: "hosts", Value: bson.A{s.addr}},
		{Key: "setName", Value: opts.ReplicaSet},
		{Key: "setVersion", Value: int32(1)},
		{Key: "secondary", Value: !primary},
	}
	if primary {
		d = append(d, bson.E{Key: "primary", Value: s.addr})
	}
	d = append(d,
		bson.E{Key: "me", Value: s.addr},
		bson.E{Key: "electionId", Value: electionID},
		bson.E{Key: "lastWrite", Value: bson.D{
			{Key: "opTime", Value: bson.D{{Key: "ts", Value: s.eng.clock.last()}, {Key: "t", Value: int64(1)}}},
			{Key: "lastWriteDate", Value: bson.NewDateTimeFromTime(opts.Now())},
		}},
		bson.E{Key: "maxBsonObjectSize", Value: int32(maxBSONSize)},
		bson.E{Key: "maxMessageSizeBytes", Value: int32(maxMessageSize)},
		bson.E{Key: "maxWriteBatchSize", Value: int32(maxWriteBatch)},
		bson.E{Key: "localTime", Value: bson.NewDateTimeFromTime(opts.Now())},
		bson.E{Key: "logicalSessionTimeoutMinutes", Value: int32(30)},
		bson.E{Key: "connectionId", Value: c.conn.id},
		bson.E{Key: "minWireVersion", Value: int32(0)},
		bson.E{Key: "maxWireVersion", Value: int32(opts.WireVersion)},
		bson.E{Key: "readOnly", Value: false},
	)
	return d, nil
}

// awaitTopologyChange implements the server side of the streaming monitoring protocol.
func (s *Server) awaitTopologyChange(c *command, tvArg any) error {
	tvDoc, ok := tvArg.(bson.D)
	if !ok {
		return errorf(codeTypeMismatch, "BSON field 'topologyVersion' is the wrong type '%s', expected type 'object'", typeName(tvArg))
	}
	maxAwait, ok := c.Arg("maxAwaitTimeMS")
	if !ok {
		return nil
	}
	ms, ok := asInt64(maxAwait)
	if !ok || ms < 0 {
		return errorf(codeBadValue, "maxAwaitTimeMS must be a non-negative integer")
	}
	cur, changed := s.state.topologyVersion()
	pid, _ := lookupD(tvDoc, "processId")
	cnt, _ := lookupD(tvDoc, "counter")
	curPID, _ := lookupD(cur, "processId")
	curCnt, _ := lookupD(cur, "counter")
	if pid != curPID || cnt != curCnt {
		return nil // the client's view is stale: answer at once
	}
	wait := time.Duration(ms) * time.Millisecond
	if wait > s.opts.HelloAwaitLimit {
		wait = s.opts.HelloAwaitLimit
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-changed:
	case <-c.ctx.Done():
		return errCloseConnection
	case <-s.closing:
		return errCloseConnection
	}
	return nil
}

func cmdPing(*Server, *command) (bson.D, error) { return bson.D{}, nil }

func cmdBuildInfo(s *Server, _ *command) (bson.D, error) {
	version, arr := "8.0.4", bson.A{int32(8), int32(0), int32(4), int32(0)}
	if s.opts.WireVersion == 21 {
		version, arr = "7.0.15", bson.A{int32(7), int32(0), int32(15), int32(0)}
	}
	return bson.D{
		{Key: "version", Value: version},
		{Key: "gitVersion", Value: "mongosim"},
		{Key: "versionArray", Value: arr},
		{Key: "modules", Value: bson.A{}},
		{Key: "bits", Value: int32(64)},
		{Key: "maxBsonObjectSize", Value: int32(maxBSONSize)},
		{Key: "storageEngines", Value: bson.A{"mongosim"}},
	}, nil
}

// lookupD returns the value of key in d.
func lookupD(d bson.D, key string) (any, bool) {
	for _, e := range d {
		if e.Key == key {
			return e.Value, true
		}
	}
	return nil, false
}

// asInt64 converts any BSON number holding an integral value to int64.
func asInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case float64:
		if n != float64(int64(n)) {
			return 0, false
		}
		return int64(n), true
	}
	return 0, false
}
