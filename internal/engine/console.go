package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/watchtree/watchtree/internal/consoleserver"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/store"
)

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

// startConsoleLocked starts the console on the runtime's actor system; rt.mu is held.
func (rt *Runtime) startConsoleLocked() error {
	if rt.cfg.Console.Addr == "" {
		return nil
	}
	cc := rt.cfg.Console
	cc.Logger, cc.Clock = rt.log.Named("console"), rt.clk
	srv, err := consoleserver.Start(rt.sys, consoleBackend{rt}, cc)
	if err != nil {
		return fmt.Errorf("watchtree: start: %w", err)
	}
	rt.console = srv
	return nil
}

// consoleBackend is what the console reads and changes through the runtime. Stream lifecycle
// commands do not pass here: the console sends them to the supervisors itself.
type consoleBackend struct{ rt *Runtime }

func (b consoleBackend) Instance() consoleserver.Instance {
	host, _ := os.Hostname()
	return consoleserver.Instance{ID: b.rt.cfg.InstanceID, Name: b.rt.cfg.InstanceName, Host: host, Version: ModuleVersion(),
		StartedAt: b.rt.startedAt, Warnings: b.rt.instanceWarnings()}
}

// ModuleVersion is watchtree's version as built into the binary (watchtree.Version).
func ModuleVersion() string {
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

func (b consoleBackend) Streams() []consoleserver.StreamRef {
	b.rt.mu.Lock()
	entries := b.rt.entriesLocked()
	b.rt.mu.Unlock()
	out := make([]consoleserver.StreamRef, 0, len(entries))
	for _, e := range entries {
		ns := e.watcher.Database
		if e.spec.Collection != "" {
			ns += "." + e.spec.Collection
		}
		l := e.Local()
		out = append(out, consoleserver.StreamRef{Name: l.Name, Namespace: ns, Mode: l.Mode, Cursor: l.Cursor,
			Warnings: l.Warnings, Supervisor: e.SupervisorPID()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func consoleErr(err error) error {
	switch {
	case errors.Is(err, ErrUnknownStream) || errors.Is(err, store.ErrNotFound):
		return notFoundErr{err}
	case errors.Is(err, ErrReplayUnavailable):
		return alsoErr{err, consoleserver.ErrUnsupported}
	}
	return err
}

// alsoErr reads as err and matches also too.
type alsoErr struct{ err, also error }

func (e alsoErr) Error() string   { return e.err.Error() }
func (e alsoErr) Unwrap() []error { return []error{e.err, e.also} }

// notFoundErr reads as err and matches consoleserver.ErrNotFound too.
type notFoundErr struct{ err error }

func (e notFoundErr) Error() string   { return e.err.Error() }
func (e notFoundErr) Unwrap() []error { return []error{e.err, consoleserver.ErrNotFound} }

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
		ok, note := b.rt.ReplayCheck(stream, d)
		out[i] = &messages.DeadLetterInfo{Id: d.ID, OperationType: d.OperationType, DocumentKey: key,
			Error: d.Error, ErrorType: d.ErrorType, Attempts: uint32(d.Attempts), CreatedAt: timestamppb.New(d.CreatedAt),
			ReplayCount: uint32(d.ReplayCount), Replayable: ok, ReplayNote: note, Stack: d.Stack}
	}
	return out, nil
}

func (b consoleBackend) Replay(ctx context.Context, stream, id string, refresh bool) error {
	return consoleErr(b.rt.Replay(ctx, stream, id, ReplayOptions{Refresh: refresh}))
}

func (b consoleBackend) Purge(ctx context.Context, stream, id string) error {
	return consoleErr(b.rt.Purge(ctx, stream, id))
}

func (b consoleBackend) Readings(ctx context.Context) Readings { return b.rt.Readings(ctx, 0) }
