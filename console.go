package watchtree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"go.mongodb.org/mongo-driver/v2/bson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/watchtree/watchtree/console"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/store"
)

// ConsoleConfig turns on the remote console (Config.Console): the inspector actor, reachable
// over protoactor remote, and on the same port its gRPC facade, which the watchtree CLI uses.
// The zero value means off.
type ConsoleConfig struct {
	// Addr is the host:port the console listens on, e.g. "127.0.0.1:8090". An empty host
	// (":8090") binds 127.0.0.1; port 0 picks a free one (Runtime.ConsoleAddr reports it).
	// Listening beyond loopback requires a Token. Default empty, which means no console.
	Addr string
	// Token, when set, is required by every mutating command (start, stop, restart, replay,
	// purge, lease release); reads need none. Every command is logged with who asked. Default
	// none: no command needs one, so New refuses an Addr beyond loopback.
	Token string
	// RemoteOptions are passed to protoactor remote, e.g. TLS:
	//	remote.WithServerOptions(grpc.Creds(credentials.NewTLS(serverTLS)))
	// The console adds its guard interceptors and facade after them. Default none.
	RemoteOptions []remote.ConfigOption
	// RequestTimeout bounds each read request inside the console. Default 10s.
	RequestTimeout time.Duration
}

func (c ConsoleConfig) console(rt *Runtime) console.Config {
	cc := console.Config{Addr: c.Addr, Token: c.Token, RemoteOptions: c.RemoteOptions, RequestTimeout: c.RequestTimeout}
	if rt != nil {
		cc.Logger, cc.Clock = rt.log.Named("console"), rt.clk
	}
	return cc
}

// ConsoleAddr returns the address the console listens on, "" when it is off or the runtime is
// not started.
func (rt *Runtime) ConsoleAddr() string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.console == nil {
		return ""
	}
	return rt.console.Addr()
}

// startConsole starts the console on the runtime's actor system; rt.mu is held.
func (rt *Runtime) startConsoleLocked() error {
	if rt.cfg.Console.Addr == "" {
		return nil
	}
	srv, err := console.Start(rt.sys, consoleBackend{rt}, rt.cfg.Console.console(rt))
	if err != nil {
		return fmt.Errorf("watchtree: start: %w", err)
	}
	rt.console = srv
	return nil
}

// consoleBackend is what the console reads and changes through the runtime. Stream lifecycle
// commands do not pass here: the console sends them to the supervisors itself.
type consoleBackend struct{ rt *Runtime }

func (b consoleBackend) Instance() console.Instance {
	host, _ := os.Hostname()
	return console.Instance{ID: b.rt.cfg.InstanceID, Host: host, Version: moduleVersion(), StartedAt: b.rt.startedAt}
}

// moduleVersion is watchtree's version as built into the binary.
func moduleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if bi.Main.Path == "github.com/watchtree/watchtree" {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == "github.com/watchtree/watchtree" {
			return d.Version
		}
	}
	return "unknown"
}

func (b consoleBackend) Streams() []console.StreamRef {
	b.rt.mu.Lock()
	entries := make([]*streamEntry, 0, len(b.rt.streams))
	for _, e := range b.rt.streams {
		entries = append(entries, e)
	}
	b.rt.mu.Unlock()
	out := make([]console.StreamRef, 0, len(entries))
	for _, e := range entries {
		ns := e.watcher.Database
		if e.cs.Collection != "" {
			ns += "." + e.cs.Collection
		}
		mode := "all-instances"
		if e.cs.SingleLeader {
			mode = "single-leader"
		}
		out = append(out, console.StreamRef{Name: e.name, Namespace: ns, Mode: mode, Supervisor: e.supervisorPID()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func consoleErr(err error) error {
	if errors.Is(err, ErrUnknownStream) || errors.Is(err, store.ErrNotFound) {
		return notFoundErr{err}
	}
	return err
}

// notFoundErr reads as err and matches console.ErrNotFound too.
type notFoundErr struct{ err error }

func (e notFoundErr) Error() string   { return e.err.Error() }
func (e notFoundErr) Unwrap() []error { return []error{e.err, console.ErrNotFound} }

func (b consoleBackend) DeadLetters(ctx context.Context, stream string, limit int) ([]*messages.DeadLetterInfo, error) {
	list, err := b.rt.DeadLetters(ctx, stream, limit)
	if err != nil {
		return nil, consoleErr(err)
	}
	out := make([]*messages.DeadLetterInfo, len(list))
	for i, d := range list {
		key := ""
		if len(d.DocumentKey) > 0 {
			if j, err := bson.MarshalExtJSON(d.DocumentKey, false, false); err == nil {
				key = string(j)
			}
		}
		out[i] = &messages.DeadLetterInfo{Id: d.ID, OperationType: string(d.OperationType), DocumentKey: key,
			Error: d.Error, ErrorType: d.ErrorType, Attempts: uint32(d.Attempts), CreatedAt: timestamppb.New(d.CreatedAt),
			ReplayCount: uint32(d.ReplayCount), Replayable: !d.EventOmitted && len(d.Event) > 0}
	}
	return out, nil
}

func (b consoleBackend) Replay(ctx context.Context, stream, id string) error {
	return consoleErr(b.rt.Replay(ctx, stream, id))
}

func (b consoleBackend) Purge(ctx context.Context, stream, id string) error {
	e, err := b.rt.deadLetterEntry(stream)
	if err != nil {
		return consoleErr(err)
	}
	if err := e.store.DeadLetters.DeleteDeadLetter(ctx, e.records, id); err != nil {
		return consoleErr(fmt.Errorf("watchtree: stream %q: purge %s: %w", stream, id, err))
	}
	e.log.Info("dead letter purged")
	return nil
}

func (b consoleBackend) CountDeadLetters(ctx context.Context, stream string) (int, error) {
	n, err := b.rt.CountDeadLetters(ctx, stream)
	return n, consoleErr(err)
}

func (b consoleBackend) OplogWindow(ctx context.Context) (oldest, newest time.Time, err error) {
	return b.rt.OplogWindow(ctx)
}
