package consoleserver

import (
	"os"
	"runtime"
	"sort"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/watchtree/watchtree/messages"
)

// buildTree lists the actors of the process registry as a hierarchy by PID id ("a/b" is a
// child of "a"). Futures are left out: they are requests in flight, not actors. Mailbox depths
// are not shown: protoactor keeps an actor's mailbox unexported and offers no accessor (its only
// reading is the OpenTelemetry gauge of an actor system built with a metrics provider, by actor
// type rather than by PID).
func buildTree(sys *actor.ActorSystem) *messages.TreeReply {
	nodes := map[string]*messages.ActorNode{}
	for _, bucket := range sys.ProcessRegistry.LocalPIDs.LocalPIDs {
		for item := range bucket.IterBuffered() {
			if strings.HasPrefix(item.Key, "future$") {
				continue
			}
			nodes[item.Key] = &messages.ActorNode{Id: item.Key, Name: item.Key[strings.LastIndex(item.Key, "/")+1:]}
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

func goVersion() string { return runtime.Version() }
func pid() int          { return os.Getpid() }
