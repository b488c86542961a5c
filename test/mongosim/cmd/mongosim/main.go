// Command mongosim runs the in-process MongoDB replica-set simulator (test/mongosim) as a
// standalone server, so that any MongoDB client (mongosh, another language's driver, a
// service under test) can connect to it over TCP.
//
//	mongosim --port 27017
//
// It prints the connection string on stdout and serves until SIGINT or SIGTERM, then closes
// every connection and exits 0. All data is in memory and is lost on exit.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/watchtree/watchtree/test/mongosim"
)

func main() {
	if err := newCommand(os.Stdout).Execute(); err != nil {
		os.Exit(1)
	}
}

// config holds the command-line flags.
type config struct {
	host            string
	port            int
	replSet         string
	oplogCapacity   int
	oplogRetention  time.Duration
	wireVersion     int
	shutdownTimeout time.Duration
}

func newCommand(out io.Writer) *cobra.Command {
	var cfg config
	cmd := &cobra.Command{
		Use:   "mongosim",
		Short: "Run a simulated single-member MongoDB replica set (in memory)",
		Long: "mongosim serves the MongoDB wire protocol as the primary of a one-member replica set,\n" +
			"with change streams, transactions and fault injection (configureFailPoint).\n" +
			"Data lives in memory only. It prints the connection URI and runs until SIGINT/SIGTERM.",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			err := run(ctx, cfg, out)
			if err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "mongosim:", err)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.host, "host", "127.0.0.1", "interface to listen on")
	f.IntVar(&cfg.port, "port", 27017, "TCP port to listen on (0 picks a free port)")
	f.StringVar(&cfg.replSet, "replset", "rs0", "replica-set name reported by hello")
	f.IntVar(&cfg.oplogCapacity, "oplog-capacity", 1_000_000, "change-history bound, in oplog entries")
	f.DurationVar(&cfg.oplogRetention, "oplog-retention", 0, "also drop history older than this (0: no age limit)")
	f.IntVar(&cfg.wireVersion, "wire-version", 25, "maxWireVersion to report: 21 (MongoDB 7.0) or 25 (8.0)")
	f.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long Close may take after a signal")
	return cmd
}

// run starts the server, prints its URI and serves until ctx ends.
func run(ctx context.Context, cfg config, out io.Writer) error {
	if cfg.port < 0 || cfg.port > 65535 {
		return fmt.Errorf("--port must be in [0, 65535], got %d", cfg.port)
	}
	if cfg.oplogCapacity <= 0 {
		return fmt.Errorf("--oplog-capacity must be positive, got %d", cfg.oplogCapacity)
	}
	opts := mongosim.Options{
		Addr:           net.JoinHostPort(cfg.host, strconv.Itoa(cfg.port)),
		ReplicaSet:     cfg.replSet,
		WireVersion:    cfg.wireVersion,
		OplogCapacity:  cfg.oplogCapacity,
		OplogRetention: cfg.oplogRetention,
	}
	startCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	srv, err := mongosim.Start(startCtx, opts)
	cancel()
	if err != nil {
		return err
	}
	fmt.Fprintln(out, srv.URI())
	<-ctx.Done()

	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	select {
	case err := <-closed:
		return err
	case <-time.After(cfg.shutdownTimeout):
		return errors.New("shutdown timed out")
	}
}
