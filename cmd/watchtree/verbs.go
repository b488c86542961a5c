package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/watchtree/watchtree/console"
	"github.com/watchtree/watchtree/messages"
)

func streamsCmd(o *opts) *cobra.Command {
	req := &messages.SnapshotRequest{}
	var limit uint32
	cmd := &cobra.Command{
		Use:   "streams",
		Short: "List the instance's streams: role, state and why, restarts, events/s, lag, checkpoint, dead letters",
		Args:  noArgs,
		RunE: withClient(o, func(cmd *cobra.Command, c *console.Client, _ []string) error {
			ctx, cancel := o.ctx(cmd)
			defer cancel()
			req.Limit = limit
			snap, err := c.Snapshot(ctx, req)
			if err != nil {
				return err
			}
			if o.output == "json" {
				return o.printJSON(snap)
			}
			return printStreams(o.out, snap)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&req.Filter, "filter", "", "only streams whose name contains this")
	f.StringVar(&req.State, "state", "", "only streams in this state (running, backoff, crashed, ...)")
	f.StringVar(&req.Sort, "sort", "name", "sort by name, state, lag, rate, restarts or dead_letters")
	f.BoolVar(&req.Descending, "desc", false, "sort descending")
	f.Uint32Var(&limit, "limit", 0, "at most this many rows (0: all)")
	return cmd
}

func describeCmd(o *opts) *cobra.Command {
	var events int
	cmd := &cobra.Command{
		Use:   "describe STREAM",
		Short: "Everything about one stream, with its latest lifecycle events",
		Args:  exactArgs(1, "a stream name"),
		RunE: withClient(o, func(cmd *cobra.Command, c *console.Client, args []string) error {
			ctx, cancel := o.ctx(cmd)
			defer cancel()
			d, err := c.Describe(ctx, args[0], events)
			if err != nil {
				return err
			}
			if o.output == "json" {
				return o.printJSON(d)
			}
			return printDescribe(o.out, d)
		}),
	}
	cmd.Flags().IntVar(&events, "events", 20, "how many of the latest lifecycle events")
	return cmd
}

func treeCmd(o *opts) *cobra.Command {
	req := &messages.TreeRequest{}
	cmd := &cobra.Command{
		Use:   "tree",
		Short: "The actor hierarchy of the instance's streams and console, by PID (--all: protoactor's own actors too)",
		Args:  noArgs,
		RunE: withClient(o, func(cmd *cobra.Command, c *console.Client, _ []string) error {
			ctx, cancel := o.ctx(cmd)
			defer cancel()
			t, err := c.Tree(ctx, req)
			if err != nil {
				return err
			}
			if o.output == "json" {
				return o.printJSON(t)
			}
			return printTree(o.out, t)
		}),
	}
	cmd.Flags().BoolVar(&req.All, "all", false, "include protoactor's own actors (its dead-letter sink, remote endpoints): not watchtree's dead letters")
	return cmd
}

func eventsCmd(o *opts) *cobra.Command {
	var follow bool
	var stream string
	var backlog int
	cmd := &cobra.Command{
		Use:   "events",
		Short: "The latest lifecycle events; -f follows them live",
		Args:  noArgs,
		RunE: withClient(o, func(cmd *cobra.Command, c *console.Client, _ []string) error {
			ctx := cmd.Context()
			if !follow {
				var cancel func()
				ctx, cancel = o.ctx(cmd)
				defer cancel()
			}
			var ctxCancel func()
			ctx, ctxCancel = contextWithCancel(ctx)
			defer ctxCancel()
			var perr error
			err := c.Subscribe(ctx, stream, backlog, func(ev *messages.LifecycleEvent) {
				if ev.GetKind() == console.BacklogEnd {
					if !follow {
						ctxCancel()
					}
					return
				}
				if o.output == "json" {
					perr = o.printJSONLine(ev)
				} else {
					perr = printEvent(o.out, ev)
				}
			})
			if err != nil {
				return err
			}
			return perr
		}),
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow live events until interrupted")
	cmd.Flags().StringVar(&stream, "stream", "", "only this stream's events")
	cmd.Flags().IntVar(&backlog, "backlog", 50, "how many past events first")
	return cmd
}

func deadLettersCmd(o *opts) *cobra.Command {
	var limit int
	var verbose bool
	cmd := &cobra.Command{
		Use:   "deadletters STREAM",
		Short: "A stream's dead letters, oldest first",
		Args:  exactArgs(1, "a stream name"),
		RunE: withClient(o, func(cmd *cobra.Command, c *console.Client, args []string) error {
			ctx, cancel := o.ctx(cmd)
			defer cancel()
			d, err := c.DeadLetters(ctx, args[0], limit)
			if err != nil {
				return err
			}
			if o.output == "json" {
				return o.printJSON(d)
			}
			return printDeadLetters(o.out, d, verbose)
		}),
	}
	cmd.Flags().IntVar(&limit, "limit", 100, "at most this many")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "each dead letter's whole error, why it cannot be replayed, and its panic stack")
	return cmd
}

// commandTimeout is the bound of a mutating command: a graceful stop may take its time.
func (o *opts) commandTimeout() time.Duration { return max(o.timeout, 30*time.Second) }

func controlCmd(o *opts, verb, short string, action messages.ControlAction) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " STREAM",
		Short: short,
		Args:  exactArgs(1, "a stream name"),
		RunE: withClient(o, func(cmd *cobra.Command, c *console.Client, args []string) error {
			return o.control(cmd, c, action, args[0], "")
		}),
	}
}

func (o *opts) control(cmd *cobra.Command, c *console.Client, action messages.ControlAction, stream, id string) error {
	name := strings.ToLower(strings.TrimPrefix(action.String(), "CONTROL_ACTION_"))
	return o.command(cmd, name, stream, func(ctx context.Context, t time.Duration) (*messages.ControlReply, error) {
		return c.Control(ctx, action, stream, id, t)
	})
}

// command runs one control command within the command timeout and prints its reply.
func (o *opts) command(cmd *cobra.Command, name, stream string, do func(context.Context, time.Duration) (*messages.ControlReply, error)) error {
	t := o.commandTimeout()
	ctx, cancel := contextWithTimeout(cmd.Context(), t+5*time.Second)
	defer cancel()
	r, err := do(ctx, t)
	if r != nil && o.output == "json" {
		if perr := o.printJSON(r); perr != nil {
			return perr
		}
	}
	if err != nil {
		return err
	}
	if o.output == "table" {
		fmt.Fprintf(o.out, "%s %s: %s\n", name, stream, r.GetDetail())
	}
	return nil
}

func snapshotCmd(o *opts) *cobra.Command {
	var filter string
	cmd := &cobra.Command{
		Use:   "snapshot STREAM",
		Short: "Re-read a running stream's collection (or the documents matching --filter) through its handlers, without stopping it",
		Args:  exactArgs(1, "a stream name"),
		RunE: withClient(o, func(cmd *cobra.Command, c *console.Client, args []string) error {
			return o.command(cmd, "snapshot", args[0], func(ctx context.Context, t time.Duration) (*messages.ControlReply, error) {
				return c.OnDemandSnapshot(ctx, args[0], filter, t)
			})
		}),
	}
	cmd.Flags().StringVar(&filter, "filter", "", `query on the collection, MongoDB Extended JSON (e.g. '{"region": "eu"}'); default every document`)
	return cmd
}

func deadLetterCmd(o *opts, verb, short string, action messages.ControlAction) *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use:   verb + " STREAM",
		Short: short,
		Args:  exactArgs(1, "a stream name"),
		RunE: withClient(o, func(cmd *cobra.Command, c *console.Client, args []string) error {
			return o.control(cmd, c, action, args[0], id)
		}),
	}
	cmd.Flags().StringVar(&id, "id", "", "one dead letter's ID (default: all of the stream's)")
	return cmd
}

func replayCmd(o *opts) *cobra.Command {
	var id string
	var refresh, verbose bool
	cmd := &cobra.Command{
		Use:   "replay STREAM",
		Short: "Run a stream's dead letters (all, or --id) through its handler again; --refresh re-reads each document first",
		Long: `Run a stream's dead letters (all, or --id) through its handler again, one attempt each.
A replayed dead letter is deleted; a failed one is kept and its replay count raised.

By default the event runs as it was stored, with the fullDocument it had then. --refresh
re-reads the document by the event's documentKey and runs the event with the current one
(insert, update and replace events): the way to replay after fixing the document. A document
deleted since cannot be refreshed: that dead letter is skipped (purge it, or replay it as
stored).

It prints one line of summary (replayed, failed, skipped: gone meanwhile or not replayable as
asked), then one line per failure (the first five); --verbose does not cut them. A handler
panic is one line too: its stack is in the replay's WARN log line, and the stack of the
original failure in deadletters --verbose.`,
		Args: exactArgs(1, "a stream name"),
		RunE: withClient(o, func(cmd *cobra.Command, c *console.Client, args []string) error {
			t := o.commandTimeout()
			ctx, cancel := contextWithTimeout(cmd.Context(), t+5*time.Second)
			defer cancel()
			r, err := c.Replay(ctx, args[0], id, refresh, t)
			if r == nil || (err != nil && id != "") || (err != nil && r.GetDone()+r.GetFailed()+r.GetSkipped() == 0) {
				return err // refused, or the one dead letter failed: the error says it in one line
			}
			if o.output == "json" {
				if perr := o.printJSON(r); perr != nil {
					return perr
				}
			} else {
				printReplay(o.out, args[0], r, verbose)
			}
			if r.GetFailed() > 0 {
				return fmt.Errorf("replay %s: %d of %d dead letters failed", args[0], r.GetFailed(), r.GetDone()+r.GetFailed()+r.GetSkipped())
			}
			return err
		}),
	}
	f := cmd.Flags()
	f.StringVar(&id, "id", "", "one dead letter's ID (default: all of the stream's)")
	f.BoolVar(&refresh, "refresh", false, "re-read each event's document and replay with the current one (default: the event as stored)")
	f.BoolVarP(&verbose, "verbose", "v", false, "print the failures' errors in full")
	return cmd
}

func leaseCmd(o *opts) *cobra.Command {
	lease := &cobra.Command{Use: "lease", Short: "SingleLeader leases", Args: cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{errors.New("lease needs a verb: lease release STREAM")}
			}
			return usageError{fmt.Errorf("unknown lease verb %q: the verb is release (lease release STREAM)", args[0])}
		}}
	lease.AddCommand(&cobra.Command{
		Use:   "release STREAM",
		Short: "Release this instance's lease of a SingleLeader stream, so that a standby takes over",
		Args:  exactArgs(1, "a stream name"),
		RunE: withClient(o, func(cmd *cobra.Command, c *console.Client, args []string) error {
			return o.control(cmd, c, messages.ControlAction_CONTROL_ACTION_RELEASE_LEASE, args[0], "")
		}),
	})
	return lease
}
