package consoleserver

import (
	"errors"

	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/watchtree/watchtree/messages"
)

// The facade serves the console's gRPC service ("/watchtree.v1.Console/<Method>") on protoactor
// remote's own gRPC server, as its unknown-service handler: one port serves both. It exists
// because protoactor remote delivers a reply by dialing the requester's advertised address: a
// CLI behind a port-forward or NAT never gets one. The facade's replies travel back on the
// caller's own connection. Each call is handed to the console actor as the same message a
// remote peer would send, so both paths get the same answers and the same checks.

// ServiceName is the facade's gRPC service.
const ServiceName = "watchtree.v1.Console"

type facade struct {
	sys  *actor.ActorSystem
	pid  *actor.PID
	log  *zap.Logger
	done chan struct{}
	once sync.Once
}

func newFacade(sys *actor.ActorSystem, pid *actor.PID, log *zap.Logger) *facade {
	return &facade{sys: sys, pid: pid, log: log, done: make(chan struct{})}
}

func (f *facade) close() { f.once.Do(func() { close(f.done) }) }

func (f *facade) handle(_ any, stream grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(stream)
	name, ok := strings.CutPrefix(method, "/"+ServiceName+"/")
	if !ok {
		return status.Errorf(codes.Unimplemented, "unknown service method %s", method)
	}
	switch name {
	case "Snapshot":
		return f.unary(stream, &messages.SnapshotRequest{}, 0)
	case "Describe":
		return f.unary(stream, &messages.DescribeRequest{}, 0)
	case "Tree":
		return f.unary(stream, &messages.TreeRequest{}, 0)
	case "DeadLetters":
		return f.unary(stream, &messages.DeadLettersRequest{}, 0)
	case "Control":
		return f.control(stream)
	case "Subscribe":
		return f.subscribe(stream)
	}
	return status.Errorf(codes.Unimplemented, "unknown method %s", method)
}

// readBound is the facade's wait for a read reply: the console's own timeout answers first.
const readBound = 15 * time.Second

func (f *facade) unary(stream grpc.ServerStream, req proto.Message, bound time.Duration) error {
	if err := stream.RecvMsg(req); err != nil {
		return status.Errorf(codes.InvalidArgument, "decode %T: %v", req, err)
	}
	return f.ask(stream, req, bound)
}

func (f *facade) control(stream grpc.ServerStream) error {
	req := &messages.ControlRequest{}
	if err := stream.RecvMsg(req); err != nil {
		return status.Errorf(codes.InvalidArgument, "decode ControlRequest: %v", err)
	}
	who := req.GetRequestedBy()
	if who == "" {
		who = "anonymous"
	}
	if p, ok := peer.FromContext(stream.Context()); ok {
		who += " via " + p.Addr.String()
	}
	req.RequestedBy = who
	t := time.Duration(req.GetTimeoutMs()) * time.Millisecond
	if t <= 0 {
		t = DefaultControlTimeout
	}
	return f.ask(stream, req, min(t, maxControlTimeout)+2*time.Second)
}

func (f *facade) ask(stream grpc.ServerStream, req proto.Message, bound time.Duration) error {
	if bound <= 0 {
		bound = readBound
	}
	if dl, ok := stream.Context().Deadline(); ok {
		bound = min(bound, time.Until(dl))
	}
	res, err := f.sys.Root.RequestFuture(f.pid, req, bound).Result()
	switch {
	case errors.Is(err, actor.ErrTimeout):
		return status.Errorf(codes.DeadlineExceeded, "the console did not answer within %v", bound.Round(time.Millisecond))
	case err != nil:
		return status.Errorf(codes.Unavailable, "console: %v", err)
	}
	if ce, ok := res.(*messages.ConsoleError); ok {
		return status.Error(grpcCode(ce.GetCode()), ce.GetError())
	}
	m, ok := res.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "console: unexpected reply %T", res)
	}
	return stream.SendMsg(m)
}

func grpcCode(code string) codes.Code {
	switch code {
	case "not_found":
		return codes.NotFound
	case "invalid":
		return codes.InvalidArgument
	case "unauthenticated":
		return codes.Unauthenticated
	case "unsupported":
		return codes.Unimplemented
	case "timeout":
		return codes.DeadlineExceeded
	case "exhausted":
		return codes.ResourceExhausted
	case "unavailable":
		// MongoDB does not answer; the console does (codes.Unavailable would read as the
		// console being unreachable).
		return codes.FailedPrecondition
	}
	return codes.Internal
}

// relay receives a subscription's events as an actor and hands them to the facade's stream
// through a channel. The console sends it at most the subscription's window of events before
// the facade acknowledges them, so the channel (of that size) does not fill; should it, the
// event is dropped and counted with the console's own drops.
type relay struct {
	ch      chan *messages.LifecycleEvent
	dropped atomic.Uint64
}

func (r *relay) Receive(ctx actor.Context) {
	if ev, ok := ctx.Message().(*messages.LifecycleEvent); ok {
		select {
		case r.ch <- ev:
		default:
			r.dropped.Add(1)
		}
	}
}

func (f *facade) subscribe(stream grpc.ServerStream) error {
	req := &messages.SubscribeRequest{}
	if err := stream.RecvMsg(req); err != nil {
		return status.Errorf(codes.InvalidArgument, "decode SubscribeRequest: %v", err)
	}
	window := int(req.GetWindow())
	if window == 0 {
		window = defaultWindow
	}
	r := &relay{ch: make(chan *messages.LifecycleEvent, min(window, maxWindow))}
	rpid := f.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return r }))
	defer f.sys.Root.Stop(rpid) // the console watches it and drops the subscription
	req.SubscriberAddress, req.SubscriberId = rpid.Address, rpid.Id
	res, err := f.sys.Root.RequestFuture(f.pid, req, readBound).Result()
	if err != nil {
		return status.Errorf(codes.Unavailable, "console: subscribe: %v", err)
	}
	if ce, ok := res.(*messages.ConsoleError); ok {
		return status.Error(grpcCode(ce.GetCode()), ce.GetError())
	}
	if err := stream.SendHeader(nil); err != nil {
		return err
	}
	for {
		select {
		case ev := <-r.ch:
			ev.Dropped += r.dropped.Load() // ev is this subscription's own copy
			if err := stream.SendMsg(ev); err != nil {
				return err
			}
			f.sys.Root.Send(f.pid, &messages.SubscriptionAck{Id: ev.GetSubscription(), Received: ev.GetDelivered()})
		case <-stream.Context().Done():
			return nil
		case <-f.done:
			return status.Error(codes.Unavailable, "console: stopping")
		}
	}
}
