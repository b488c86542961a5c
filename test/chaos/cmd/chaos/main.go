// Command chaos runs the chaos soak of package chaos and prints its report: make chaos runs it
// for CHAOS_SECONDS (default 600) with a fresh seed, or CHAOS_SEED to rerun one. It exits 1
// when the checker found a violation, 2 when the soak could not run.
//
// -cleanup runs no soak: it removes what killed soaks left behind (their processes, network
// namespaces, veth links, host routes, temporary folders and Redis keys (at
// $WATCHTREE_REDIS_ADDR, default 127.0.0.1:6379, when it answers); live soaks are spared, see
// chaos.Cleanup) and exits 0, or 1 when a removal failed. make test-go runs it first. Without
// root it leaves the network alone and says so.
//
//	go run ./chaos/cmd/chaos -seconds 60 -seed 42
//	go run ./chaos/cmd/chaos -cleanup
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/watchtree/watchtree/test/chaos"
)

func main() {
	seed := flag.Uint64("seed", 0, "the seed to rerun (0: a fresh one, printed)")
	seconds := flag.Int("seconds", 600, "how long the nemesis runs")
	dir := flag.String("dir", "", "where the histories and logs go (default a temporary directory)")
	faults := flag.String("faults", "", "comma-separated fault kinds to draw from, or -kind entries to leave out (default all: "+strings.Join(chaos.FaultKinds(), ",")+")")
	network := flag.String("network", "", `how partitions are made: "netns", "proxy", or "" (netns when it can be set up)`)
	cleanup := flag.Bool("cleanup", false, "remove what killed soaks left behind, and exit")
	cursor := flag.String("cursor", "", `the nodes' Stream.Cursor: "dedicated", "shared", or "" (the library's default)`)
	flag.Parse()
	if *cleanup {
		redisAddr := cmp.Or(os.Getenv("WATCHTREE_REDIS_ADDR"), "127.0.0.1:6379")
		if err := chaos.Cleanup(os.Stdout, redisAddr); err != nil {
			fmt.Fprintln(os.Stderr, "chaos -cleanup:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch *cursor {
	case "", "dedicated", "shared":
	default:
		fmt.Fprintf(os.Stderr, "chaos: -cursor %q: want dedicated or shared\n", *cursor)
		os.Exit(2)
	}
	opts := chaos.Options{Seed: *seed, Duration: time.Duration(*seconds) * time.Second, Dir: *dir, Log: os.Stdout, Network: *network,
		Cursor: *cursor}
	if *faults != "" {
		opts.Faults = strings.Split(*faults, ",")
		if err := chaos.CheckFaults(opts.Faults); err != nil {
			fmt.Fprintln(os.Stderr, "chaos: -faults:", err)
			os.Exit(2)
		}
	}
	rep, err := chaos.Run(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	rep.Print(os.Stdout)
	if rep.Failed() {
		os.Exit(1)
	}
}
