package consoleserver

import (
	"fmt"
	"net"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/clock"
)

// Config configures the console. The zero value of each field but Addr means its default.
type Config struct {
	// Addr is the host:port protoactor remote and the console's gRPC facade listen on (one
	// port). An empty host (":8090") binds 127.0.0.1. "" means the console actor is spawned but
	// not reachable from outside the process. Port 0 picks a free port (Server.Addr reports it).
	Addr string
	// Token, when set, is required by every mutating request (ControlRequest.token). Reads
	// need none. A non-loopback Addr needs a Token (Validate refuses it otherwise).
	Token string
	// RemoteOptions are passed to protoactor remote (remote.Configure), e.g.
	// remote.WithServerOptions(grpc.Creds(tlsCreds)) for TLS. The console adds its guard
	// interceptors and facade after them.
	RemoteOptions []remote.ConfigOption
	// Name is the console actor's name (its PID id). Default "console".
	Name string
	// RequestTimeout bounds every read request (Snapshot, Describe, Tree, DeadLetters) inside
	// the console. Default 10s. A ControlRequest has its own (timeout_ms, default 30s, at most
	// 5 min).
	RequestTimeout time.Duration
	// SampleInterval is how often the console samples each stream's settlement count for the
	// events/s figure. Default 1s.
	SampleInterval time.Duration
	// Logger receives the audit log of commands and the guard's refusals. Default zap.NewNop().
	Logger *zap.Logger
	// Clock is for tests. Default the real clock.
	Clock clock.Clock
}

// FieldError is a broken rule of Config: Field names the field ("Addr", "Token").
type FieldError struct {
	// Field is the field's name, Rule the broken rule with the value, e.g. "must be host:port".
	Field, Rule string
}

// Error returns "console: Config.<Field> <Rule>".
func (e *FieldError) Error() string { return "console: Config." + e.Field + " " + e.Rule }

// Validate checks c: Addr must be host:port, and a host other than a loopback address (or
// "localhost"; an empty host binds 127.0.0.1) needs a Token. It returns a *FieldError.
func (c Config) Validate() error {
	if c.RequestTimeout < 0 {
		return &FieldError{"RequestTimeout", fmt.Sprintf("must be >= 0 (0 means the default 10s), got %v", c.RequestTimeout)}
	}
	if c.SampleInterval < 0 {
		return &FieldError{"SampleInterval", fmt.Sprintf("must be >= 0 (0 means the default 1s), got %v", c.SampleInterval)}
	}
	if c.Addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return &FieldError{"Addr", fmt.Sprintf("must be host:port, got %q", c.Addr)}
	}
	if c.Token == "" && host != "" && !isLoopback(host) {
		return &FieldError{"Token", fmt.Sprintf("is required when Addr listens beyond loopback, got Addr %q and no token", c.Addr)}
	}
	return nil
}

// isLoopback reports whether host is "localhost" or a loopback IP. An empty host (all
// interfaces) is not.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (c Config) withDefaults() Config {
	if host, port, err := net.SplitHostPort(c.Addr); err == nil && host == "" {
		c.Addr = net.JoinHostPort("127.0.0.1", port)
	}
	if c.Name == "" {
		c.Name = "console"
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 10 * time.Second
	}
	if c.SampleInterval == 0 {
		c.SampleInterval = time.Second
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	return c
}
