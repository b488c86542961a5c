package mongosim

import (
	"bufio"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// conn is one client TCP connection. Requests on it are served one at a time, in order, by the
// goroutine running serve; kill may be called from any goroutine.
type conn struct {
	s       *Server
	nc      net.Conn
	id      int32
	ctx     context.Context // done when the connection is killed or the server closes
	cancel  context.CancelFunc
	mu      sync.Mutex
	appName string   // client.application.name from the handshake, for failCommand appName
	op      inflight // the command being served, for currentOp (body nil between requests)
	killed  sync.Once
}

// inflight is the command a connection is serving.
type inflight struct {
	body  bson.D
	start time.Time
	opid  int32
}

var opIDs atomic.Int32

// setOp records the command the connection starts serving (nil: it finished). It allocates
// nothing: it runs twice per request.
func (c *conn) setOp(body bson.D) {
	op := inflight{body: body}
	if body != nil {
		op.start, op.opid = time.Now(), opIDs.Add(1)
	}
	c.mu.Lock()
	c.op = op
	c.mu.Unlock()
}

// currentOp returns the command the connection is serving (ok false between requests).
func (c *conn) currentOp() (op inflight, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.op, c.op.body != nil
}

func (s *Server) newConn(nc net.Conn) *conn {
	s.connMu.Lock()
	s.nextConn++
	id := s.nextConn
	s.connMu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	return &conn{s: s, nc: nc, id: id, ctx: ctx, cancel: cancel}
}

func (c *conn) kill() {
	c.killed.Do(func() {
		c.cancel()
		_ = c.nc.Close()
	})
}

func (c *conn) setAppName(name string) {
	c.mu.Lock()
	c.appName = name
	c.mu.Unlock()
}

func (c *conn) application() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.appName
}

// serve reads requests until the peer hangs up, the connection is killed or a request is
// malformed (a real server closes the connection on framing errors too).
func (c *conn) serve() {
	defer c.kill()
	br := bufio.NewReaderSize(c.nc, 64*1024)
	var buf []byte
	var out []byte
	for {
		h, body, err := readMessage(br, buf)
		if err != nil {
			return
		}
		buf = body[:0]
		req, err := parseRequest(h, body)
		if err != nil {
			return
		}
		c.setOp(req.body)
		doc, closeConn := c.s.handle(c, req)
		c.setOp(nil)
		if closeConn {
			return
		}
		if req.moreToCome || doc == nil {
			continue
		}
		if !req.legacy && req.exhaust && isAwaitableHello(req.body) && replyOK(doc) {
			if !c.streamHello(br, req, h.requestID, doc) {
				return
			}
			continue
		}
		out = out[:0]
		if req.legacy {
			out = appendOpReply(out, c.s.nextRequestID(), h.requestID, doc)
		} else {
			out = appendMsgReply(out, c.s.nextRequestID(), h.requestID, 0, doc)
		}
		if _, err := c.nc.Write(out); err != nil {
			return
		}
		if cap(out) > 1<<20 {
			out = nil // do not pin a large reply buffer per idle connection
		}
	}
}
