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
// child of "a"), those keep accepts (all when keep is nil; the others are counted in Hidden).
// Futures are left out: they are requests in flight, not actors. Mailbox depths are not shown:
// protoactor keeps an actor's mailbox unexported and offers no accessor (its only reading is
// the OpenTelemetry gauge of an actor system built with a metrics provider, by actor type
// rather than by PID).
func buildTree(sys *actor.ActorSystem, keep func(id string) bool) *messages.TreeReply {
	nodes := map[string]*messages.ActorNode{}
	hidden := 0
	for _, bucket := range sys.ProcessRegistry.LocalPIDs.LocalPIDs {
		for item := range bucket.IterBuffered() {
			if strings.HasPrefix(item.Key, "future$") {
				continue
			}
			if keep != nil && !keep(item.Key) {
				hidden++
				continue
			}
			nodes[item.Key] = &messages.ActorNode{Id: item.Key, Name: item.Key[strings.LastIndex(item.Key, "/")+1:]}
		}
	}
	reply := &messages.TreeReply{Actors: uint32(len(nodes)), Hidden: uint32(hidden)}
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

// ours returns the filter of watchtree's own actors for buildTree: the streams' supervisors
// and everything under them, and the console; nil (every actor) when all is set.
func (in *inspector) ours(all bool) func(id string) bool {
	if all {
		return nil
	}
	roots := []string{in.cfg.Name}
	for _, r := range in.b.Streams() {
		if r.Supervisor != nil {
			roots = append(roots, r.Supervisor.Id)
		}
	}
	return func(id string) bool {
		for _, r := range roots {
			if id == r || strings.HasPrefix(id, r+"/") {
				return true
			}
		}
		return false
	}
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
