package mongosim

import (
	"bufio"
	"errors"
	"os"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// The exhaust ("streaming") hello of the server-monitoring protocol.
//
// A client that sends an awaitable hello (topologyVersion + maxAwaitTimeMS) with the OP_MSG
// exhaustAllowed flag asks the server to keep answering without further requests. The server
// flags each successful reply moreToCome, then sends the next one, unrequested, when the
// topology changes or the await time passes (HelloAwaitLimit caps it, as for every awaitable
// hello), each reply answering the requestID of the previous reply. This goes on until the
// connection closes. An error reply is never flagged moreToCome: it ends the stream and the
// connection goes back to request/response. The Node.js driver and mongosh require this; the
// Go driver accepts either form.

// isAwaitableHello reports whether body is a hello (or isMaster) that waits for a topology
// change: it carries topologyVersion and maxAwaitTimeMS.
func isAwaitableHello(body bson.D) bool {
	if len(body) == 0 {
		return false
	}
	switch body[0].Key {
	case "hello", "isMaster", "ismaster":
	default:
		return false
	}
	_, tv := lookupD(body, "topologyVersion")
	_, ma := lookupD(body, "maxAwaitTimeMS")
	return tv && ma
}

// replyOK reports whether an encoded reply document has ok: 1.
func replyOK(doc []byte) bool {
	v, err := bson.Raw(doc).LookupErr("ok")
	if err != nil {
		return false
	}
	n, ok := v.AsFloat64OK()
	return ok && n == 1
}

// streamHello sends doc, the reply to the exhaust hello req, flagged moreToCome, and then
// every following reply until the connection closes (false) or a reply is an error (true:
// the connection serves requests again). While streaming nothing is read from the
// connection, so a watcher peeks at it to notice at once when the client hangs up; it is
// stopped, through a read deadline, before this returns.
func (c *conn) streamHello(br *bufio.Reader, req *request, responseTo int32, doc []byte) bool {
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		if _, err := br.Peek(1); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			c.kill() // the client closed the stream's connection
		}
	}()
	defer func() {
		_ = c.nc.SetReadDeadline(time.Now())
		<-gone
		_ = c.nc.SetReadDeadline(time.Time{})
	}()
	var out []byte
	for {
		ok := replyOK(doc)
		var flags uint32
		if ok {
			flags = msgMoreToCome
		}
		id := c.s.nextRequestID()
		out = appendMsgReply(out[:0], id, responseTo, flags, doc)
		if _, err := c.nc.Write(out); err != nil {
			return false
		}
		if !ok {
			return true
		}
		responseTo = id
		next := &request{hdr: req.hdr, exhaust: true, body: withTopologyVersion(req.body, doc)}
		var closeConn bool
		c.setOp(next.body)
		doc, closeConn = c.s.handle(c, next)
		c.setOp(nil)
		if closeConn || doc == nil {
			return false
		}
	}
}

// withTopologyVersion returns a copy of the hello body whose topologyVersion is the one of
// the reply just sent, so that the next streamed reply waits for the next change.
func withTopologyVersion(body bson.D, reply []byte) bson.D {
	var tv bson.D
	if v, err := bson.Raw(reply).LookupErr("topologyVersion"); err == nil {
		if raw, ok := v.DocumentOK(); ok {
			_ = bson.Unmarshal(raw, &tv)
		}
	}
	out := make(bson.D, 0, len(body))
	for _, e := range body {
		if e.Key == "topologyVersion" && tv != nil {
			e.Value = tv
		}
		if e.Key == "client" {
			continue // the handshake metadata is not repeated
		}
		out = append(out, e)
	}
	return out
}
