package consoleserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/watchtree/watchtree/messages"
)

// Server is a running console: the inspector actor, and when Config.Addr is set, protoactor
// remote with the guard and the gRPC facade on that address.
type Server struct {
	cfg    Config
	sys    *actor.ActorSystem
	pid    *actor.PID
	remote *remote.Remote
	facade *facade
	addr   string

	stopOnce sync.Once
}

// Start spawns the console actor on sys under cfg.Name and, when cfg.Addr is set, starts
// protoactor remote on sys listening there, with the guard's interceptors and the facade. A
// system that already has a remote is refused (its server cannot take the guard), as is an
// address that cannot be listened on.
func Start(sys *actor.ActorSystem, b Backend, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, sys: sys}
	pid, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return newInspector(cfg, b) }), cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("console: spawn the console actor %q: %w", cfg.Name, err)
	}
	s.pid = pid
	if cfg.Addr == "" {
		return s, nil
	}
	if err := s.startRemote(); err != nil {
		_ = sys.Root.StopFuture(pid).Wait()
		return nil, err
	}
	return s, nil
}

func (s *Server) startRemote() (err error) {
	// ExtensionID reads a package variable only, so a nil *Remote answers it.
	if s.sys.Extensions.Get((*remote.Remote)(nil).ExtensionID()) != nil {
		return errors.New("console: the actor system already runs protoactor remote; the console needs to start it (its guard is part of the server)")
	}
	// remote.Start panics when it cannot listen: check first, for a clear error.
	lis, lerr := net.Listen("tcp", s.cfg.Addr)
	if lerr != nil {
		return fmt.Errorf("console: listen on %s: %w", s.cfg.Addr, lerr)
	}
	_ = lis.Close()
	host, port, _ := net.SplitHostPort(s.cfg.Addr)
	var p int
	if _, err := fmt.Sscan(port, &p); err != nil {
		return fmt.Errorf("console: Console.Addr port %q: %w", port, err)
	}
	g := &guard{log: s.cfg.Logger, actorID: s.pid.Id}
	s.facade = newFacade(s.sys, s.pid, s.cfg.Logger)
	rc := remote.Configure(host, p, append([]remote.ConfigOption{dialOnce}, s.cfg.RemoteOptions...)...)
	rc.DialOptions = append(rc.DialOptions, grpc.WithConnectParams(grpc.ConnectParams{
		Backoff: backoff.DefaultConfig, MinConnectTimeout: dialTimeout}))
	rc.ServerOptions = append(rc.ServerOptions, g.serverOptions()...)
	rc.ServerOptions = append(rc.ServerOptions, grpc.UnknownServiceHandler(s.facade.handle))
	r := remote.NewRemote(s.sys, rc)
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("console: start protoactor remote on %s: %v", s.cfg.Addr, p)
		}
	}()
	r.Start()
	s.remote = r
	s.addr = s.sys.Address()
	s.cfg.Logger.Info("console listening", zap.String("address", s.addr), zap.String("actor", s.pid.Id),
		zap.Bool("token_required", s.cfg.Token != ""))
	return nil
}

// protoactor remote sends to a peer (a reply, a feed event, a watch) through an endpoint writer
// that dials the peer's advertised address when it starts: MaxRetryCount attempts with a fixed
// 2 s pause after each failure, all on the writer's mailbox goroutine, and remote.Shutdown waits
// for every writer to finish. With protoactor's 5 attempts, a peer that went away (a CLI that
// quit, one behind a port-forward) held Stop about 10 s. The console makes one attempt, with the
// connection bounded by dialTimeout: Stop then waits at most dialTimeout plus the one 2 s pause,
// and a peer that asks again gets a fresh dial. Options in Config.RemoteOptions that set
// MaxRetryCount override this.
const dialTimeout = time.Second

func dialOnce(c *remote.Config) { c.MaxRetryCount = 1 }

// Addr returns the address the console listens on ("" when Config.Addr is empty).
func (s *Server) Addr() string { return s.addr }

// actorPID returns the console actor.
func (s *Server) actorPID() *actor.PID { return s.pid }

// publish hands a lifecycle event to the console (numbered, kept and sent to the subscribers).
// It never blocks.
func (s *Server) publish(ev *messages.LifecycleEvent) { s.sys.Root.Send(s.pid, ev) }

// Stop ends the facade's live feeds, stops the console actor, then protoactor remote (when the
// console started it), bounded by ctx. The actor goes first: once it and its goroutines are done
// nothing of the console sends to a peer any more, so no reply starts a dial to a peer while the
// remote shuts down (protoactor's endpoint manager does not synchronise a send with its stop).
func (s *Server) Stop(ctx context.Context) error {
	var err error
	s.stopOnce.Do(func() {
		if s.facade != nil {
			s.facade.close()
		}
		fut := s.sys.Root.StopFuture(s.pid)
		stopped := make(chan error, 1)
		go func() { stopped <- fut.Wait() }()
		select {
		case e := <-stopped:
			if e != nil && !errors.Is(e, actor.ErrDeadLetter) {
				err = fmt.Errorf("console: stop the console actor: %w", e)
			}
		case <-ctx.Done():
			err = fmt.Errorf("console: the console actor did not stop: %w", ctx.Err())
		}
		if s.remote != nil {
			done := make(chan struct{})
			go func() { defer close(done); s.remote.Shutdown(true) }()
			select {
			case <-done:
			case <-ctx.Done():
				err = errors.Join(err, fmt.Errorf("console: protoactor remote did not stop: %w", ctx.Err()))
			}
		}
	})
	return err
}
