// Command watchtree is the operator's CLI for a watchtree runtime's console: it lists streams,
// describes one, shows the actor tree, follows lifecycle events and dead letters, starts, stops
// and restarts streams, replays or purges dead letters, and shows everything live in `top`.
//
// It talks to the console's gRPC facade, on the same port as the runtime's protoactor remote
// (Config.Console.Addr), over one connection the replies come back on: it works through a
// port-forward.
//
//	watchtree --addr 127.0.0.1:8090 streams
//	watchtree describe orders -o json
//	watchtree restart orders --token "$WATCHTREE_TOKEN"
//	watchtree top
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/watchtree/watchtree/console"
	"github.com/watchtree/watchtree/messages"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the CLI and returns the exit code: 0, 1 for a failed command, 2 for bad usage.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := &opts{out: stdout}
	root := newRoot(o)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		msg := err.Error()
		if errors.Is(err, console.ErrUnauthenticated) {
			msg += " (give it with --token or $WATCHTREE_TOKEN)"
		}
		fmt.Fprintln(stderr, "watchtree:", strings.TrimPrefix(msg, "watchtree: "))
		var ue usageError
		if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command ") {
			return 2
		}
		return 1
	}
	return 0
}

type usageError struct{ error }

type opts struct {
	out           io.Writer
	addr, token   string
	output        string
	timeout       time.Duration
	tlsCA, tlsSNI string
	tlsCert       string
	tlsKey        string
	useTLS        bool
}

func newRoot(o *opts) *cobra.Command {
	root := &cobra.Command{
		Use:           "watchtree",
		Short:         "Operate a watchtree runtime through its console",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if o.output != "table" && o.output != "json" {
				return usageError{fmt.Errorf("-o must be table or json, got %q", o.output)}
			}
			if (o.tlsCert == "") != (o.tlsKey == "") {
				return usageError{errors.New("--tls-cert and --tls-key go together")}
			}
			addrs := strings.Split(o.addr, ",") // top takes several
			for i, a := range addrs {
				addr, err := consoleAddr(strings.TrimSpace(a))
				if err != nil {
					return usageError{err}
				}
				addrs[i] = addr
			}
			o.addr = strings.Join(addrs, ",")
			return nil
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&o.addr, "addr", envOr("WATCHTREE_CONSOLE", "127.0.0.1:8090"), "console address (host:port, or a port on 127.0.0.1; env WATCHTREE_CONSOLE)")
	pf.StringVar(&o.token, "token", os.Getenv("WATCHTREE_TOKEN"), "console token for mutating commands (env WATCHTREE_TOKEN)")
	pf.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	pf.DurationVar(&o.timeout, "timeout", 10*time.Second, "bound of each request (a stop or restart gets at least 30s)")
	pf.BoolVar(&o.useTLS, "tls", false, "connect with TLS (system roots unless --tls-ca)")
	pf.StringVar(&o.tlsCA, "tls-ca", "", "PEM file of the CA that signed the console's certificate (implies --tls)")
	pf.StringVar(&o.tlsSNI, "tls-server-name", "", "server name to verify in the console's certificate")
	pf.StringVar(&o.tlsCert, "tls-cert", "", "PEM file of the client certificate, for a console that requires one (with --tls-key; implies --tls)")
	pf.StringVar(&o.tlsKey, "tls-key", "", "PEM file of the client certificate's private key (with --tls-cert)")
	root.AddCommand(streamsCmd(o), describeCmd(o), treeCmd(o), eventsCmd(o), deadLettersCmd(o),
		controlCmd(o, "start", "Start a stopped or crashed stream (during backoff: restart now)", messages.ControlAction_CONTROL_ACTION_START),
		controlCmd(o, "stop", "Stop a stream gracefully: the cursor closes, in-flight events drain, the checkpoint is written", messages.ControlAction_CONTROL_ACTION_STOP),
		controlCmd(o, "restart", "Restart a stream: drain, write the checkpoint, reopen the cursor from it", messages.ControlAction_CONTROL_ACTION_RESTART),
		replayCmd(o),
		deadLetterCmd(o, "purge", "Delete a stream's dead letters (all, or --id)", messages.ControlAction_CONTROL_ACTION_PURGE),
		snapshotCmd(o), leaseCmd(o), topCmd(o))
	return root
}

// consoleAddr checks --addr: host:port as it is, a bare port as 127.0.0.1:port, and a gRPC
// target with a scheme (dns:///host:port, unix:/path) as it is.
func consoleAddr(addr string) (string, error) {
	if strings.Contains(addr, ":/") || strings.HasPrefix(addr, "unix:") {
		return addr, nil
	}
	if p, err := strconv.ParseUint(addr, 10, 16); err == nil && p > 0 {
		return net.JoinHostPort("127.0.0.1", addr), nil
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return "", fmt.Errorf("--addr (or $WATCHTREE_CONSOLE) %q: want the console's host:port, such as 127.0.0.1:8090, or a port", addr)
	}
	return addr, nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func (o *opts) client() (*console.Client, error) {
	co := console.ClientOptions{Token: o.token, RequestedBy: requester(), Timeout: o.timeout}
	if o.useTLS || o.tlsCA != "" || o.tlsCert != "" {
		tc := &tls.Config{ServerName: o.tlsSNI, MinVersion: tls.VersionTLS12}
		if o.tlsCert != "" {
			cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
			if err != nil {
				return nil, fmt.Errorf("--tls-cert %s / --tls-key %s: %w", o.tlsCert, o.tlsKey, err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		if o.tlsCA != "" {
			pem, err := os.ReadFile(o.tlsCA)
			if err != nil {
				return nil, fmt.Errorf("--tls-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", o.tlsCA)
			}
			tc.RootCAs = pool
		}
		co.TLS = tc
	}
	return console.Dial(o.addr, co)
}

// requester is user@host, logged by the console with each command.
func requester() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}

func (o *opts) ctx(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), o.timeout)
}

// printJSON writes m as indented JSON (marshalJSON: numbers as numbers, enums by short name).
func (o *opts) printJSON(m proto.Message) error {
	b, err := marshalJSON(m, true)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(o.out, string(b))
	return err
}

func withClient(o *opts, f func(cmd *cobra.Command, c *console.Client, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := o.client()
		if err != nil {
			return err
		}
		defer c.Close()
		return f(cmd, c, args)
	}
}

func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("expects %s, got %d arguments", what, len(args))}
		}
		return nil
	}
}

func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("takes no arguments, got %q", strings.Join(args, " "))}
	}
	return nil
}
