package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/watchtree/watchtree/messages"
)

var (
	contextWithCancel  = context.WithCancel
	contextWithTimeout = context.WithTimeout
)

// printJSONLine writes m as one line of protobuf JSON (a stream of events).
func (o *opts) printJSONLine(m proto.Message) error {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
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
	fmt.Fprintln(tw, "STREAM\tROLE\tSTATE\tRESTART\tEV/S\tIN FLIGHT\tLAG\tCHECKPOINT\tDEAD\tWHY")
	for _, r := range s.GetStreams() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.1f\t%d\t%s\t%s\t%s\t%s\n", r.GetName(), badge(r), strings.ToUpper(r.GetState()),
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
	fmt.Fprintf(w, "instance %s  host %s  version %s  up %s  console %s\n", in.GetId(), in.GetHost(), in.GetVersion(),
		dur(in.GetUptime()), in.GetAddress())
	if u := in.GetMongodbUnreachable(); u != "" {
		fmt.Fprintf(w, "%s (the states are current; DEAD shows the last known count, marked ?)\n", u)
	}
}

// badge is the role column: LEADER or STANDBY for a SINGLE_LEADER stream, else the mode.
func badge(r *messages.StreamRow) string {
	switch r.GetRole() {
	case "leader":
		return "LEADER"
	case "standby":
		return "STANDBY"
	}
	return r.GetRole()
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
	row("role", badge(r))
	if r.GetLeaseOwner() != "" {
		row("lease", fmt.Sprintf("owner %s epoch %d expires %s", r.GetLeaseOwner(), r.GetLeaseEpoch(), r.GetLeaseExpiresAt().AsTime().Format(time.RFC3339)))
	}
	row("state", strings.ToUpper(r.GetState())+" since "+age(r.GetSince()))
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

func printDeadLetters(w io.Writer, d *messages.DeadLettersReply) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tOP\tKEY\tATTEMPTS\tCREATED\tREPLAYS\tERROR")
	for _, x := range d.GetDeadLetters() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%s\n", x.GetId(), x.GetOperationType(), x.GetDocumentKey(), x.GetAttempts(),
			age(x.GetCreatedAt()), x.GetReplayCount(), oneLine(x.GetError(), 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "(%d dead letters)\n", len(d.GetDeadLetters()))
	return err
}
