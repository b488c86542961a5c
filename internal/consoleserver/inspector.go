package consoleserver

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/readings"
	"github.com/watchtree/watchtree/internal/statusx"
	"github.com/watchtree/watchtree/internal/superclient"
	"github.com/watchtree/watchtree/internal/treekit"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/status"
)

// The inspector is the console actor. Its mailbox goroutine only keeps the console's memory
// (recent lifecycle events, subscribers, rate samples) and starts work: every request is
// answered by a goroutine the actor owns (bounded by the request's timeout and cancelled when
// the actor stops), which asks the supervisors with their own messages, takes the figures only
// MongoDB gives (dead-letter counts, the oplog window) from the runtime's memory
// (Backend.Readings, never a read of the server on the request's path), and sends the reply to
// the requester. Results that update the console's memory come back to the actor as messages.
// A request that needs the server itself (listing, replaying or purging dead letters) is
// refused at once, in the one wording, while MongoDB does not answer.

const (
	recentEvents    = 1024 // lifecycle events kept for the whole instance
	perStreamEvents = 64   // and for each stream (Describe)
	rateWindow      = 10 * time.Second
)

type sample struct {
	at      time.Time
	settled uint64
}

// Plain messages the actor sends itself.
type (
	sampleTick struct{}
	sampled    struct {
		at      time.Time
		settled map[string]uint64
	}
	commandDone struct{ ev *messages.LifecycleEvent }
)

type inspector struct {
	cfg Config
	b   Backend
	sys *actor.ActorSystem
	sc  superclient.Client // the supervisors' client, on sys
	log *zap.Logger
	clk clock.Clock

	seq      uint64
	recent   []*messages.LifecycleEvent
	byStream map[string][]*messages.LifecycleEvent
	subs     map[uint64]*subscriber
	subSeq   uint64
	samples  map[string][]sample
	sampling bool // a sampling round is under way

	work   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	tick   clock.Timer
}

func newInspector(cfg Config, b Backend) *inspector {
	return &inspector{
		cfg: cfg, b: b, log: cfg.Logger, clk: cfg.Clock,
		byStream: map[string][]*messages.LifecycleEvent{},
		subs:     map[uint64]*subscriber{},
		samples:  map[string][]sample{},
	}
}

func (in *inspector) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		in.sys = ctx.ActorSystem()
		in.sc = superclient.New(in.sys)
		in.work, in.cancel = context.WithCancel(context.Background())
		in.armTick(ctx)
	case *actor.Stopping:
		if in.tick != nil {
			in.tick.Stop()
		}
		in.cancel()
		in.wg.Wait()
	case sampleTick:
		in.sample(ctx)
	case sampled:
		in.sampling = false
		in.addSamples(m)
		in.armTick(ctx)
	case viewRequest:
		ctx.Respond(in.view())
	case commandDone:
		in.publish(ctx, m.ev)
	case *messages.LifecycleEvent:
		in.publish(ctx, m)
	case *messages.SnapshotRequest:
		in.answer(ctx, in.cfg.RequestTimeout, func(c context.Context) proto.Message { return in.snapshot(c, ctx.Self(), m) })
	case *messages.DescribeRequest:
		events := in.eventsOf(m.GetStream(), int(m.GetEvents()))
		in.answer(ctx, in.cfg.RequestTimeout, func(c context.Context) proto.Message { return in.describe(c, ctx.Self(), m, events) })
	case *messages.TreeRequest:
		in.answer(ctx, in.cfg.RequestTimeout, func(context.Context) proto.Message { return buildTree(in.sys, in.ours(m.GetAll())) })
	case *messages.DeadLettersRequest:
		in.answer(ctx, in.cfg.RequestTimeout, func(c context.Context) proto.Message { return in.deadLetters(c, m) })
	case *messages.ControlRequest:
		in.control(ctx, m)
	case *messages.SubscribeRequest:
		in.subscribe(ctx, m)
	case *messages.SubscriptionAck:
		in.ack(ctx, m)
	case *messages.Unsubscribe:
		in.unsubscribe(ctx, m.GetId())
	case *actor.Terminated:
		for id, s := range in.subs {
			if s.pid.Equal(m.GetWho()) {
				delete(in.subs, id)
			}
		}
	case *actor.Restarting, *actor.Stopped:
	default:
		in.log.Debug("console: message ignored", zap.String("type", fmt.Sprintf("%T", m)))
		if ctx.Sender() != nil {
			ctx.Respond(&messages.ConsoleError{Code: "invalid", Error: fmt.Sprintf("unknown request %T", m)})
		}
	}
}

// answer runs f on a goroutine the actor owns, bounded by timeout, and sends its reply to the
// requester.
func (in *inspector) answer(ctx actor.Context, timeout time.Duration, f func(context.Context) proto.Message) {
	sender := ctx.Sender()
	if sender == nil {
		return
	}
	in.wg.Go(func() {
		c, cancel := context.WithTimeout(in.work, timeout)
		defer cancel()
		reply := f(c)
		if in.work.Err() != nil {
			return // the console stops: the requester's own timeout answers it
		}
		in.sys.Root.Send(sender, reply)
	})
}

// publish numbers ev, keeps it and sends it to the subscribers.
func (in *inspector) publish(ctx actor.Context, ev *messages.LifecycleEvent) {
	in.seq++
	ev.Seq = in.seq
	in.recent = appendCapped(in.recent, ev, recentEvents)
	if ev.GetStream() != "" {
		in.byStream[ev.GetStream()] = appendCapped(in.byStream[ev.GetStream()], ev, perStreamEvents)
	}
	for _, s := range in.subs {
		if s.stream == "" || s.stream == ev.GetStream() {
			s.push(ev)
			in.flush(ctx, s)
		}
	}
}

func appendCapped(s []*messages.LifecycleEvent, ev *messages.LifecycleEvent, n int) []*messages.LifecycleEvent {
	if len(s) >= n {
		s = append(s[:0:0], s[len(s)-n+1:]...)
	}
	return append(s, ev)
}

func (in *inspector) eventsOf(stream string, n int) []*messages.LifecycleEvent {
	if n <= 0 {
		n = 20
	}
	evs := in.byStream[stream]
	if len(evs) > n {
		evs = evs[len(evs)-n:]
	}
	return append([]*messages.LifecycleEvent(nil), evs...)
}

// armTick schedules the next sampling round.
func (in *inspector) armTick(ctx actor.Context) {
	self, sys := ctx.Self(), ctx.ActorSystem()
	in.tick = in.clk.AfterFunc(in.cfg.SampleInterval, func() { sys.Root.Send(self, sampleTick{}) })
}

// sample asks every supervisor for its settlement count (the rate's samples).
func (in *inspector) sample(ctx actor.Context) {
	if in.sampling {
		return
	}
	in.sampling = true
	self := ctx.Self()
	refs := in.b.Streams()
	in.wg.Go(func() {
		out := sampled{settled: map[string]uint64{}}
		for _, r := range refs {
			if r.Supervisor == nil {
				continue
			}
			if st, err := in.sc.Within(min(in.cfg.SampleInterval, time.Second)).Status(in.work, r.Supervisor); err == nil {
				out.settled[r.Name] = st.GetSettlements().GetSettled()
			}
		}
		out.at = in.clk.Now()
		if in.work.Err() == nil {
			in.sys.Root.Send(self, out)
		}
	})
}

func (in *inspector) addSamples(m sampled) {
	for name, n := range m.settled {
		s := append(in.samples[name], sample{at: m.at, settled: n})
		for len(s) > 1 && m.at.Sub(s[0].at) > rateWindow {
			s = s[1:]
		}
		in.samples[name] = s
	}
	for name := range in.samples {
		if _, ok := m.settled[name]; !ok {
			delete(in.samples, name)
		}
	}
}

// view is the part of the actor's memory a snapshot reads, copied for its goroutine.
type view struct {
	samples map[string][]sample
	subs    []*messages.SubscriberInfo
}

func (in *inspector) view() view {
	v := view{samples: make(map[string][]sample, len(in.samples)), subs: in.subscribers()}
	for k, s := range in.samples {
		v.samples[k] = append([]sample(nil), s...)
	}
	return v
}

func (in *inspector) snapshot(ctx context.Context, self *actor.PID, req *messages.SnapshotRequest) proto.Message {
	return in.snapshotWith(ctx, req, in.viewSync(ctx, self))
}

// viewSync asks the actor for a copy of its memory (the request runs off the actor).
func (in *inspector) viewSync(ctx context.Context, self *actor.PID) view {
	res, err := in.sc.Within(time.Second).Request(ctx, self, viewRequest{})
	if v, ok := res.(view); err == nil && ok {
		return v
	}
	return view{}
}

type viewRequest struct{}

func (in *inspector) snapshotWith(ctx context.Context, req *messages.SnapshotRequest, v view) *messages.SnapshotReply {
	rd := in.b.Readings(ctx)
	now := in.clk.Now()
	refs := in.b.Streams()
	rows := make([]*messages.StreamRow, 0, len(refs))
	var keep []StreamRef
	for _, r := range refs {
		if req.GetFilter() != "" && !strings.Contains(r.Name, req.GetFilter()) {
			continue
		}
		keep = append(keep, r)
	}
	rows = rows[:len(keep)]
	var wg sync.WaitGroup
	for i, r := range keep {
		wg.Go(func() {
			rows[i] = in.row(ctx, r, v.samples[r.Name], rd.DeadLetters[r.Name], rd.Oplog, now)
		})
	}
	wg.Wait()
	if st := req.GetState(); st != "" {
		rows = filterRows(rows, func(r *messages.StreamRow) bool { return r.GetState() == st })
	}
	sortRows(rows, req.GetSort(), req.GetDescending())
	total := uint32(len(rows))
	if l := int(req.GetLimit()); l > 0 && l < len(rows) {
		rows = rows[:l]
	}
	inst := in.instance(rd, now)
	inst.Subscribers = v.subs
	return &messages.SnapshotReply{Instance: inst, Streams: rows, Total: total, At: timestamppb.New(now)}
}

func filterRows(rows []*messages.StreamRow, keep func(*messages.StreamRow) bool) []*messages.StreamRow {
	out := rows[:0]
	for _, r := range rows {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

func sortRows(rows []*messages.StreamRow, by string, desc bool) {
	less := func(a, b *messages.StreamRow) bool { return a.GetName() < b.GetName() }
	switch by {
	case "state":
		less = func(a, b *messages.StreamRow) bool { return a.GetState() < b.GetState() }
	case "lag":
		less = func(a, b *messages.StreamRow) bool { return a.GetLag().AsDuration() < b.GetLag().AsDuration() }
	case "rate":
		less = func(a, b *messages.StreamRow) bool { return a.GetEventsPerSec() < b.GetEventsPerSec() }
	case "restarts":
		less = func(a, b *messages.StreamRow) bool { return a.GetRestarts() < b.GetRestarts() }
	case "dead_letters":
		less = func(a, b *messages.StreamRow) bool { return a.GetDeadLetters() < b.GetDeadLetters() }
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if desc {
			return less(rows[j], rows[i])
		}
		return less(rows[i], rows[j])
	})
}

func (in *inspector) instance(rd readings.Readings, now time.Time) *messages.InstanceInfo {
	inst := in.b.Instance()
	ii := &messages.InstanceInfo{
		Id: inst.ID, Name: inst.Name, Warnings: inst.Warnings, Host: inst.Host, Version: inst.Version, GoVersion: goVersion(), Pid: int64(pid()),
		StartedAt: timestamppb.New(inst.StartedAt), Uptime: durationpb.New(now.Sub(inst.StartedAt).Round(time.Second)),
		Address: in.sys.Address(), TokenRequired: in.cfg.Token != "", OplogNote: rd.Oplog.Unknown,
		OplogReadAt: timestamp(rd.Oplog.At), MongodbUnreachable: rd.Unreachable,
	}
	if rd.Oplog.Unknown == "" && !rd.Oplog.Oldest.IsZero() {
		ii.OplogOldest, ii.OplogNewest = timestamppb.New(rd.Oplog.Oldest), timestamppb.New(rd.Oplog.Newest)
	}
	return ii
}

// row builds one stream's row: status.Row of its status, with what only the console knows
// (the namespace, the dead-letter backlog, the rate, the distances to the oplog).
func (in *inspector) row(ctx context.Context, r StreamRef, samples []sample, dl readings.Count, oplog readings.Oplog, now time.Time) *messages.StreamRow {
	var st status.Stream
	note := ""
	if r.Supervisor == nil {
		st = statusx.Read(nil, r.local())
	} else if reply, err := in.sc.Within(in.cfg.RequestTimeout).Status(ctx, r.Supervisor); err != nil {
		st = status.Stream{Name: r.Name, Mode: r.Mode, Cursor: r.Cursor, State: status.Unknown}
		note = "status: " + err.Error()
	} else {
		st = statusx.Read(reply, r.local())
	}
	row := status.Row(st, now)
	row.Namespace, row.Note = r.Namespace, joinNote(row.Note, note)
	row.DeadLetters, row.DeadLettersUnknown, row.DeadLettersAt = uint64(max(dl.N, 0)), dl.Unknown, timestamp(dl.At)
	if len(samples) > 0 {
		first := samples[0]
		if dt := now.Sub(first.at).Seconds(); dt >= 0.5 && row.Settled >= first.settled {
			row.EventsPerSec = float64(row.Settled-first.settled) / dt
		}
	}
	if oplog.Unknown == "" && !oplog.Newest.IsZero() {
		if !st.ReadThrough.IsZero() {
			row.OplogBehind = durationpb.New(max(oplog.Newest.Sub(st.ReadThrough), 0))
		}
		if row.CheckpointTime != nil {
			row.TokenHeadroom = durationpb.New(row.CheckpointTime.AsTime().Sub(oplog.Oldest))
		}
	}
	return row
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	if b == "" {
		return a
	}
	return a + "; " + b
}

// timestamp is t as a protobuf timestamp, nil for the zero time (never read).
func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func (in *inspector) describe(ctx context.Context, self *actor.PID, req *messages.DescribeRequest, events []*messages.LifecycleEvent) proto.Message {
	ref, ok := in.lookup(req.GetStream())
	if !ok {
		return &messages.ConsoleError{Code: "not_found", Error: in.unknownStream(req.GetStream())}
	}
	v := in.viewSync(ctx, self)
	snap := in.snapshotWith(ctx, &messages.SnapshotRequest{Filter: ref.Name}, v)
	out := &messages.DescribeReply{Events: events}
	for _, r := range snap.GetStreams() {
		if r.GetName() == ref.Name {
			out.Stream = r
		}
	}
	if ref.Supervisor != nil {
		if st, err := in.sc.Within(in.cfg.RequestTimeout).Status(ctx, ref.Supervisor); err == nil {
			out.Status = st
		}
	}
	return out
}

// unknownStream says that name is not a stream of this instance, and which are.
func (in *inspector) unknownStream(name string) string {
	refs := in.b.Streams()
	if len(refs) == 0 {
		return fmt.Sprintf("unknown stream %q: this instance runs no streams", name)
	}
	names := make([]string, 0, min(len(refs), 10))
	for _, r := range refs[:min(len(refs), 10)] {
		names = append(names, r.Name)
	}
	more := ""
	if len(refs) > 10 {
		more = fmt.Sprintf(" and %d more", len(refs)-10)
	}
	return fmt.Sprintf("unknown stream %q: this instance runs %s%s", name, strings.Join(names, ", "), more)
}

func (in *inspector) lookup(name string) (StreamRef, bool) {
	for _, r := range in.b.Streams() {
		if r.Name == name {
			return r, true
		}
	}
	return StreamRef{}, false
}

func (in *inspector) deadLetters(ctx context.Context, req *messages.DeadLettersRequest) proto.Message {
	if _, ok := in.lookup(req.GetStream()); !ok {
		return &messages.ConsoleError{Code: "not_found", Error: in.unknownStream(req.GetStream())}
	}
	limit := int(req.GetLimit())
	if limit <= 0 {
		limit = 100
	}
	var list []*messages.DeadLetterInfo
	u, err := in.whileReachable(ctx, func(c context.Context) (err error) {
		list, err = in.b.DeadLetters(c, req.GetStream(), limit)
		return err
	})
	if u != "" {
		return &messages.ConsoleError{Code: "unavailable", Error: u + ": the dead letters cannot be listed"}
	}
	if err != nil {
		return &messages.ConsoleError{Code: codeOf(err), Error: err.Error()}
	}
	return &messages.DeadLettersReply{Stream: req.GetStream(), DeadLetters: list}
}

// reachPoll is how often whileReachable looks at MongoDB's reachability.
const reachPoll = 100 * time.Millisecond

// whileReachable runs f, which reads or writes MongoDB, bounded by ctx and by the server's
// reachability: when the runtime's readings say MongoDB does not answer (before f or while it
// runs), f's context ends and unreachable is the one wording of that condition. A request that
// needs the server so answers within about a second of an outage's start, and at once after.
func (in *inspector) whileReachable(ctx context.Context, f func(context.Context) error) (unreachable string, err error) {
	if u := in.b.Readings(ctx).Unreachable; u != "" {
		return u, nil
	}
	c, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f(c) }()
	tick := time.NewTicker(reachPoll)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return "", err
		case <-tick.C:
			if u := in.b.Readings(ctx).Unreachable; u != "" {
				cancel()
				<-done
				return u, nil
			}
		}
	}
}

func codeOf(err error) string {
	switch {
	case errors.Is(err, ErrNotFound):
		return "not_found"
	case errors.Is(err, ErrUnsupported):
		return "unsupported"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "failed"
}

// control carries out a ControlRequest: the token is checked on the actor, the command runs on
// an owned goroutine, and both the request and its outcome are logged with who asked and
// published as a "command" lifecycle event.
func (in *inspector) control(ctx actor.Context, req *messages.ControlRequest) {
	who := req.GetRequestedBy()
	if who == "" {
		who = "anonymous"
	}
	if s := ctx.Sender(); s != nil && s.Address != in.sys.Address() {
		who += " via remote " + s.Address
	}
	action := actionName(req.GetAction())
	log := in.log.With(zap.String("command", action), zap.String("stream", req.GetStream()),
		zap.String("requested_by", who), zap.String("dead_letter_id", req.GetDeadLetterId()))
	if in.cfg.Token != "" && subtle.ConstantTimeCompare([]byte(req.GetToken()), []byte(in.cfg.Token)) != 1 {
		log.Warn("console: command refused: wrong or missing token")
		if ctx.Sender() != nil {
			ctx.Respond(&messages.ControlReply{Code: "unauthenticated", Error: "console: the token is missing or wrong: " + action + " needs the console's token"})
		}
		return
	}
	log.Info("console: command received")
	timeout := time.Duration(req.GetTimeoutMs()) * time.Millisecond
	if timeout <= 0 {
		timeout = DefaultControlTimeout
	}
	timeout = min(timeout, maxControlTimeout)
	self := ctx.Self()
	in.answer(ctx, timeout, func(c context.Context) proto.Message {
		reply := in.run(c, req, who)
		ev := &messages.LifecycleEvent{Stream: req.GetStream(), At: timestamppb.New(in.clk.Now()), Kind: "command",
			Message: fmt.Sprintf("%s %s by %s", action, req.GetStream(), who)}
		if reply.GetCode() == "not_found" {
			if _, known := in.lookup(req.GetStream()); !known {
				ev.Stream = "" // an instance event: a typo must not take a place in the per-stream memory
			}
		}
		if reply.GetOk() {
			log.Info("console: command done", zap.String("detail", reply.GetDetail()))
			ev.Message += ": done"
		} else {
			log.Warn("console: command failed", zap.String("code", reply.GetCode()), zap.String("error", reply.GetError()))
			ev.Message += ": " + reply.GetCode()
			ev.Cause = reply.GetError()
		}
		in.sys.Root.Send(self, commandDone{ev})
		return reply
	})
}

const (
	// DefaultControlTimeout bounds a command that names no timeout (30s), in the console and in
	// the client's wait for it.
	DefaultControlTimeout = 30 * time.Second
	maxControlTimeout     = 5 * time.Minute
)

func actionName(a messages.ControlAction) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(a.String(), "CONTROL_ACTION_"), "_", "-"))
}

func (in *inspector) run(ctx context.Context, req *messages.ControlRequest, who string) *messages.ControlReply {
	ref, ok := in.lookup(req.GetStream())
	if !ok {
		return &messages.ControlReply{Code: "not_found", Error: in.unknownStream(req.GetStream())}
	}
	reason := "console: " + who
	switch req.GetAction() {
	case messages.ControlAction_CONTROL_ACTION_START:
		return in.supervise(ctx, ref, &messages.Start{Reason: reason}, true)
	case messages.ControlAction_CONTROL_ACTION_RESTART:
		return in.supervise(ctx, ref, &messages.Restart{Reason: reason}, true)
	case messages.ControlAction_CONTROL_ACTION_STOP:
		return in.supervise(ctx, ref, in.commands().GracefulStop(ctx, reason), false)
	case messages.ControlAction_CONTROL_ACTION_RELEASE_LEASE:
		if ref.Mode != status.ModeSingleLeader {
			return &messages.ControlReply{Code: "unsupported", Error: fmt.Sprintf("stream %q is not a SingleLeader stream (mode %s): it holds no lease", ref.Name, ref.Mode)}
		}
		return in.releaseLease(ctx, ref, reason)
	case messages.ControlAction_CONTROL_ACTION_REPLAY, messages.ControlAction_CONTROL_ACTION_PURGE:
		return in.deadLetterCommand(ctx, ref, req)
	case messages.ControlAction_CONTROL_ACTION_SNAPSHOT:
		return in.onDemandSnapshot(ctx, ref, req)
	}
	return &messages.ControlReply{Code: "invalid", Error: fmt.Sprintf("unknown action %v", req.GetAction())}
}

// commands is the client of the control commands: bounded by their request's ctx and by
// maxControlTimeout.
func (in *inspector) commands() superclient.Client { return in.sc.Within(maxControlTimeout) }

// notRunning is the reply to a command for a stream whose tree is not running.
func notRunning(ref StreamRef) *messages.ControlReply {
	return &messages.ControlReply{Code: "failed", Error: fmt.Sprintf("stream %q: its supervisor is not running (the runtime is stopping)", ref.Name)}
}

// supervise sends a lifecycle message to the stream's supervisor; for Start and Restart it then
// waits, as the Handle does, until the stream left starting and backoff.
func (in *inspector) supervise(ctx context.Context, ref StreamRef, msg proto.Message, await bool) *messages.ControlReply {
	if ref.Supervisor == nil {
		return notRunning(ref)
	}
	reply, err := in.commands().Ask(ctx, ref.Supervisor, msg)
	if err == nil && await {
		reply, err = in.commands().AwaitRunning(ctx, ref.Supervisor)
	}
	if err != nil {
		return &messages.ControlReply{Code: codeOf(err), Error: fmt.Sprintf("stream %q: %v", ref.Name, err)}
	}
	st := statusx.Read(reply, ref.local())
	out := &messages.ControlReply{Ok: true, Status: reply, Detail: "state " + string(st.State)}
	if ls := st.LastStop; !await && ls != nil {
		out.Detail = fmt.Sprintf("stopped: %d settled, %d unsettled, drained %v, flushed %v", ls.Settled, ls.Unsettled, ls.Drained, ls.Flushed)
		if ls.Failed() {
			out.Ok, out.Code, out.Error = false, "failed", ls.Error
			if ls.TimedOut() {
				out.Code = "timeout"
			}
		}
	}
	if await && st.State == status.Crashed {
		out.Ok, out.Code, out.Error = false, "failed", "crashed while starting: "+st.LastCause
	}
	return out
}

// releaseLease asks the stream's supervisor to hand its lease over (ReleaseLease: drain, flush,
// release, then standby) and reports whether this instance held it.
func (in *inspector) releaseLease(ctx context.Context, ref StreamRef, reason string) *messages.ControlReply {
	if ref.Supervisor == nil {
		return notRunning(ref)
	}
	reply, err := in.commands().Status(ctx, ref.Supervisor)
	if err != nil {
		return &messages.ControlReply{Code: codeOf(err), Error: fmt.Sprintf("stream %q: %v", ref.Name, err)}
	}
	before := statusx.Read(reply, ref.local())
	if !before.Leads() {
		holder := "nobody"
		if before.Lease != nil && before.Lease.Owner != "" {
			holder = before.Lease.Owner
		}
		return &messages.ControlReply{Code: "failed", Status: reply,
			Error: fmt.Sprintf("stream %q: this instance does not hold the lease (held by %s): release it on the leader", ref.Name, holder)}
	}
	out := in.supervise(ctx, ref, &messages.ReleaseLease{Reason: reason}, false)
	if out.GetOk() {
		out.Detail = fmt.Sprintf("lease released (epoch %d): %s", before.Lease.Epoch, out.GetDetail())
		if ls := statusx.Read(out.GetStatus(), ref.local()).LastStop; ls != nil && !ls.Released {
			out.Ok, out.Code, out.Error = false, "failed", fmt.Sprintf("stream %q: the lease was not released (it lapses at its expiry): %s", ref.Name, ls.Error)
		}
	}
	return out
}

// deadLetterCommand replays or purges one dead letter, or all of the stream's. Of all, the ones
// gone meanwhile (not found) or not replayable as asked (unsupported) are skipped, not failed:
// there is nothing a retry of the command would change.
func (in *inspector) deadLetterCommand(ctx context.Context, ref StreamRef, req *messages.ControlRequest) *messages.ControlReply {
	ids := []string{req.GetDeadLetterId()}
	all := ids[0] == ""
	if all {
		var list []*messages.DeadLetterInfo
		u, err := in.whileReachable(ctx, func(c context.Context) (err error) {
			list, err = in.b.DeadLetters(c, ref.Name, 0)
			return err
		})
		if u != "" {
			return &messages.ControlReply{Code: "unavailable", Error: u + ": " + actionName(req.GetAction()) + " needs it"}
		}
		if err != nil {
			return &messages.ControlReply{Code: codeOf(err), Error: err.Error()}
		}
		ids = ids[:0]
		for _, d := range list {
			ids = append(ids, d.GetId())
		}
	}
	do := func(ctx context.Context, stream, id string) error {
		return in.b.Replay(ctx, stream, id, req.GetRefresh())
	}
	verb := "replayed"
	if req.GetAction() == messages.ControlAction_CONTROL_ACTION_PURGE {
		do, verb = in.b.Purge, "purged"
	}
	reply := &messages.ControlReply{Ok: true}
	var errs []string
	for _, id := range ids {
		u, err := in.whileReachable(ctx, func(c context.Context) error { return do(c, ref.Name, id) })
		if u != "" {
			reply.Failed += uint32(len(ids)) - reply.Done - reply.Failed - reply.Skipped
			reply.Code, errs = "unavailable", append(errs, u+": "+actionName(req.GetAction())+" needs it")
			break
		}
		if err != nil {
			if all && (errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnsupported)) {
				reply.Skipped++
				continue
			}
			reply.Failed++
			if len(errs) < 5 {
				errs = append(errs, err.Error())
			}
			if reply.Code == "" || reply.Code == "failed" {
				reply.Code = codeOf(err)
			}
			continue
		}
		reply.Done++
	}
	if reply.Failed > 0 {
		reply.Ok, reply.Error = false, strings.Join(errs, "\n")
	}
	reply.Detail = fmt.Sprintf("%d %s, %d failed, %d skipped", reply.Done, verb, reply.Failed, reply.Skipped)
	return reply
}

// onDemandSnapshot asks the stream's supervisor for an on-demand snapshot (OnDemandSnapshot, as
// Handle.Snapshot does) of the documents matching the request's filter.
func (in *inspector) onDemandSnapshot(ctx context.Context, ref StreamRef, req *messages.ControlRequest) *messages.ControlReply {
	if ref.Supervisor == nil {
		return notRunning(ref)
	}
	var filter []byte
	if f := req.GetFilter(); f != "" {
		var raw bson.Raw
		if err := bson.UnmarshalExtJSON([]byte(f), false, &raw); err != nil {
			return &messages.ControlReply{Code: "invalid", Error: fmt.Sprintf("filter %q is not a JSON document: %v", f, err)}
		}
		filter = raw
	}
	id := fmt.Sprintf("ondemand-console-%d", in.clk.Now().UnixMilli())
	r, err := in.commands().OnDemandSnapshot(ctx, ref.Supervisor, id, filter)
	if err != nil {
		return &messages.ControlReply{Code: codeOf(err), Error: fmt.Sprintf("stream %q: %v", ref.Name, err)}
	}
	switch r.GetCode() {
	case "":
		return &messages.ControlReply{Ok: true, Detail: "on-demand snapshot " + id + " started"}
	case treekit.OnDemandUnsupported:
		return &messages.ControlReply{Code: "unsupported", Error: fmt.Sprintf("stream %q: %s", ref.Name, r.GetError())}
	}
	return &messages.ControlReply{Code: "failed", Error: fmt.Sprintf("stream %q: %s", ref.Name, r.GetError())}
}
