package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/watchtree/watchtree/messages"
)

var (
	contextWithCancel  = context.WithCancel
	contextWithTimeout = context.WithTimeout
)

// printJSONLine writes m as one line of JSON (a stream of events), as printJSON does.
func (o *opts) printJSONLine(m proto.Message) error {
	b, err := marshalJSON(m, false)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(o.out, string(b))
	return err
}

// now is the CLI's clock (tests do not depend on it: they read JSON).
var now = time.Now

func printStreams(w io.Writer, s *messages.SnapshotReply) error {
	printInstance(w, s.GetInstance())
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STREAM\tROLE\tCURSOR\tSTATE\tRESTART\tEV/S\tIN FLIGHT\tLAG\tCHECKPOINT\tDEAD\tWHY")
	for _, r := range s.GetStreams() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.1f\t%d\t%s\t%s\t%s\t%s\n", r.GetName(), badge(r), cursorCell(r), r.GetState(),
			restartCell(r), r.GetEventsPerSec(), r.GetInFlight(), dur(r.GetLag()), age(r.GetCheckpointAt()),
			deadCell(r), oneLine(r.GetWhy(), 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if s.GetTotal() > uint32(len(s.GetStreams())) {
		fmt.Fprintf(w, "(%d of %d streams)\n", len(s.GetStreams()), s.GetTotal())
	}
	return nil
}

func printInstance(w io.Writer, in *messages.InstanceInfo) {
	if in == nil {
		return
	}
	name := in.GetName()
	if name == "" {
		name = "-"
	}
	fmt.Fprintf(w, "instance %s (id %s)  host %s  version %s  up %s  console %s\n", name, in.GetId(), in.GetHost(), in.GetVersion(),
		dur(in.GetUptime()), in.GetAddress())
	if u := in.GetMongodbUnreachable(); u != "" {
		fmt.Fprintf(w, "%s (the states are current; DEAD shows the last known count, marked ?)\n", u)
	}
	for _, warn := range in.GetWarnings() {
		fmt.Fprintf(w, "WARNING: %s\n", warn)
	}
}

// badge is the role column: the role of a SingleLeader stream (leader, standby), "-" for an
// AllInstances stream or before the lease reports one. The mode has its own column in describe.
func badge(r *messages.StreamRow) string {
	if r.GetRole() == "" {
		return "-"
	}
	return r.GetRole()
}

// cursorCell is the cursor column: "dedicated", "shared" (reading the hub's cursor),
// "catching-up" (a Shared stream on a cursor of its own), "dedicated*" (a Shared stream that
// cannot share: describe says why), "-" from a runtime that does not report it.
func cursorCell(r *messages.StreamRow) string {
	switch c := r.GetCursor(); {
	case c == "":
		return "-"
	case c == "shared (attached)":
		return "shared"
	case c == "shared (catching up)":
		return "catching-up"
	case strings.HasPrefix(c, "dedicated ("):
		return "dedicated*"
	default:
		return c
	}
}

// restartCell is "attempt/max next 12s" during backoff, the restart count otherwise.
func restartCell(r *messages.StreamRow) string {
	maxA := "∞"
	if r.GetMaxAttempts() > 0 {
		maxA = fmt.Sprint(r.GetMaxAttempts())
	}
	if r.GetNextRetryAt() != nil {
		left := max(time.Until(r.GetNextRetryAt().AsTime()), 0)
		return fmt.Sprintf("%d/%s next %s", r.GetAttempt(), maxA, left.Round(100*time.Millisecond))
	}
	if r.GetAttempt() > 0 {
		return fmt.Sprintf("%d/%s", r.GetAttempt(), maxA)
	}
	return fmt.Sprintf("%d", r.GetRestarts())
}

// deadCell is the stored dead-letter count; "?" when it is not known, "3?" when 3 is the last
// known count but not a current one (DeadLettersUnknown says why).
func deadCell(r *messages.StreamRow) string {
	switch {
	case r.GetDeadLettersUnknown() == "":
		return fmt.Sprint(r.GetDeadLetters())
	case r.GetDeadLettersAt() == nil:
		return "?"
	}
	return fmt.Sprintf("%d?", r.GetDeadLetters())
}

func dur(d *durationpb.Duration) string {
	if d == nil {
		return "-"
	}
	v := d.AsDuration()
	switch {
	case v < time.Second:
		return v.Round(time.Millisecond).String()
	case v < time.Minute:
		return v.Round(100 * time.Millisecond).String()
	}
	return v.Round(time.Second).String()
}

func age(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return dur(durationpb.New(now().Sub(t.AsTime()))) + " ago"
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len([]rune(s)) > n {
		return string([]rune(s)[:n-1]) + "…"
	}
	return s
}

func printDescribe(w io.Writer, d *messages.DescribeReply) error {
	r := d.GetStream()
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
	row("stream", r.GetName())
	row("namespace", r.GetNamespace())
	row("mode", r.GetMode())
	if r.GetCursor() != "" {
		row("cursor", r.GetCursor())
	}
	row("role", badge(r))
	if r.GetLeaseOwner() != "" {
		row("lease", fmt.Sprintf("owner %s epoch %d expires %s", r.GetLeaseOwner(), r.GetLeaseEpoch(), r.GetLeaseExpiresAt().AsTime().Format(time.RFC3339)))
	}
	row("state", r.GetState()+" since "+age(r.GetSince()))
	row("why", r.GetWhy())
	row("restart", restartCell(r))
	row("deaths / restarts", fmt.Sprintf("%d / %d (incarnation %d)", r.GetDeaths(), r.GetRestarts(), r.GetIncarnation()))
	row("last error", oneLine(r.GetLastError(), 200))
	row("events/s", fmt.Sprintf("%.1f", r.GetEventsPerSec()))
	row("settled", r.GetSettled())
	row("in flight", r.GetInFlight())
	row("lag", dur(r.GetLag()))
	if r.GetOplogBehind() != nil {
		row("behind oplog", dur(r.GetOplogBehind()))
	}
	row("checkpoint", fmt.Sprintf("%s (%s) %s", age(r.GetCheckpointAt()), r.GetCheckpointSource(), r.GetCheckpointToken()))
	if r.GetTokenHeadroom() != nil {
		row("token headroom", dur(r.GetTokenHeadroom()))
	}
	row("dead letters", fmt.Sprintf("%s stored, %d since spawn", deadCell(r), r.GetDeadLettered()))
	if u := r.GetDeadLettersUnknown(); u != "" {
		row("", "stored count unknown: "+u)
	}
	if r.GetNote() != "" {
		row("note", r.GetNote())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(d.GetEvents()) > 0 {
		fmt.Fprintln(w, "\nevents:")
		for _, ev := range d.GetEvents() {
			if err := printEvent(w, ev); err != nil {
				return err
			}
		}
	}
	return nil
}

func printTree(w io.Writer, t *messages.TreeReply) error {
	var walk func(n *messages.ActorNode, depth int)
	walk = func(n *messages.ActorNode, depth int) {
		fmt.Fprintf(w, "%s%s\n", strings.Repeat("  ", depth), n.GetName())
		for _, c := range n.GetChildren() {
			walk(c, depth+1)
		}
	}
	for _, r := range t.GetRoots() {
		walk(r, 0)
	}
	if t.GetHidden() > 0 {
		_, err := fmt.Fprintf(w, "(%d actors; %d of protoactor not shown: --all)\n", t.GetActors(), t.GetHidden())
		return err
	}
	_, err := fmt.Fprintf(w, "(%d actors)\n", t.GetActors())
	return err
}

func printEvent(w io.Writer, ev *messages.LifecycleEvent) error {
	line := fmt.Sprintf("%s  #%d  %-18s %s", ev.GetAt().AsTime().Local().Format("15:04:05.000"), ev.GetSeq(), ev.GetKind(), ev.GetMessage())
	if ev.GetDropped() > 0 {
		line += fmt.Sprintf("  (%d events dropped: reading too slowly)", ev.GetDropped())
	}
	_, err := fmt.Fprintln(w, line)
	return err
}

// printDeadLetters is the table of dead letters; REPLAY says "yes", or "refresh" when only a
// replay with --refresh can succeed, or "no". verbose adds each one's whole error, replay note
// and stack under the table.
func printDeadLetters(w io.Writer, d *messages.DeadLettersReply, verbose bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tOP\tKEY\tATTEMPTS\tCREATED\tREPLAYS\tREPLAY\tTYPE\tERROR")
	for _, x := range d.GetDeadLetters() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\n", x.GetId(), x.GetOperationType(), x.GetDocumentKey(), x.GetAttempts(),
			age(x.GetCreatedAt()), x.GetReplayCount(), replayCell(x), x.GetErrorType(), oneLine(x.GetError(), 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if verbose {
		for _, x := range d.GetDeadLetters() {
			fmt.Fprintf(w, "\n%s (%s):\n  error: %s\n", x.GetId(), x.GetErrorType(), x.GetError())
			if x.GetReplayNote() != "" {
				fmt.Fprintf(w, "  replay: %s\n", x.GetReplayNote())
			}
			if x.GetStack() != "" {
				fmt.Fprintf(w, "  stack:\n    %s\n", strings.ReplaceAll(strings.TrimSpace(x.GetStack()), "\n", "\n    "))
			}
		}
	}
	_, err := fmt.Fprintf(w, "(%d dead letters)\n", len(d.GetDeadLetters()))
	return err
}

// replayCell is the REPLAY column: can a replay succeed, as stored or with --refresh.
func replayCell(x *messages.DeadLetterInfo) string {
	switch {
	case x.GetReplayable():
		return "yes"
	case strings.Contains(x.GetReplayNote(), "refresh"):
		return "refresh"
	}
	return "no"
}

// printReplay prints a replay's summary line, then one line per failure the console listed.
func printReplay(w io.Writer, stream string, r *messages.ControlReply, verbose bool) {
	fmt.Fprintf(w, "replay %s: %d replayed, %d failed, %d skipped\n", stream, r.GetDone(), r.GetFailed(), r.GetSkipped())
	if r.GetFailed() == 0 {
		return
	}
	for _, e := range strings.Split(r.GetError(), "\n") {
		if !verbose {
			e = oneLine(e, 160)
		}
		fmt.Fprintf(w, "  failed: %s\n", e)
	}
	if n := r.GetFailed() - uint32(len(strings.Split(r.GetError(), "\n"))); int(n) > 0 {
		fmt.Fprintf(w, "  (%d more failures: deadletters -v shows them)\n", n)
	}
}
