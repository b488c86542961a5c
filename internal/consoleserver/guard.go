package consoleserver

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/asynkron/protoactor-go/remote"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// The guard stands between the network and protoactor remote's gRPC server. At this version
// protoactor kills the process on several peer inputs: its ListProcesses and
// GetProcessDiagnostics RPCs panic ("implement me"), an envelope naming an unregistered protobuf
// type dereferences nil, and an out-of-range type, sender or target index panics. gRPC does not
// recover handler panics. The guard:
//   - answers the unimplemented RPCs with Unimplemented without calling them;
//   - checks every MessageBatch a peer sends before protoactor reads it: every type name must be
//     registered, every index in range, and every envelope must target the console actor (so a
//     peer cannot Stop a supervisor or post to any other actor); system messages are limited to
//     Watch, Unwatch and Terminated. A batch that breaks a rule ends that peer's stream with
//     InvalidArgument and is logged;
//   - recovers any other panic of a handler into an Internal error, logged with its stack.

const (
	remotingReceive       = "/remote.Remoting/Receive"
	remotingListProcesses = "/remote.Remoting/ListProcesses"
	remotingDiagnostics   = "/remote.Remoting/GetProcessDiagnostics"
)

type guard struct {
	log     *zap.Logger
	actorID string // the console actor's PID id: the only target a peer may send to
}

func (g *guard) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(g.unary),
		grpc.ChainStreamInterceptor(g.stream),
	}
}

func (g *guard) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	switch info.FullMethod {
	case remotingListProcesses, remotingDiagnostics:
		g.log.Warn("console: refused an unimplemented protoactor RPC", zap.String("method", info.FullMethod))
		return nil, status.Errorf(codes.Unimplemented, "%s is not implemented", info.FullMethod)
	}
	defer func() {
		if p := recover(); p != nil {
			err = g.recovered(info.FullMethod, p)
		}
	}()
	return handler(ctx, req)
}

func (g *guard) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = g.recovered(info.FullMethod, p)
		}
	}()
	if info.FullMethod == remotingReceive {
		ss = &checkedStream{ServerStream: ss, g: g}
	}
	return handler(srv, ss)
}

func (g *guard) recovered(method string, p any) error {
	g.log.Error("console: recovered a panic in the remote's gRPC server; the process goes on",
		zap.String("method", method), zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
	return status.Errorf(codes.Internal, "internal error in %s", method)
}

// checkedStream validates what a peer sends on protoactor's Receive stream.
type checkedStream struct {
	grpc.ServerStream
	g *guard
}

func (s *checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	rm, ok := m.(*remote.RemoteMessage)
	if !ok {
		return nil
	}
	if b := rm.GetMessageBatch(); b != nil {
		if err := s.g.checkBatch(b); err != nil {
			s.g.log.Warn("console: refused a remote message batch", zap.Error(err))
			return status.Error(codes.InvalidArgument, err.Error())
		}
	}
	return nil
}

// internalPackage prefixes the tree's private actor-to-actor messages: registered in this
// process, but never accepted from a peer.
const internalPackage = "watchtree.internal."

// systemTypes are the system messages a peer may send to the console: the remote watch protocol.
var systemTypes = map[string]bool{"actor.Watch": true, "actor.Unwatch": true, "actor.Terminated": true}

// otherSystemTypes are the remaining protoactor system messages, refused from peers.
var otherSystemTypes = map[string]bool{"actor.Stop": true, "actor.PoisonPill": true, "actor.Touch": true}

func (g *guard) checkBatch(b *remote.MessageBatch) error {
	for i, name := range b.TypeNames {
		if _, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(name)); err != nil {
			return fmt.Errorf("type_names[%d] %q is not a registered protobuf message", i, name)
		}
		if strings.HasPrefix(name, internalPackage) {
			return fmt.Errorf("type_names[%d] %q is a stream tree's private message, not part of the console protocol", i, name)
		}
	}
	for i, t := range b.Targets {
		if t == nil || !(t.Id == g.actorID || strings.HasPrefix(t.Id, g.actorID+"/")) {
			return fmt.Errorf("targets[%d] %v is not the console actor %q", i, t, g.actorID)
		}
	}
	for i, e := range b.Envelopes {
		if e == nil {
			return fmt.Errorf("envelopes[%d] is empty", i)
		}
		if e.TypeId < 0 || int(e.TypeId) >= len(b.TypeNames) {
			return fmt.Errorf("envelopes[%d].type_id %d out of range (%d type names)", i, e.TypeId, len(b.TypeNames))
		}
		if e.Target < 0 || int(e.Target) >= len(b.Targets) {
			return fmt.Errorf("envelopes[%d].target %d out of range (%d targets)", i, e.Target, len(b.Targets))
		}
		if e.Sender < 0 || int(e.Sender) > len(b.Senders) || (e.Sender > 0 && b.Senders[e.Sender-1] == nil) {
			return fmt.Errorf("envelopes[%d].sender %d out of range (%d senders)", i, e.Sender, len(b.Senders))
		}
		if e.SerializerId != 0 {
			return fmt.Errorf("envelopes[%d].serializer_id %d: only protobuf (0) is accepted", i, e.SerializerId)
		}
		name := b.TypeNames[e.TypeId]
		if otherSystemTypes[name] || (strings.HasPrefix(name, "actor.") && !systemTypes[name] && name != "actor.PID") {
			return fmt.Errorf("envelopes[%d]: system message %q refused", i, name)
		}
	}
	return nil
}
