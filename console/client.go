package console

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/watchtree/watchtree/messages"
)

// Client talks to a console through its gRPC facade: one connection to the console's address,
// on which the replies come back (it works through a port-forward). It is safe for concurrent
// use.
type Client struct {
	conn    *grpc.ClientConn
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
)

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
	return &Client{conn: conn, addr: addr, token: o.Token, who: o.RequestedBy, timeout: o.Timeout}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

func (c *Client) call(ctx context.Context, method string, req, reply proto.Message, bound time.Duration) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, bound)
		defer cancel()
	}
	err := c.conn.Invoke(ctx, "/"+ServiceName+"/"+method, req, reply)
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
		return fmt.Errorf("%w at %s: %s", ErrUnreachable, c.addr, st.Message())
	case codes.DeadlineExceeded:
		return fmt.Errorf("console %s: no answer in time: %s: %w", c.addr, st.Message(), context.DeadlineExceeded)
	case codes.Unauthenticated:
		return fmt.Errorf("%w: %s", ErrUnauthenticated, st.Message())
	case codes.NotFound:
		return fmt.Errorf("%s: %w", st.Message(), ErrNotFound)
	case codes.Unimplemented:
		return fmt.Errorf("%s: %w", st.Message(), ErrUnsupported)
	}
	return fmt.Errorf("console %s: %s", c.addr, st.Message())
}

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

// Tree returns the actor hierarchy.
func (c *Client) Tree(ctx context.Context) (*messages.TreeReply, error) {
	out := &messages.TreeReply{}
	return out, c.call(ctx, "Tree", &messages.TreeRequest{}, out, c.timeout)
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
		timeout = defaultControlTimeout
	}
	return c.control(ctx, &messages.ControlRequest{Action: action, Stream: stream, DeadLetterId: deadLetterID, Token: c.token,
		RequestedBy: c.who, TimeoutMs: timeout.Milliseconds()}, timeout)
}

// OnDemandSnapshot starts an on-demand snapshot of a running stream (CONTROL_ACTION_SNAPSHOT)
// of the documents matching filter (MongoDB Extended JSON; "" reads every document). It
// returns once the stream accepted it; the reply's detail names the snapshot.
func (c *Client) OnDemandSnapshot(ctx context.Context, stream, filter string, timeout time.Duration) (*messages.ControlReply, error) {
	if timeout <= 0 {
		timeout = defaultControlTimeout
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
			base = ErrUnsupported
		case "timeout":
			base = context.DeadlineExceeded
		}
		if base != nil {
			return out, fmt.Errorf("%s: %w", out.GetError(), base)
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
	s, err := c.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/"+ServiceName+"/Subscribe")
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
