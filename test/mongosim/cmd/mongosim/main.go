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
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/watchtree/watchtree/test/mongosim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
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

// execute parses args, then serves until ctx ends; errors are printed on errOut.
func execute(ctx context.Context, args []string, out, errOut io.Writer) error {
	cfg, err := parse(args, errOut)
	if err == nil {
		err = run(ctx, cfg, out)
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(errOut, "mongosim:", err)
	}
	return err
}

// parse reads the flags (the standard library's syntax: -port 1 or --port=1 or --port 1).
func parse(args []string, errOut io.Writer) (config, error) {
	var cfg config
	f := flag.NewFlagSet("mongosim", flag.ContinueOnError)
	f.SetOutput(errOut)
	f.Usage = func() {
		fmt.Fprint(errOut, "Usage: mongosim [flags]\n\n"+
			"mongosim serves the MongoDB wire protocol as the primary of a one-member replica set,\n"+
			"with change streams, transactions and fault injection (configureFailPoint).\n"+
			"Data lives in memory only. It prints the connection URI and runs until SIGINT/SIGTERM.\n\nFlags:\n")
		f.PrintDefaults()
	}
	f.StringVar(&cfg.host, "host", "127.0.0.1", "interface to listen on")
	f.IntVar(&cfg.port, "port", 27017, "TCP port to listen on (0 picks a free port)")
	f.StringVar(&cfg.replSet, "replset", "rs0", "replica-set name reported by hello")
	f.IntVar(&cfg.oplogCapacity, "oplog-capacity", 1_000_000, "change-history bound, in oplog entries")
	f.DurationVar(&cfg.oplogRetention, "oplog-retention", 0, "also drop history older than this (0: no age limit)")
	f.IntVar(&cfg.wireVersion, "wire-version", 25, "maxWireVersion to report: 21 (MongoDB 7.0) or 25 (8.0)")
	f.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long Close may take after a signal")
	if err := f.Parse(args); err != nil {
		return cfg, err
	}
	if f.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q: mongosim takes flags only", f.Arg(0))
	}
	return cfg, nil
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
