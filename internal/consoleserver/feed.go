package consoleserver

import (
	"fmt"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/watchtree/watchtree/messages"
)

// A subscription's feed. The console never sends a subscriber more than its window of events it
// has not acknowledged (SubscriptionAck); the next events wait in the subscription's queue, and
// those that find the queue full are dropped and counted. So a slow or vanished subscriber costs
// at most window+feedQueue events of memory and never grows protoactor's send queues, and every
// event it receives says how many it missed (LifecycleEvent.dropped). The facade's relay is a
// subscriber like any other: it acknowledges each event once gRPC has sent it.

const (
	defaultWindow = 64
	maxWindow     = 1024
	// feedQueue is how many events a subscription may hold beyond its window: a full backlog
	// (recentEvents) and its end marker fit.
	feedQueue = recentEvents + 1
	// maxSubscribers bounds the subscriptions a console holds (a peer needs no token to
	// subscribe).
	maxSubscribers = 256
)

type subscriber struct {
	id     uint64
	pid    *actor.PID
	stream string
	since  time.Time
	window uint64

	queue                     []*messages.LifecycleEvent
	delivered, acked, dropped uint64
}

// push queues ev, or counts it dropped when the queue is full.
func (s *subscriber) push(ev *messages.LifecycleEvent) {
	if len(s.queue) >= feedQueue {
		s.dropped++
		return
	}
	s.queue = append(s.queue, ev)
}

// flush sends the queued events the window allows, each stamped with the subscription, its
// running count and the drops so far.
func (in *inspector) flush(ctx actor.Context, s *subscriber) {
	for len(s.queue) > 0 && s.delivered-s.acked < s.window {
		ev := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.delivered++
		out := proto.Clone(ev).(*messages.LifecycleEvent)
		out.Subscription, out.Delivered, out.Dropped = s.id, s.delivered, s.dropped
		ctx.Send(s.pid, out)
	}
	if len(s.queue) == 0 {
		s.queue = nil // let the backing array go
	}
}

func (s *subscriber) info() *messages.SubscriberInfo {
	return &messages.SubscriberInfo{Id: s.id, Subscriber: s.pid.Address + "/" + s.pid.Id, Stream: s.stream,
		Since: timestamppb.New(s.since), Delivered: s.delivered, Acknowledged: s.acked,
		Queued: uint32(len(s.queue)), Dropped: s.dropped, Window: uint32(s.window)}
}

func (in *inspector) subscribe(ctx actor.Context, m *messages.SubscribeRequest) {
	refuse := func(msg string) {
		if ctx.Sender() != nil {
			ctx.Respond(&messages.ConsoleError{Code: "invalid", Error: msg})
		}
	}
	if m.GetSubscriberId() == "" {
		refuse("SubscribeRequest.subscriber_id is required")
		return
	}
	if st := m.GetStream(); st != "" {
		if _, ok := in.lookup(st); !ok {
			if ctx.Sender() != nil {
				ctx.Respond(&messages.ConsoleError{Code: "not_found", Error: in.unknownStream(st)})
			}
			return
		}
	}
	if len(in.subs) >= maxSubscribers {
		if ctx.Sender() != nil {
			ctx.Respond(&messages.ConsoleError{Code: "exhausted",
				Error: fmt.Sprintf("the console has %d subscribers, its maximum: end one first", maxSubscribers)})
		}
		return
	}
	window := uint64(m.GetWindow())
	if window > maxWindow {
		refuse(fmt.Sprintf("SubscribeRequest.window %d is above the maximum %d", window, maxWindow))
		return
	}
	if window == 0 {
		window = defaultWindow
	}
	addr := m.GetSubscriberAddress()
	if addr == "" {
		addr = in.sys.Address()
	}
	pid := actor.NewPID(addr, m.GetSubscriberId())
	in.subSeq++
	s := &subscriber{id: in.subSeq, pid: pid, stream: m.GetStream(), since: in.clk.Now(), window: window}
	in.subs[s.id] = s
	ctx.Watch(pid)
	if ctx.Sender() != nil {
		ctx.Respond(&messages.SubscribeReply{Id: s.id})
	}
	backlog := in.recent
	if s.stream != "" {
		backlog = in.byStream[s.stream]
	}
	if n := int(m.GetBacklog()); n < len(backlog) {
		backlog = backlog[len(backlog)-n:]
	}
	for _, ev := range backlog {
		s.push(ev)
	}
	s.push(&messages.LifecycleEvent{Kind: BacklogEnd, At: timestamppb.New(in.clk.Now())})
	in.flush(ctx, s)
}

// BacklogEnd is the kind of the marker event a subscription receives after its backlog: the
// events after it are live. It carries no seq.
const BacklogEnd = "backlog-end"

// ack records a subscriber's acknowledgement and sends what its window now allows. A count
// beyond what was delivered is taken as everything delivered; an older one changes nothing.
func (in *inspector) ack(ctx actor.Context, m *messages.SubscriptionAck) {
	s, ok := in.subs[m.GetId()]
	if !ok {
		return
	}
	if r := min(m.GetReceived(), s.delivered); r > s.acked {
		s.acked = r
	}
	in.flush(ctx, s)
}

func (in *inspector) unsubscribe(ctx actor.Context, id uint64) {
	if s, ok := in.subs[id]; ok {
		delete(in.subs, id)
		ctx.Unwatch(s.pid)
	}
}

// subscribers reports the live subscriptions, by id.
func (in *inspector) subscribers() []*messages.SubscriberInfo {
	out := make([]*messages.SubscriberInfo, 0, len(in.subs))
	for _, s := range in.subs {
		out = append(out, s.info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetId() < out[j].GetId() })
	return out
}
