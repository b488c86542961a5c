// Package console is the client of a watchtree console: Dial one by its address and read its
// streams, follow its lifecycle feed, or run commands. The console itself runs inside a
// runtime (watchtree.Config.Console).
package console

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/watchtree/watchtree/internal/consoleserver"
	"github.com/watchtree/watchtree/messages"
)

// Client talks to a console through its gRPC facade: one connection to the console's address,
// on which the replies come back (it works through a port-forward). It is safe for concurrent
// use.
type Client struct {
	conn    *grpc.ClientConn
	tls     *tls.Config
	addr    string
	token   string
	who     string
	timeout time.Duration
}

// ClientOptions configure Dial. The zero value means a plaintext connection, no token, 10s per
// call.
type ClientOptions struct {
	// Token is sent with mutating requests.
	Token string
	// RequestedBy is logged by the console with every command (default "unknown").
	RequestedBy string
	// TLS, when set, secures the connection (the console's remote then needs
	// grpc.Creds in Config.RemoteOptions).
	TLS *tls.Config
	// Timeout bounds each read call when ctx has no deadline. Default 10s.
	Timeout time.Duration
}

// Errors a Client returns, matched with errors.Is.
var (
	// ErrUnreachable: nothing answers at the console's address.
	ErrUnreachable = errors.New("console unreachable")
	// ErrUnauthenticated: the console refused the token.
	ErrUnauthenticated = errors.New("console refused the token")
	// ErrTLS: the TLS handshake with the console failed: a client certificate missing or not
	// trusted by the console, a console certificate the client does not trust, or TLS on one
	// side only.
	ErrTLS = errors.New("console TLS handshake failed")
	// ErrNotFound: the console knows no such stream or dead letter.
	ErrNotFound = consoleserver.ErrNotFound
)

// BacklogEnd is the kind of the marker event Subscribe delivers after the backlog: the events
// after it are live. It carries no seq.
const BacklogEnd = consoleserver.BacklogEnd

// Dial prepares a client for the console at addr. It does not connect: the first call does, and
// fails with ErrUnreachable when nothing answers.
func Dial(addr string, o ClientOptions) (*Client, error) {
	creds := insecure.NewCredentials()
	if o.TLS != nil {
		creds = credentials.NewTLS(o.TLS)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("console: address %q: %w", addr, err)
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.RequestedBy == "" {
		o.RequestedBy = "unknown"
	}
	return &Client{conn: conn, tls: o.TLS, addr: addr, token: o.Token, who: o.RequestedBy, timeout: o.Timeout}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

func (c *Client) call(ctx context.Context, method string, req, reply proto.Message, bound time.Duration) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, bound)
		defer cancel()
	}
	err := c.conn.Invoke(ctx, "/"+consoleserver.ServiceName+"/"+method, req, reply)
	return c.wrap(err)
}

func (c *Client) wrap(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("console %s: %w", c.addr, err)
	}
	switch st.Code() {
	case codes.Unavailable:
		msg := st.Message()
		if atPreface(msg) && c.probeMongoDB() {
			// A MongoDB server closes a connection whose first bytes are not its wire
			// protocol (gRPC's HTTP/2 preface, or a TLS ClientHello) without a word, as a TLS
			// server does to a plaintext client: ask it in its own protocol before hinting at TLS.
			return fmt.Errorf("%w at %s: this is a MongoDB server, not a watchtree console: "+
				"use the address of the runtime's console (its Config.Console.Addr) (%s)", ErrUnreachable, c.addr, msg)
		}
		if c.tls != nil && tlsHint(msg, false) == "" {
			// With TLS 1.3 the server judges the client's certificate after the client's side
			// of the handshake is done: gRPC may see only the broken connection. A handshake
			// of its own and one read bring the server's alert.
			if why := c.probeTLS(); tlsHint(why, false) != "" {
				msg = why
			}
		}
		if c.tls == nil && closedAtPreface(msg) {
			// A TLS server closes a plaintext connection without a word: the client reads EOF,
			// or a reset when the server closed before it read what the client had sent.
			return fmt.Errorf("%w at %s: %s (if the console serves TLS, connect with TLS: --tls or --tls-ca)", ErrUnreachable, c.addr, msg)
		}
		if strings.Contains(msg, "looked like an HTTP/1.1 header") {
			return fmt.Errorf("%w at %s: something else answers there (HTTP/1.1), not a watchtree console (%s)", ErrUnreachable, c.addr, msg)
		}
		if hint := tlsHint(msg, c.tls != nil && len(c.tls.Certificates) > 0); hint != "" {
			return fmt.Errorf("%w with %s: %s (%s)", ErrTLS, c.addr, hint, msg)
		}
		return fmt.Errorf("%w at %s: %s", ErrUnreachable, c.addr, st.Message())
	case codes.DeadlineExceeded:
		return fmt.Errorf("console %s: no answer in time: %s: %w", c.addr, st.Message(), context.DeadlineExceeded)
	case codes.Unauthenticated:
		return fmt.Errorf("%w: %s", ErrUnauthenticated, st.Message())
	case codes.NotFound:
		return &reasonError{st.Message(), ErrNotFound}
	case codes.Unimplemented:
		// gRPC reports an HTTP server, or a gRPC server without the console's service, as
		// Unimplemented: whatever listens there is not a watchtree console.
		if msg := st.Message(); strings.Contains(msg, "unexpected HTTP status code") || strings.Contains(msg, "unknown service "+consoleserver.ServiceName) {
			return fmt.Errorf("%w at %s: something else answers there, not a watchtree console (%s)", ErrUnreachable, c.addr, msg)
		}
		return &reasonError{st.Message(), consoleserver.ErrUnsupported}
	}
	return fmt.Errorf("console %s: %s", c.addr, st.Message())
}

// probeTLS dials the console with the client's TLS configuration and reads once, and returns
// the TLS error it meets ("" when none), within 2s.
func (c *Client) probeTLS() string {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 2 * time.Second}, Config: c.tls.Clone()}
	d.Config.NextProtos = []string{"h2"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return err.Error()
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err != nil && strings.Contains(err.Error(), "tls:") {
		return err.Error()
	}
	return ""
}

// atPreface reports whether gRPC's message says the connection ended before the server's
// HTTP/2 preface or during the TLS handshake: the server hung up on what the client sent first.
func atPreface(msg string) bool {
	return strings.Contains(msg, "error reading server preface") ||
		(strings.Contains(msg, "authentication handshake failed") && (strings.Contains(msg, "EOF") || strings.Contains(msg, "connection reset by peer")))
}

// probeMongoDB reports whether a MongoDB server answers at the client's address: it sends a
// hello in the MongoDB wire protocol (OP_MSG, in plaintext) and reads the reply's header, within
// 2s.
func (c *Client) probeMongoDB() bool {
	conn, err := net.DialTimeout("tcp", c.addr, 2*time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	// {hello: 1, $db: "admin"}
	doc := []byte{0, 0, 0, 0, 0x10, 'h', 'e', 'l', 'l', 'o', 0, 1, 0, 0, 0, 0x02, '$', 'd', 'b', 0, 6, 0, 0, 0, 'a', 'd', 'm', 'i', 'n', 0, 0}
	binary.LittleEndian.PutUint32(doc, uint32(len(doc)))
	const requestID = 0x77747265 // "wtre"
	msg := make([]byte, 16+4+1, 16+4+1+len(doc))
	msg = append(msg, doc...)
	binary.LittleEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.LittleEndian.PutUint32(msg[4:], requestID)
	binary.LittleEndian.PutUint32(msg[12:], 2013) // OP_MSG; flags 0, section kind 0 follow
	if _, err := conn.Write(msg); err != nil {
		return false
	}
	var hdr [16]byte
	if _, err := io.ReadFull(conn, hdr[:]); err != nil {
		return false
	}
	opCode := binary.LittleEndian.Uint32(hdr[12:])
	return binary.LittleEndian.Uint32(hdr[8:]) == requestID && (opCode == 2013 || opCode == 1)
}

// closedAtPreface reports whether gRPC's message says the server closed the connection before
// its HTTP/2 preface (as a TLS server does to a plaintext client), with EOF or a reset.
func closedAtPreface(msg string) bool {
	return strings.Contains(msg, "error reading server preface") &&
		(strings.Contains(msg, "EOF") || strings.Contains(msg, "connection reset by peer"))
}

// tlsHint says what a transport error's TLS failure means for an operator, "" when it is none.
// withCert: the client has a certificate (Go's TLS client sends it only when the console's CA
// list accepts its issuer, so "certificate required" then means an untrusted one).
func tlsHint(msg string, withCert bool) string {
	switch {
	case strings.Contains(msg, "certificate required") && withCert:
		return "the console requires a client certificate signed by a CA it trusts, and this one is not"
	case strings.Contains(msg, "certificate required"):
		return "the console requires a client certificate (--tls-cert, --tls-key)"
	case strings.Contains(msg, "tls: bad certificate"), strings.Contains(msg, "unknown certificate authority"):
		return "the console does not trust this client certificate"
	case strings.Contains(msg, "x509:"):
		return "the console's certificate is not trusted (--tls-ca, --tls-server-name)"
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return "the console does not speak TLS"
	case strings.Contains(msg, "tls:"), strings.Contains(msg, "authentication handshake failed"):
		return "TLS handshake refused"
	}
	return ""
}

// reasonError is the console's own words for a failure, matching its sentinel (errors.Is)
// without repeating the sentinel's text.
type reasonError struct {
	reason string
	base   error
}

func (e *reasonError) Error() string { return e.reason }
func (e *reasonError) Unwrap() error { return e.base }

// Snapshot returns the instance and its streams.
func (c *Client) Snapshot(ctx context.Context, req *messages.SnapshotRequest) (*messages.SnapshotReply, error) {
	out := &messages.SnapshotReply{}
	return out, c.call(ctx, "Snapshot", req, out, c.timeout)
}

// Describe returns one stream with its latest lifecycle events.
func (c *Client) Describe(ctx context.Context, stream string, events int) (*messages.DescribeReply, error) {
	out := &messages.DescribeReply{}
	return out, c.call(ctx, "Describe", &messages.DescribeRequest{Stream: stream, Events: uint32(max(events, 0))}, out, c.timeout)
}

// Tree returns the actor hierarchy: watchtree's actors, and protoactor's own too with req.All
// (a nil req is the default request).
func (c *Client) Tree(ctx context.Context, req *messages.TreeRequest) (*messages.TreeReply, error) {
	if req == nil {
		req = &messages.TreeRequest{}
	}
	out := &messages.TreeReply{}
	return out, c.call(ctx, "Tree", req, out, c.timeout)
}

// DeadLetters lists a stream's dead letters.
func (c *Client) DeadLetters(ctx context.Context, stream string, limit int) (*messages.DeadLettersReply, error) {
	out := &messages.DeadLettersReply{}
	return out, c.call(ctx, "DeadLetters", &messages.DeadLettersRequest{Stream: stream, Limit: uint32(max(limit, 0))}, out, c.timeout)
}

// Control runs a command; the token and requester are the client's. timeout bounds it in the
// console (0: 30s). A command the console refused or that failed returns the reply and an error
// that says why (ErrUnauthenticated for a wrong token).
func (c *Client) Control(ctx context.Context, action messages.ControlAction, stream, deadLetterID string, timeout time.Duration) (*messages.ControlReply, error) {
	if timeout <= 0 {
		timeout = consoleserver.DefaultControlTimeout
	}
	return c.control(ctx, &messages.ControlRequest{Action: action, Stream: stream, DeadLetterId: deadLetterID, Token: c.token,
		RequestedBy: c.who, TimeoutMs: timeout.Milliseconds()}, timeout)
}

// Replay runs a stream's dead letter id (all of them when id is "") through its handler again,
// re-reading each event's document first when refresh is set (watchtree.ReplayOptions). The
// reply counts the dead letters replayed (Done), failed and skipped; errors as Control.
func (c *Client) Replay(ctx context.Context, stream, id string, refresh bool, timeout time.Duration) (*messages.ControlReply, error) {
	if timeout <= 0 {
		timeout = consoleserver.DefaultControlTimeout
	}
	return c.control(ctx, &messages.ControlRequest{Action: messages.ControlAction_CONTROL_ACTION_REPLAY, Stream: stream,
		DeadLetterId: id, Refresh: refresh, Token: c.token, RequestedBy: c.who, TimeoutMs: timeout.Milliseconds()}, timeout)
}

// OnDemandSnapshot starts an on-demand snapshot of a running stream (CONTROL_ACTION_SNAPSHOT)
// of the documents matching filter (MongoDB Extended JSON; "" reads every document). It
// returns once the stream accepted it; the reply's detail names the snapshot.
func (c *Client) OnDemandSnapshot(ctx context.Context, stream, filter string, timeout time.Duration) (*messages.ControlReply, error) {
	if timeout <= 0 {
		timeout = consoleserver.DefaultControlTimeout
	}
	return c.control(ctx, &messages.ControlRequest{Action: messages.ControlAction_CONTROL_ACTION_SNAPSHOT, Stream: stream,
		Filter: filter, Token: c.token, RequestedBy: c.who, TimeoutMs: timeout.Milliseconds()}, timeout)
}

func (c *Client) control(ctx context.Context, req *messages.ControlRequest, timeout time.Duration) (*messages.ControlReply, error) {
	out := &messages.ControlReply{}
	if err := c.call(ctx, "Control", req, out, timeout+5*time.Second); err != nil {
		return nil, err
	}
	if !out.GetOk() {
		var base error
		switch out.GetCode() {
		case "unauthenticated":
			base = ErrUnauthenticated
		case "not_found":
			base = ErrNotFound
		case "unsupported":
			base = consoleserver.ErrUnsupported
		case "timeout":
			base = context.DeadlineExceeded
		}
		if base != nil {
			return out, &reasonError{out.GetError(), base}
		}
		return out, errors.New(out.GetError())
	}
	return out, nil
}

// Subscribe follows the console's lifecycle events (of one stream, or all when stream is ""),
// first up to backlog past ones, calling fn for each until ctx ends (nil) or the stream breaks
// (an error). fn runs on the caller's goroutine.
func (c *Client) Subscribe(ctx context.Context, stream string, backlog int, fn func(*messages.LifecycleEvent)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := c.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/"+consoleserver.ServiceName+"/Subscribe")
	if err != nil {
		return c.wrap(err)
	}
	if err := s.SendMsg(&messages.SubscribeRequest{Stream: stream, Backlog: uint32(max(backlog, 0))}); err != nil {
		return c.wrap(err)
	}
	if err := s.CloseSend(); err != nil {
		return c.wrap(err)
	}
	for {
		ev := &messages.LifecycleEvent{}
		if err := s.RecvMsg(ev); err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return c.wrap(err)
		}
		fn(ev)
	}
}
