package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/spf13/cobra"

	"github.com/watchtree/watchtree/messages"
	wtstatus "github.com/watchtree/watchtree/status"
)

func topCmd(o *opts) *cobra.Command {
	var every time.Duration
	cmd := &cobra.Command{
		Use:   "top",
		Short: "A live full-screen view: instance cards, streams (role, state, restart countdown, events/s, lag), detail pane",
		Long: "top shows one or more instances live. --addr may list several consoles, comma-separated\n" +
			"(the instances of one service): one card per instance, and the streams of all of them,\n" +
			"so a SingleLeader stream shows leader on one instance and standby on the others.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var srcs []source
			for _, addr := range strings.Split(o.addr, ",") {
				oo := *o
				oo.addr = strings.TrimSpace(addr)
				c, err := oo.client()
				if err != nil {
					return err
				}
				defer c.Close()
				// Fail before taking over the terminal when a console cannot be reached.
				ctx, cancel := o.ctx(cmd)
				_, err = c.Snapshot(ctx, &messages.SnapshotRequest{Limit: 1})
				cancel()
				if err != nil {
					return err
				}
				srcs = append(srcs, c)
			}
			m := newTopModel(srcs, every, o.timeout)
			_, err := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(cmd.Context())).Run()
			if err == tea.ErrProgramKilled && cmd.Context().Err() != nil {
				return nil
			}
			return err
		},
	}
	cmd.Flags().DurationVar(&every, "every", time.Second, "refresh interval")
	return cmd
}

// source is what the view reads; *console.Client is one.
type source interface {
	Snapshot(ctx context.Context, req *messages.SnapshotRequest) (*messages.SnapshotReply, error)
	Describe(ctx context.Context, stream string, events int) (*messages.DescribeReply, error)
}

// topModel is the bubbletea model of `watchtree top`: one or more instances.
type topModel struct {
	srcs    []source
	every   time.Duration
	timeout time.Duration

	snaps    []*messages.SnapshotReply // by source; nil until the first answer
	errs     []error
	detail   *messages.DescribeReply
	selected int
	width    int
	height   int
}

// topRow is one row of the streams table: a stream of one instance.
type topRow struct {
	inst int
	r    *messages.StreamRow
}

type (
	tickMsg time.Time
	snapMsg struct {
		inst int
		snap *messages.SnapshotReply
		err  error
	}
	describeMsg struct {
		inst int
		d    *messages.DescribeReply
		err  error
	}
)

func newTopModel(srcs []source, every, timeout time.Duration) *topModel {
	if every <= 0 {
		every = time.Second
	}
	return &topModel{srcs: srcs, every: every, timeout: timeout, width: 120, height: 40,
		snaps: make([]*messages.SnapshotReply, len(srcs)), errs: make([]error, len(srcs))}
}

func (m *topModel) Init() tea.Cmd { return tea.Batch(m.fetch(), m.tick()) }

func (m *topModel) tick() tea.Cmd {
	return tea.Tick(m.every, func(t time.Time) tea.Msg { return tickMsg(t) })
}

// fetch asks every instance for its snapshot, in parallel.
func (m *topModel) fetch() tea.Cmd {
	cmds := make([]tea.Cmd, len(m.srcs))
	for i, src := range m.srcs {
		cmds[i] = func() tea.Msg {
			ctx, cancel := context.WithTimeout(context.Background(), m.timeout)
			defer cancel()
			s, err := src.Snapshot(ctx, &messages.SnapshotRequest{})
			return snapMsg{i, s, err}
		}
	}
	return tea.Batch(cmds...)
}

func (m *topModel) describe() tea.Cmd {
	row, ok := m.selectedRow()
	if !ok {
		return nil
	}
	src, name := m.srcs[row.inst], row.r.GetName()
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), m.timeout)
		defer cancel()
		d, err := src.Describe(ctx, name, 8)
		return describeMsg{row.inst, d, err}
	}
}

// rows are the streams of every instance, by instance then name.
func (m *topModel) rows() []topRow {
	var out []topRow
	for i, s := range m.snaps {
		for _, r := range s.GetStreams() {
			out = append(out, topRow{i, r})
		}
	}
	return out
}

func (m *topModel) selectedRow() (topRow, bool) {
	rows := m.rows()
	if m.selected >= len(rows) {
		return topRow{}, false
	}
	return rows[m.selected], true
}

func (m *topModel) selectedName() string {
	row, _ := m.selectedRow()
	return row.r.GetName()
}

func (m *topModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case tickMsg:
		return m, tea.Batch(m.fetch(), m.describe(), m.tick())
	case snapMsg:
		m.errs[msg.inst] = msg.err
		if msg.err == nil {
			m.snaps[msg.inst] = msg.snap
			if n := len(m.rows()); m.selected >= n {
				m.selected = max(n-1, 0)
			}
		}
	case describeMsg:
		if row, ok := m.selectedRow(); ok && msg.err == nil && msg.inst == row.inst && msg.d.GetStream().GetName() == row.r.GetName() {
			m.detail = msg.d
		}
	case tea.KeyMsg:
		switch msg.String() {
		case "q", "ctrl+c", "esc":
			return m, tea.Quit
		case "up", "k":
			if m.selected > 0 {
				m.selected--
				m.detail = nil
				return m, m.describe()
			}
		case "down", "j":
			if m.selected < len(m.rows())-1 {
				m.selected++
				m.detail = nil
				return m, m.describe()
			}
		}
	}
	return m, nil
}

var (
	titleStyle   = lipgloss.NewStyle().Bold(true)
	cardStyle    = lipgloss.NewStyle().Border(lipgloss.RoundedBorder()).Padding(0, 1)
	headerStyle  = lipgloss.NewStyle().Bold(true).Underline(true)
	leaderStyle  = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("2"))
	standbyStyle = lipgloss.NewStyle().Foreground(lipgloss.Color("3"))
	badStyle     = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("1"))
	dimStyle     = lipgloss.NewStyle().Faint(true)
)

func (m *topModel) View() string {
	var b strings.Builder
	b.WriteString(titleStyle.Render("watchtree top") + dimStyle.Render("  ↑/↓ select · q quit") + "\n")
	for _, err := range m.errs {
		if err != nil {
			b.WriteString(badStyle.Render("error: "+err.Error()) + "\n")
		}
	}
	var cards []string
	for _, s := range m.snaps {
		if s != nil {
			cards = append(cards, instanceCard(s))
		}
	}
	if len(cards) == 0 {
		b.WriteString("connecting…\n")
		return b.String()
	}
	b.WriteString(lipgloss.JoinHorizontal(lipgloss.Top, cards...) + "\n")
	b.WriteString(m.table())
	b.WriteString(m.detailPane())
	return b.String()
}

func instanceCard(snap *messages.SnapshotReply) string {
	in := snap.GetInstance()
	var leaders, standbys, up, down int
	for _, r := range snap.GetStreams() {
		switch r.GetRole() {
		case wtstatus.RoleLeader:
			leaders++
		case wtstatus.RoleStandby:
			standbys++
		}
		switch wtstatus.State(r.GetState()) {
		case wtstatus.Running, wtstatus.Standby:
			up++
		default:
			down++
		}
	}
	lines := []string{
		titleStyle.Render(instanceLabel(in)),
		fmt.Sprintf("id %s · host %s · %s · up %s", in.GetId(), in.GetHost(), in.GetVersion(), dur(in.GetUptime())),
		fmt.Sprintf("streams %d · up %d · not up %d · leader %d · standby %d", len(snap.GetStreams()), up, down, leaders, standbys),
	}
	if in.GetOplogNewest() != nil {
		lines = append(lines, fmt.Sprintf("oplog window %s", in.GetOplogNewest().AsTime().Sub(in.GetOplogOldest().AsTime()).Round(time.Second)))
	}
	if u := in.GetMongodbUnreachable(); u != "" {
		// The outage is what the operator must see: the states below are still current.
		lines = append(lines, badStyle.Render(oneLine(u, 90)))
	}
	for _, w := range in.GetWarnings() {
		lines = append(lines, badStyle.Render("WARNING: "+oneLine(w, 100)))
	}
	return cardStyle.Render(strings.Join(lines, "\n"))
}

// topColumns are the streams table's columns and widths.
var topColumns = []struct {
	title string
	width int
}{{"STREAM", 22}, {"ROLE", 14}, {"STATE", 9}, {"RESTART", 20}, {"EV/S", 8}, {"LAG", 9}, {"CKPT", 11}, {"DEAD", 6}}

func cell(s string, w int) string {
	if len([]rune(s)) > w {
		s = string([]rune(s)[:w-1]) + "…"
	}
	return s + strings.Repeat(" ", w-len([]rune(s)))
}

func (m *topModel) table() string {
	var b strings.Builder
	multi := len(m.srcs) > 1
	var hdr []string
	if multi {
		hdr = append(hdr, cell("INSTANCE", instWidth))
	}
	for _, c := range topColumns {
		hdr = append(hdr, cell(c.title, c.width))
	}
	b.WriteString(headerStyle.Render(strings.Join(hdr, " ")) + "\n")
	for i, row := range m.rows() {
		r := row.r
		cells := []string{r.GetName(), badge(r), r.GetState(), restartCell(r),
			fmt.Sprintf("%.1f", r.GetEventsPerSec()), dur(r.GetLag()), age(r.GetCheckpointAt()), deadCell(r)}
		// The selected row is reversed cell by cell: a styled badge ends its own style, so
		// reversing the joined line would stop at the first badge.
		sel := i == m.selected
		base := lipgloss.NewStyle().Reverse(sel)
		var out []string
		if multi {
			out = append(out, base.Render(cell(instanceLabel(m.snaps[row.inst].GetInstance()), instWidth)))
		}
		for j, c := range cells {
			style := base
			switch {
			case j == 1 && c == wtstatus.RoleLeader:
				style = leaderStyle.Reverse(sel)
			case j == 1 && c == wtstatus.RoleStandby:
				style = standbyStyle.Reverse(sel)
			case j == 2 && (r.GetState() == string(wtstatus.Crashed) || r.GetState() == string(wtstatus.Backoff)):
				style = badStyle.Reverse(sel)
			}
			out = append(out, style.Render(cell(c, topColumns[j].width)))
		}
		b.WriteString(strings.Join(out, base.Render(" ")) + "\n")
	}
	return b.String()
}

// instanceLabel names an instance in the view: its InstanceName, which an operator chose, or
// its InstanceID when it has none (an ID is often a generated one, cut short in the column).
func instanceLabel(in *messages.InstanceInfo) string {
	if n := in.GetName(); n != "" {
		return n
	}
	return in.GetId()
}

// instWidth is the INSTANCE column's width (several instances).
const instWidth = 16

func (m *topModel) detailPane() string {
	row, ok := m.selectedRow()
	if !ok {
		return ""
	}
	r, name := row.r, row.r.GetName()
	lines := []string{
		titleStyle.Render(name) + " " + dimStyle.Render(r.GetNamespace()+" · "+r.GetMode()+" · "+instanceLabel(m.snaps[row.inst].GetInstance())),
		"why:        " + oneLine(r.GetWhy(), 90),
		fmt.Sprintf("restart:    %s · deaths %d · restarts %d", restartCell(r), r.GetDeaths(), r.GetRestarts()),
		fmt.Sprintf("flow:       %.1f ev/s · settled %d · in flight %d · lag %s", r.GetEventsPerSec(), r.GetSettled(), r.GetInFlight(), dur(r.GetLag())),
		fmt.Sprintf("checkpoint: %s (%s)", age(r.GetCheckpointAt()), r.GetCheckpointSource()),
		fmt.Sprintf("dead:       %s stored · %d since spawn", deadCell(r), r.GetDeadLettered()),
	}
	if u := r.GetDeadLettersUnknown(); u != "" {
		lines = append(lines, dimStyle.Render("            stored count unknown: "+oneLine(u, 80)))
	}
	if r.GetLastError() != "" {
		lines = append(lines, badStyle.Render("last error: "+oneLine(r.GetLastError(), 90)))
	}
	if r.GetLeaseOwner() != "" {
		lines = append(lines, fmt.Sprintf("lease:      %s epoch %d", r.GetLeaseOwner(), r.GetLeaseEpoch()))
	}
	if m.detail != nil {
		for _, ev := range m.detail.GetEvents() {
			lines = append(lines, dimStyle.Render(fmt.Sprintf("%s %-14s %s", ev.GetAt().AsTime().Local().Format("15:04:05"), ev.GetKind(), oneLine(ev.GetMessage(), m.tableWidth()-4-24))))
		}
	}
	// As wide as the table (its border outside), whatever its lines: the pane keeps its size
	// as the rows change.
	return "\n" + cardStyle.Width(m.tableWidth()-2).Render(strings.Join(lines, "\n")) + "\n"
}

// tableWidth is the streams table's width in cells.
func (m *topModel) tableWidth() int {
	w := len(topColumns) - 1 // the separators
	if len(m.srcs) > 1 {
		w += instWidth + 1
	}
	for _, c := range topColumns {
		w += c.width
	}
	return w
}
