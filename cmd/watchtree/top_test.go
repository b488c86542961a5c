package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/watchtree/watchtree/console"
	"github.com/watchtree/watchtree/messages"
)

// step feeds msg to the model and runs the commands it returns as the program would (batches
// included), feeding each resulting message back. Ticks are not followed.
func step(m *topModel, msg tea.Msg) {
	_, cmd := m.Update(msg)
	var run func(c tea.Cmd)
	run = func(c tea.Cmd) {
		if c == nil {
			return
		}
		switch out := c().(type) {
		case tea.BatchMsg:
			for _, c := range out {
				run(c)
			}
		case nil, tickMsg:
		default:
			_, next := m.Update(out)
			run(next)
		}
	}
	run(cmd)
}

func TestTopRendersTheLiveRuntime(t *testing.T) {
	c, err := console.Dial(live.addr, console.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := newTopModel([]source{c}, time.Millisecond, 5*time.Second)
	step(m, tea.WindowSizeMsg{Width: 140, Height: 50})
	step(m, tickMsg(time.Now()))
	view := m.View()
	for _, want := range []string{"cli-test-instance", "STREAM", "ROLE", "EV/S", "flaky", "orders", "spare", "running"} {
		if !strings.Contains(view, want) {
			t.Errorf("the view has no %q:\n%s", want, view)
		}
	}
	// The first row (flaky) is selected; moving down selects orders and loads its detail.
	step(m, tea.KeyMsg{Type: tea.KeyDown})
	view = m.View()
	if m.selectedName() != "orders" || m.detail == nil || !strings.Contains(view, "started") {
		t.Errorf("after ↓: selected %q, detail %v:\n%s", m.selectedName(), m.detail != nil, view)
	}
	if _, cmd := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")}); cmd == nil || cmd() != tea.Quit() {
		t.Error("q does not quit")
	}
}

// fakeSource serves a fixed snapshot: a leader, a standby and a stream in backoff.
type fakeSource struct{ snap *messages.SnapshotReply }

func (f fakeSource) Snapshot(context.Context, *messages.SnapshotRequest) (*messages.SnapshotReply, error) {
	return f.snap, nil
}

func (f fakeSource) Describe(_ context.Context, name string, _ int) (*messages.DescribeReply, error) {
	for _, r := range f.snap.GetStreams() {
		if r.GetName() == name {
			return &messages.DescribeReply{Stream: r, Events: []*messages.LifecycleEvent{{Kind: "restarted", Message: "stream " + name + " restarted", At: timestamppb.Now()}}}, nil
		}
	}
	return nil, console.ErrNotFound
}

func TestTopBadgesAndCountdown(t *testing.T) {
	next := time.Now().Add(12 * time.Second)
	snap := &messages.SnapshotReply{
		Instance: &messages.InstanceInfo{Id: "node-a", Host: "h", Version: "v1", Uptime: durationpb.New(time.Hour)},
		Streams: []*messages.StreamRow{
			{Name: "billing", Mode: "SingleLeader", Role: "leader", State: "running", EventsPerSec: 42.5, Lag: durationpb.New(250 * time.Millisecond)},
			{Name: "orders", Mode: "SingleLeader", Role: "standby", State: "standby", Why: "lease held by node-b"},
			{Name: "search", Mode: "AllInstances", State: "backoff", Attempt: 3, MaxAttempts: 5,
				NextRetryAt: timestamppb.New(next), LastError: "connection refused", DeadLetters: 1000},
		},
	}
	m := newTopModel([]source{fakeSource{snap}}, time.Millisecond, time.Second)
	step(m, tickMsg(time.Now()))
	view := m.View()
	lines := strings.Split(view, "\n")
	row := func(name string) string {
		for _, l := range lines {
			if strings.Contains(l, name+" ") && (strings.Contains(l, "running") || strings.Contains(l, "standby") || strings.Contains(l, "backoff")) {
				return l
			}
		}
		t.Fatalf("no row for %s:\n%s", name, view)
		return ""
	}
	if r := row("billing"); !strings.Contains(r, "leader") || !strings.Contains(r, "42.5") || !strings.Contains(r, "250ms") {
		t.Errorf("billing row: %q", r)
	}
	if r := row("orders"); !strings.Contains(r, "standby") {
		t.Errorf("orders row: %q", r)
	}
	r := row("search")
	if !strings.Contains(r, "backoff") || !strings.Contains(r, "3/5 next 1") || !strings.Contains(r, "1000") {
		t.Errorf("search row: %q", r)
	}
	if !strings.Contains(view, "leader 1 · standby 1") || !strings.Contains(view, "node-a") {
		t.Errorf("instance card:\n%s", view)
	}
	step(m, tea.KeyMsg{Type: tea.KeyDown})
	step(m, tea.KeyMsg{Type: tea.KeyDown})
	view = m.View()
	if !strings.Contains(view, "last error: connection refused") || !strings.Contains(view, "restarted") {
		t.Errorf("detail pane of search:\n%s", view)
	}
}

// TestTopSeveralInstances: one card per instance, and a SingleLeader stream shows leader on
// one instance and standby on the other.
func TestTopSeveralInstances(t *testing.T) {
	inst := func(id, role, state string) fakeSource {
		return fakeSource{&messages.SnapshotReply{
			Instance: &messages.InstanceInfo{Id: id, Host: id + ".local", Version: "v1", Uptime: durationpb.New(time.Minute)},
			Streams:  []*messages.StreamRow{{Name: "billing", Mode: "SingleLeader", Role: role, State: state, LeaseOwner: "node-a", LeaseEpoch: 7}},
		}}
	}
	m := newTopModel([]source{inst("node-a", "leader", "running"), inst("node-b", "standby", "standby")}, time.Millisecond, time.Second)
	step(m, tickMsg(time.Now()))
	view := m.View()
	var leader, standby bool
	for _, l := range strings.Split(view, "\n") {
		leader = leader || (strings.Contains(l, "node-a") && strings.Contains(l, "billing") && strings.Contains(l, "leader"))
		standby = standby || (strings.Contains(l, "node-b") && strings.Contains(l, "billing") && strings.Contains(l, "standby"))
	}
	if !leader || !standby || !strings.Contains(view, "INSTANCE") || strings.Count(view, "up 1m0s") != 2 {
		t.Errorf("two instances:\n%s", view)
	}
	step(m, tea.KeyMsg{Type: tea.KeyDown})
	if view := m.View(); !strings.Contains(view, "lease:      node-a epoch 7") || !strings.Contains(view, "billing SingleLeader · node-b") &&
		!strings.Contains(view, "· node-b") {
		t.Errorf("detail of node-b's billing:\n%s", view)
	}
}

// TestTopSelectionSpansTheRow: the selected row is reversed in every cell, the ones after a
// coloured leader badge too (a badge ends its own style), when the terminal shows styles.
func TestTopSelectionSpansTheRow(t *testing.T) {
	profile := lipgloss.ColorProfile()
	lipgloss.SetColorProfile(2) // termenv.ANSI: without a terminal the renderer drops every style
	defer lipgloss.SetColorProfile(profile)
	snap := &messages.SnapshotReply{Instance: &messages.InstanceInfo{Id: "node-a"}, Streams: []*messages.StreamRow{
		{Name: "billing", Mode: "SingleLeader", Role: "leader", State: "running"},
		{Name: "orders", Mode: "AllInstances", State: "running"},
	}}
	m := newTopModel([]source{fakeSource{snap}}, time.Millisecond, time.Second)
	step(m, tickMsg(time.Now()))
	for _, l := range strings.Split(m.View(), "\n") {
		if !strings.Contains(l, "billing") || !strings.Contains(l, "running") {
			continue
		}
		// The cells after the badge: each rendered reversed (SGR 7, alone or with others).
		after := l[strings.Index(l, "leader"):]
		if n := strings.Count(after, "\x1b[7m") + strings.Count(after, ";7m"); n < len(topColumns)-2 {
			t.Errorf("the selected row is reversed in %d cells after its badge, want %d: %q", n, len(topColumns)-2, l)
		}
		return
	}
	t.Fatalf("no billing row in:\n%s", m.View())
}

// TestInstanceWarningsShown: an instance's warnings (another live process with its
// InstanceName) are on its top card and under the streams table's instance line, which names
// both the InstanceName and the InstanceID.
func TestInstanceWarningsShown(t *testing.T) {
	snap := &messages.SnapshotReply{Instance: &messages.InstanceInfo{Id: "api-1-17-ffffff", Name: "api-1", Host: "h",
		Warnings: []string{`InstanceName "api-1" is also used by the live instance api-1-4242-0a1b2c`}}}
	m := newTopModel([]source{fakeSource{snap}}, time.Millisecond, time.Second)
	step(m, tea.WindowSizeMsg{Width: 160, Height: 40})
	step(m, tickMsg(time.Now()))
	if view := m.View(); !strings.Contains(view, `WARNING: InstanceName "api-1"`) || !strings.Contains(view, "│ api-1 ") || !strings.Contains(view, "id api-1-17-ffffff") {
		t.Errorf("top card:\n%s", view)
	}
	var b strings.Builder
	if err := printStreams(&b, snap); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.HasPrefix(out, "instance api-1 (id api-1-17-ffffff)") || !strings.Contains(out, "\nWARNING: InstanceName \"api-1\" is also used") {
		t.Errorf("streams table:\n%s", out)
	}
}

// TestTopShowsAnOutage: while MongoDB does not answer, the console still answers from memory;
// top keeps running and shows the outage on the instance card, the last known dead-letter count
// marked "?" and, in the detail pane, why it is unknown. A console that stops answering is an
// error line, not the end of top: the last snapshot stays on screen.
func TestTopShowsAnOutage(t *testing.T) {
	const down = "MongoDB unreachable since 10:00:00 UTC (42s): no answer for 42s"
	snap := &messages.SnapshotReply{
		Instance: &messages.InstanceInfo{Id: "node-a", MongodbUnreachable: down, OplogNote: down + " (last read 44s ago)"},
		Streams: []*messages.StreamRow{{Name: "billing", Mode: "AllInstances", State: "running",
			DeadLetters: 3, DeadLettersAt: timestamppb.New(time.Now().Add(-44 * time.Second)), DeadLettersUnknown: down + " (last read 44s ago)"}},
	}
	src := &flakySource{fakeSource: fakeSource{snap}}
	m := newTopModel([]source{src}, time.Millisecond, time.Second)
	step(m, tickMsg(time.Now()))
	view := m.View()
	if !strings.Contains(view, "MongoDB unreachable since 10:00:00 UTC") || !strings.Contains(view, "3?") ||
		!strings.Contains(view, "stored count unknown: MongoDB unreachable") {
		t.Errorf("the outage is not shown:\n%s", view)
	}
	src.fail = true
	_, cmd := m.Update(tickMsg(time.Now()))
	for _, msg := range runAll(cmd) {
		if _, quit := msg.(tea.QuitMsg); quit {
			t.Fatal("top quit when its console did not answer")
		}
		m.Update(msg)
	}
	if view := m.View(); !strings.Contains(view, "error: no answer") || !strings.Contains(view, "billing") {
		t.Errorf("after a failed refresh:\n%s", view)
	}
}

// flakySource is a fakeSource whose snapshots fail once fail is set.
type flakySource struct {
	fakeSource
	fail bool
}

func (f *flakySource) Snapshot(ctx context.Context, req *messages.SnapshotRequest) (*messages.SnapshotReply, error) {
	if f.fail {
		return nil, errors.New("no answer")
	}
	return f.fakeSource.Snapshot(ctx, req)
}

// runAll runs cmd (batches included) and returns the messages it produced, ticks left out.
func runAll(cmd tea.Cmd) []tea.Msg {
	if cmd == nil {
		return nil
	}
	switch out := cmd().(type) {
	case tea.BatchMsg:
		var msgs []tea.Msg
		for _, c := range out {
			msgs = append(msgs, runAll(c)...)
		}
		return msgs
	case nil, tickMsg:
		return nil
	default:
		return []tea.Msg{out}
	}
}

// TestTopNamesInstances: with several instances, top shows each one's InstanceName (its
// InstanceID, often a long generated one, only when it has no name) in the INSTANCE column, the
// detail pane and the card's title.
func TestTopNamesInstances(t *testing.T) {
	inst := func(id, name, role, state string) fakeSource {
		return fakeSource{&messages.SnapshotReply{
			Instance: &messages.InstanceInfo{Id: id, Name: name, Host: "h", Version: "v1", Uptime: durationpb.New(time.Minute)},
			Streams:  []*messages.StreamRow{{Name: "billing", Mode: "SingleLeader", Role: role, State: state}},
		}}
	}
	const idA, idB = "5f0c2d9e-8b1a-4c3e-9d7f-0a1b2c3d4e5f", "noname-1"
	m := newTopModel([]source{inst(idA, "billing-a", "leader", "running"), inst(idB, "", "standby", "standby")}, time.Millisecond, time.Second)
	step(m, tickMsg(time.Now()))
	view := m.View()
	var named, fallback bool
	for _, l := range strings.Split(view, "\n") {
		named = named || (strings.Contains(l, "billing-a") && strings.Contains(l, "leader"))
		fallback = fallback || (strings.Contains(l, idB) && strings.Contains(l, "standby") && strings.Contains(l, "billing"))
		if strings.Contains(l, "5f0c2d9e-8b1a-4c…") {
			t.Errorf("a truncated InstanceID in the view: %q", l)
		}
	}
	if !named || !fallback {
		t.Errorf("want billing-a's row by name and noname-1's by id:\n%s", view)
	}
	if !strings.Contains(view, "SingleLeader · billing-a") {
		t.Errorf("detail pane of billing-a's stream without its name:\n%s", view)
	}
}
