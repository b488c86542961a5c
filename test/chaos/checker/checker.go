// Package checker judges a chaos soak's history (package history) against watchtree's
// promises, as a Jepsen checker judges a history of operations:
//
//   - every committed write is handled in every view that must see it (a SingleLeader stream:
//     once across the instances; an AllInstances stream: by each instance), and nothing that
//     was never committed is handled;
//   - per-key order holds within each delivery session of each instance (a write whose outcome
//     the load does not know may have been applied late, after the key's next one);
//   - no checkpoint moves backward;
//   - no handler call of a deposed leader starts after its successor acquired the lease (which
//     the store grants only after the deposed lease's expiry);
//   - dead letters are exactly the poison writes;
//   - redeliveries per session stay within the unsaved window (CheckpointPolicy.MaxUnflushed
//     plus the events in flight).
package checker

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/watchtree/watchtree/test/chaos/history"
)

// Kind names a class of violation.
type Kind string

// The violation kinds.
const (
	Lost         Kind = "lost"          // a committed write never handled (or a poison write never dead-lettered)
	Phantom      Kind = "phantom"       // a handled write that was aborted or never written
	Order        Kind = "order"         // a key's writes handled out of order within a session
	Backward     Kind = "backward"      // a checkpoint written behind an earlier one
	Deposed      Kind = "deposed"       // a handler call started by a leader after its successor acquired
	EpochReuse   Kind = "epoch"         // a lease acquisition whose epoch does not exceed the one before
	DeadLetters  Kind = "deadletter"    // a dead letter of a write that was not poison
	Duplicates   Kind = "duplicates"    // more redeliveries in one session than the unsaved window
	UnplannedGap Kind = "unplanned-gap" // history skipped without a fault that explains it
)

// Kinds lists every violation kind, in report order.
func Kinds() []Kind {
	return []Kind{Lost, Phantom, Order, Backward, Deposed, EpochReuse, DeadLetters, Duplicates, UnplannedGap}
}

// Stream describes one stream of the soak.
type Stream struct {
	Name   string // Stream.Name
	Single bool   // Mode SingleLeader: one view for the stream; else one view per node
	Lanes  int    // Stream.Lanes (events in flight per session, besides MaxUnflushed)
	// Dynamic: spawned during the soak; it must handle the writes committed after its first
	// Spawn returned (a history.Note of Kind "spawned"), and none before are owed.
	Dynamic bool
}

// Params is what the checker needs besides the history.
type Params struct {
	Streams []Stream // the soak's streams, the dynamic ones included
	Nodes   []string // the nodes' InstanceNames
	// MaxUnflushed is the streams' CheckpointPolicy.MaxUnflushed: the most settled events a
	// session may redeliver.
	MaxUnflushed int
	// GapSlack is how long before a corrupt-token fault writes may still be lost to the gap it
	// causes (the checkpoint's age when it was corrupted: CheckpointPolicy.SaveInterval and
	// a margin).
	GapSlack time.Duration
}

// Violation is one broken promise.
type Violation struct {
	Kind   Kind   // which promise broke
	View   string // "stream" for a SingleLeader stream, "stream@node" for an AllInstances one
	At     time.Time
	Detail string
}

// String is one line: kind, view, time and what happened.
func (v Violation) String() string {
	return fmt.Sprintf("%s %s at %s: %s", v.Kind, v.View, v.At.Format("15:04:05.000"), v.Detail)
}

// ViewStats are the figures of one view.
type ViewStats struct {
	View       string        // as Violation.View
	Handled    int           // distinct writes handled
	Duplicates int           // successful calls of an already handled write
	Sessions   int           // delivery sessions (cursor starts) in the view
	WorstDelay time.Duration // longest commit → first successful call
}

// Report is the checker's verdict.
type Report struct {
	Writes     map[history.Outcome]int // the load's writes by outcome
	Poison     int                     // committed poison writes (each owed a dead letter per view)
	Calls      int                     // handler calls, every view and attempt
	Faults     map[string]int          // faults applied, by kind
	Views      []ViewStats             // per view, in Params order
	Duplicates int                     // sum of the views' duplicates
	// WorstFailover is the longest time, over the leadership changes of the SingleLeader
	// streams, from the previous leader's last handler call to the new leader's first.
	WorstFailover       time.Duration
	WorstFailoverStream string
	Violations          []Violation
	// Terminal lists the terminal stops, "stream on node: cause", one per stream and cause.
	Terminal []string
}

// Count returns the number of violations of kind k.
func (r *Report) Count(k Kind) int {
	n := 0
	for _, v := range r.Violations {
		if v.Kind == k {
			n++
		}
	}
	return n
}

type checker struct {
	p      Params
	recs   []history.Record
	writes map[string]history.Record // key#seq → the write
	rep    *Report
	faults []history.Record
}

// Check judges recs (any order) under p.
func Check(recs []history.Record, p Params) *Report {
	recs = slices.Clone(recs)
	history.Sort(recs)
	c := &checker{p: p, recs: recs, writes: map[string]history.Record{},
		rep: &Report{Writes: map[history.Outcome]int{}, Faults: map[string]int{}}}
	deleteSeq := map[string]int64{} // a key's delete: its last write (keys are never reused)
	for _, r := range recs {
		if r.Type == history.Write && r.Op == history.Delete {
			deleteSeq[r.Key] = r.Seq
		}
	}
	for i, r := range recs {
		if r.Type == history.Call && r.Op == history.Delete && r.Seq == 0 {
			recs[i].Seq = deleteSeq[r.Key] // a delete event carries no document
		}
	}
	for _, r := range recs {
		switch r.Type {
		case history.Write:
			c.writes[history.KeyOf(r.Key, r.Seq)] = r
			c.rep.Writes[r.Outcome]++
			if r.Poison && r.Outcome == history.Committed {
				c.rep.Poison++
			}
		case history.Fault:
			c.faults = append(c.faults, r)
			c.rep.Faults[r.Kind]++
		case history.Call:
			c.rep.Calls++
		case history.Stopped:
			if r.Terminal {
				line := fmt.Sprintf("%s on %s: %s", r.Stream, r.Node, r.Err)
				if !slices.Contains(c.rep.Terminal, line) {
					c.rep.Terminal = append(c.rep.Terminal, line)
				}
			}
		}
	}
	for _, s := range p.Streams {
		if s.Single {
			c.view(s, "")
			c.leases(s)
		} else {
			for _, n := range p.Nodes {
				c.view(s, n)
			}
		}
		c.checkpoints(s)
	}
	slices.SortStableFunc(c.rep.Violations, func(a, b Violation) int { return a.At.Compare(b.At) })
	return c.rep
}

func viewName(s Stream, node string) string {
	if node == "" {
		return s.Name
	}
	return s.Name + "@" + node
}

func (c *checker) add(k Kind, view string, at time.Time, format string, args ...any) {
	c.rep.Violations = append(c.rep.Violations, Violation{Kind: k, View: view, At: at, Detail: fmt.Sprintf(format, args...)})
}

// inView reports whether r (a record of a node) belongs to the view of s on node ("" = all).
func inView(r history.Record, s Stream, node string) bool {
	return r.Stream == s.Name && (node == "" || r.Node == node)
}

// view checks delivery in one view: lost, phantom, order, dead letters, duplicates.
func (c *checker) view(s Stream, node string) {
	name := viewName(s, node)
	st := ViewStats{View: name}
	handled := map[string]time.Time{} // key#seq → first successful call start
	eventKey := map[string]string{}   // event id → key#seq
	session := map[string]int{}       // instance → its current session number
	lastSeq := map[string]int64{}     // instance/session/key → last seq handled
	lastEvent := map[string]string{}  // same key → the event id of that call
	redelivered := map[string]int{}   // instance/session → redeliveries
	sessionStart := map[string]time.Time{}
	var gaps []history.Record
	var dls []history.Record
	var spawned time.Time // a dynamic stream's first Spawn return
	for _, r := range c.recs {
		if !inView(r, s, node) {
			continue
		}
		switch r.Type {
		case history.Note:
			if r.Kind == "spawned" && r.Err == "" && spawned.IsZero() {
				spawned = r.Start
			}
		case history.Started:
			session[r.Instance]++
			st.Sessions++
			sessionStart[fmt.Sprintf("%s/%d", r.Instance, session[r.Instance])] = r.Start
		case history.Gap:
			gaps = append(gaps, r)
		case history.DeadLetter:
			dls = append(dls, r)
		case history.Call:
			kseq := history.KeyOf(r.Key, r.Seq)
			if r.EventID != "" {
				eventKey[r.EventID] = kseq
			}
			w, known := c.writes[kseq]
			switch {
			case !known:
				c.add(Phantom, name, r.Start, "%s handled by %s, but the load never wrote it", kseq, r.Instance)
			case w.Outcome == history.Aborted:
				c.add(Phantom, name, r.Start, "%s handled by %s, but its transaction was aborted", kseq, r.Instance)
			}
			sess := fmt.Sprintf("%s/%d", r.Instance, session[r.Instance])
			ok := sess + "/" + r.Key
			// A write whose outcome the load does not know (its call failed) may have been
			// applied after the key's next one, a late write like any other: the server's order
			// is then N+1, N, and handling it in that order is right.
			if prev, seen := lastSeq[ok]; seen && r.Seq < prev && lastEvent[ok] != r.EventID && w.Outcome != history.Uncertain {
				c.add(Order, name, r.Start, "%s: seq %d handled after seq %d by %s in one session", r.Key, r.Seq, prev, r.Instance)
			}
			if r.Seq >= lastSeq[ok] {
				lastSeq[ok], lastEvent[ok] = r.Seq, r.EventID
			}
			if r.Err != "" && !r.Poison {
				continue
			}
			if _, dup := handled[kseq]; dup {
				if r.Attempt <= 1 && !r.Poison {
					st.Duplicates++
					redelivered[sess]++
				}
				continue
			}
			handled[kseq] = r.Start
			if known && w.Outcome == history.Committed {
				if d := r.Start.Sub(w.Start); d > st.WorstDelay {
					st.WorstDelay = d
				}
			}
		}
	}
	window := c.p.MaxUnflushed + max(s.Lanes, 1)
	for sess, n := range redelivered {
		if n > window {
			c.add(Duplicates, name, sessionStart[sess], "session %s redelivered %d events, more than the unsaved window %d (MaxUnflushed + lanes)", sess, n, window)
		}
	}
	dead := map[string]bool{}
	for _, d := range dls {
		kseq, ok := eventKey[d.EventID]
		if !ok {
			c.add(DeadLetters, name, d.Start, "dead letter %s matches no handler call", d.EventID)
			continue
		}
		dead[kseq] = true
		if w := c.writes[kseq]; !w.Poison {
			c.add(DeadLetters, name, d.Start, "dead letter %s (%s) is not a poison write", d.EventID, kseq)
		}
	}
	// Every gap needs a corrupt-token fault of the stream just before it.
	excused := func(w history.Record) bool {
		for _, g := range gaps {
			if f, ok := c.gapFault(s, g); ok && !w.Start.Before(f.Start.Add(-c.p.GapSlack)) && !w.Start.After(g.Start) {
				return true
			}
		}
		return false
	}
	for _, g := range gaps {
		if _, ok := c.gapFault(s, g); !ok {
			c.add(UnplannedGap, name, g.Start, "history skipped (%s) without a corrupt-token fault before it", g.Detail)
		}
	}
	var lost []history.Record
	for _, w := range c.writeList() {
		if w.Outcome != history.Committed {
			continue
		}
		kseq := history.KeyOf(w.Key, w.Seq)
		switch {
		case w.Poison && dead[kseq]:
		case !w.Poison && !handled[kseq].IsZero():
		case s.Dynamic && (spawned.IsZero() || w.Start.Before(spawned)):
		case excused(w):
		default:
			lost = append(lost, w)
		}
	}
	c.addLost(name, lost)
	st.Handled = len(handled)
	c.rep.Duplicates += st.Duplicates
	c.rep.Views = append(c.rep.Views, st)
}

// addLost reports lost writes: each of the first few, then one line for the rest.
func (c *checker) addLost(view string, lost []history.Record) {
	const show = 5
	for i, w := range lost {
		what := "handled"
		if w.Poison {
			what = "dead-lettered"
		}
		if i == show {
			c.add(Lost, view, w.Start, "%d more committed writes never %s (last committed %s)", len(lost)-show, what, lost[len(lost)-1].Start.Format("15:04:05.000"))
			break
		}
		c.add(Lost, view, w.Start, "%s (%s) committed but never %s", history.KeyOf(w.Key, w.Seq), w.Op, what)
	}
}

func (c *checker) writeList() []history.Record {
	out := make([]history.Record, 0, len(c.writes))
	for _, w := range c.writes {
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b history.Record) int {
		return cmp.Or(a.Start.Compare(b.Start), strings.Compare(a.Key, b.Key), cmp.Compare(a.Seq, b.Seq))
	})
	return out
}

// gapFault returns the corrupt-token fault of s that explains gap g: the latest one that
// started before it.
func (c *checker) gapFault(s Stream, g history.Record) (history.Record, bool) {
	var best history.Record
	found := false
	for _, f := range c.faults {
		if f.Kind == "corrupt-token" && f.Stream == s.Name && f.Start.Before(g.Start) {
			best, found = f, true
		}
	}
	return best, found
}

// leases checks a SingleLeader stream's calls against its lease acquisitions, and measures
// the failovers.
func (c *checker) leases(s Stream) {
	type acq struct {
		at       time.Time
		instance string
		epoch    int64
	}
	var acqs []acq
	var maxEpoch int64
	maxOwner := ""
	for _, r := range c.recs {
		if r.Type != history.Lease || r.Stream != s.Name || r.Change != "acquired" {
			continue
		}
		switch {
		case r.Epoch < maxEpoch || (r.Epoch == maxEpoch && r.Instance != maxOwner):
			c.add(EpochReuse, s.Name, r.Start, "%s acquired epoch %d after %s held epoch %d", r.Instance, r.Epoch, maxOwner, maxEpoch)
		default:
			maxEpoch, maxOwner = r.Epoch, r.Instance
		}
		acqs = append(acqs, acq{r.Start, r.Instance, r.Epoch})
	}
	var calls []history.Record
	for _, r := range c.recs {
		if r.Type == history.Call && r.Stream == s.Name {
			calls = append(calls, r)
		}
	}
	reported := map[string]int{}
	lastAt := map[string]time.Time{}
	for _, r := range calls {
		i := sort.Search(len(acqs), func(i int) bool { return acqs[i].at.After(r.Start) }) - 1
		if i < 0 {
			continue // before any acquisition was seen: the first leader's event may lag
		}
		if a := acqs[i]; a.instance != r.Instance {
			key := r.Instance + ">" + a.instance
			reported[key]++
			lastAt[key] = r.Start
			if reported[key] <= 3 {
				c.add(Deposed, s.Name, r.Start, "%s started a handler call (%s) %v after %s acquired epoch %d%s",
					r.Instance, history.KeyOf(r.Key, r.Seq), r.Start.Sub(a.at).Round(time.Millisecond), a.instance, a.epoch, c.faultNear(r.Node, r.Start))
			}
		}
	}
	for _, pair := range slices.Sorted(maps.Keys(reported)) {
		if n := reported[pair]; n > 3 {
			from, to, _ := strings.Cut(pair, ">")
			c.add(Deposed, s.Name, lastAt[pair], "%d more handler calls of %s started after %s acquired (the last at %s)", n-3, from, to, lastAt[pair].Format("15:04:05.000"))
		}
	}
	// Failover: previous holder's last call before the acquisition → new holder's first call after it.
	for i := 1; i < len(acqs); i++ {
		prev, cur := acqs[i-1], acqs[i]
		if prev.instance == cur.instance {
			continue
		}
		var last, first time.Time
		for _, r := range calls {
			if r.Instance == prev.instance && !r.Start.After(cur.at) && r.End.After(last) {
				last = r.End
			}
			if r.Instance == cur.instance && r.Start.After(cur.at) && first.IsZero() {
				first = r.Start
			}
		}
		if last.IsZero() || first.IsZero() {
			continue
		}
		if d := first.Sub(last); d > c.rep.WorstFailover {
			c.rep.WorstFailover, c.rep.WorstFailoverStream = d, s.Name
		}
	}
}

// faultNear names the fault on node that was under way at t or healed less than 5s before,
// as a hint for the reader ("" when none).
func (c *checker) faultNear(node string, t time.Time) string {
	for i := len(c.faults) - 1; i >= 0; i-- {
		f := c.faults[i]
		if f.Node == node && !f.Start.After(t) && t.Sub(f.End) < 5*time.Second {
			if f.End.After(t) {
				return fmt.Sprintf(" (during %s of %s)", f.Kind, node)
			}
			return fmt.Sprintf(" (%v after %s of %s healed)", t.Sub(f.End).Round(time.Millisecond), f.Kind, node)
		}
	}
	return ""
}

// checkpoints checks that every checkpoint scope of s only moves forward: ordered by epoch,
// then time, for the shared one of a SingleLeader stream; by time for each instance's own.
func (c *checker) checkpoints(s Stream) {
	scopes := map[string][]history.Record{}
	for _, r := range c.recs {
		if r.Type != history.Checkpoint || r.Stream != s.Name || r.Pos == "" {
			continue
		}
		scope := s.Name
		if !s.Single {
			scope = s.Name + "@" + r.Node
		}
		scopes[scope] = append(scopes[scope], r)
	}
	for scope, cps := range scopes {
		if s.Single {
			slices.SortStableFunc(cps, func(a, b history.Record) int {
				return cmp.Or(cmp.Compare(a.Epoch, b.Epoch), a.Start.Compare(b.Start))
			})
		}
		high := ""
		for _, r := range cps {
			if r.Pos < high {
				c.add(Backward, scope, r.Start, "%s (epoch %d) wrote a checkpoint behind the one before (%s < %s)", r.Instance, r.Epoch, short(r.Pos), short(high))
				continue
			}
			high = r.Pos
		}
	}
}

func short(pos string) string {
	if len(pos) > 24 {
		return "…" + pos[len(pos)-24:]
	}
	return pos
}
