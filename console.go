package watchtree

import (
	"time"

	"github.com/asynkron/protoactor-go/remote"

	"github.com/watchtree/watchtree/internal/consoleserver"
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

// config is the console's configuration (the runtime adds its logger and clock).
func (c ConsoleConfig) config() consoleserver.Config {
	return consoleserver.Config{Addr: c.Addr, Token: c.Token, RemoteOptions: c.RemoteOptions, RequestTimeout: c.RequestTimeout}
}

// ConsoleAddr returns the address the console listens on, "" when it is off or the runtime is
// not started.
func (rt *Runtime) ConsoleAddr() string { return rt.e.ConsoleAddr() }
