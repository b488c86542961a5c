package console

import (
	"os"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/watchtree/watchtree/messages"
)

// buildTree lists the actors of the process registry as a hierarchy by PID id ("a/b" is a
// child of "a"), with the depth of each mailbox. Futures are left out: they are requests in
// flight, not actors.
func buildTree(sys *actor.ActorSystem) *messages.TreeReply {
	nodes := map[string]*messages.ActorNode{}
	for _, bucket := range sys.ProcessRegistry.LocalPIDs.LocalPIDs {
		for item := range bucket.IterBuffered() {
			if strings.HasPrefix(item.Key, "future$") {
				continue
			}
			n := &messages.ActorNode{Id: item.Key, Name: item.Key[strings.LastIndex(item.Key, "/")+1:], Mailbox: -1}
			if p, ok := item.Val.(*actor.ActorProcess); ok {
				n.Mailbox = mailboxDepth(p)
			}
			nodes[item.Key] = n
		}
	}
	reply := &messages.TreeReply{Actors: uint32(len(nodes))}
	ids := make([]string, 0, len(nodes))
	for id := range nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		n := nodes[id]
		parent := parentOf(id, nodes)
		if parent == nil {
			reply.Roots = append(reply.Roots, n)
			continue
		}
		parent.Children = append(parent.Children, n)
	}
	return reply
}

// parentOf returns the nearest registered ancestor of id.
func parentOf(id string, nodes map[string]*messages.ActorNode) *messages.ActorNode {
	for i := strings.LastIndex(id, "/"); i > 0; i = strings.LastIndex(id[:i], "/") {
		if p, ok := nodes[id[:i]]; ok {
			return p
		}
	}
	return nil
}

// mailboxReadable: protoactor keeps an actor's mailbox in the unexported first field of
// ActorProcess and offers no accessor. The depth is read through that field only when the
// layout is the one of the pinned version (checked once, by reflection); otherwise -1.
var mailboxReadable = func() bool {
	t := reflect.TypeOf(actor.ActorProcess{})
	if t.NumField() == 0 {
		return false
	}
	f := t.Field(0)
	return f.Name == "mailbox" && f.Offset == 0 && f.Type == reflect.TypeOf((*actor.Mailbox)(nil)).Elem()
}()

func mailboxDepth(p *actor.ActorProcess) int64 {
	if !mailboxReadable || p == nil {
		return -1
	}
	mb := *(*actor.Mailbox)(unsafe.Pointer(p))
	if mb == nil {
		return -1
	}
	return int64(mb.UserMessageCount())
}

func goVersion() string { return runtime.Version() }
func pid() int          { return os.Getpid() }
