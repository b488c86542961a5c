package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// netHost is a node's network namespace: a veth pair whose host end carries the two
// addresses the node dials (its MongoDB and Redis proxies listen there) and whose node end
// carries two source addresses, one per link, so that each direction of each link can be cut
// on its own by a blackhole route: node → server in the namespace (the route to the server's
// address), server → node on the host (the route to the node's address for that link). The
// kernel then drops the segments, and TCP retransmits them after the heal, as over a real
// partition.
type netHost struct {
	ns, hostIf, nodeIf         string
	hostMongo, hostRedis       string // host-end addresses (the proxies' listen addresses)
	nodeMongoSrc, nodeRedisSrc string // node-end addresses, the source of each link
	blackholed                 map[string]bool
	own                        *owner // records the host routes, for a cleanup after a crash
}

// ipCmd runs ip(8) with args; in names the namespace to run it in ("" for the host).
func ipCmd(in string, args ...string) error {
	if in != "" {
		args = append([]string{"netns", "exec", in, "ip"}, args...)
	}
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// newNetHosts makes the namespaces of own's n nodes, in 10.<octet>.<node>.0/29, with an
// octet no host address uses yet (concurrent soaks on one host must not share addresses: a
// route of one would take the other's packets). A lock file held from the choice until the
// addresses are in place keeps two soaks starting at once from choosing the same octet.
func newNetHosts(own *owner, n int) ([]*netHost, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("network namespaces need root")
	}
	path := filepath.Join(os.TempDir(), "wtc-net.lock")
	lock, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("address lock: %w", err)
	}
	defer lock.Close() // and with it the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, fmt.Errorf("address lock %s: flock: %w", path, err)
	}
	out, err := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("ip -o -4 addr show: %w", err)
	}
	used := map[int]bool{}
	for _, f := range strings.Fields(string(out)) {
		var a, b int
		if _, err := fmt.Sscanf(f, "%d.%d.", &a, &b); err == nil && a == 10 {
			used[b] = true
		}
	}
	octet := -1
	for k := range 50 { // from the pid's octet on, so that soaks spread out
		if o := 200 + (own.pid+k)%50; !used[o] {
			octet = o
			break
		}
	}
	if octet < 0 {
		return nil, fmt.Errorf("no free address range: 10.200-249.0.0/16 are all in use")
	}
	var hosts []*netHost
	for i := range n {
		h, err := newNetHost(own, octet, i+1)
		if err != nil {
			for _, h := range hosts {
				h.close()
			}
			return nil, err
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// newNetHost makes the namespace of node i (1-based) of own's soak, named with its tag
// (cleanup.go), in 10.<octet>.<i>.0/29. Any failure undoes what was made.
func newNetHost(own *owner, octet, i int) (h *netHost, err error) {
	tag := tagOf(own.pid)
	net := fmt.Sprintf("10.%d.%d", octet, i) // a /29 per node
	h = &netHost{own: own,
		ns: fmt.Sprintf("%sn%d", tag, i), hostIf: fmt.Sprintf("%sh%d", tag, i), nodeIf: fmt.Sprintf("%sv%d", tag, i),
		hostMongo: net + ".1", hostRedis: net + ".3", nodeMongoSrc: net + ".2", nodeRedisSrc: net + ".4",
		blackholed: map[string]bool{},
	}
	defer func() {
		if err != nil {
			h.close()
		}
	}()
	steps := [][]string{
		{"", "netns", "add", h.ns},
		{"", "link", "add", h.hostIf, "type", "veth", "peer", "name", h.nodeIf},
		{"", "link", "set", h.nodeIf, "netns", h.ns},
		{"", "addr", "add", h.hostMongo + "/29", "dev", h.hostIf},
		{"", "addr", "add", h.hostRedis + "/29", "dev", h.hostIf},
		{"", "link", "set", h.hostIf, "up"},
		{h.ns, "addr", "add", h.nodeMongoSrc + "/29", "dev", h.nodeIf},
		{h.ns, "addr", "add", h.nodeRedisSrc + "/29", "dev", h.nodeIf},
		{h.ns, "link", "set", h.nodeIf, "up"},
		{h.ns, "link", "set", "lo", "up"},
		{h.ns, "route", "add", h.hostMongo + "/32", "dev", h.nodeIf, "src", h.nodeMongoSrc},
		{h.ns, "route", "add", h.hostRedis + "/32", "dev", h.nodeIf, "src", h.nodeRedisSrc},
	}
	for _, st := range steps {
		if err := ipCmd(st[0], st[1:]...); err != nil {
			return h, err
		}
	}
	return h, nil
}

// cut drops direction d of a link (redis or MongoDB).
func (h *netHost) cut(redis bool, d Direction) error {
	host, src := h.hostMongo, h.nodeMongoSrc
	if redis {
		host, src = h.hostRedis, h.nodeRedisSrc
	}
	if d&Up != 0 && !h.blackholed["up"+host] {
		if err := ipCmd(h.ns, "route", "replace", "blackhole", host+"/32"); err != nil {
			return err
		}
		h.blackholed["up"+host] = true
	}
	if d&Down != 0 && !h.blackholed["down"+src] {
		if err := h.own.record("blackhole " + src + "/32"); err != nil {
			return err
		}
		if err := ipCmd("", "route", "add", "blackhole", src+"/32"); err != nil {
			return err
		}
		h.blackholed["down"+src] = true
	}
	return nil
}

// heal restores every route cut.
func (h *netHost) heal() error {
	var first error
	for _, l := range []struct{ host, src string }{{h.hostMongo, h.nodeMongoSrc}, {h.hostRedis, h.nodeRedisSrc}} {
		if h.blackholed["up"+l.host] {
			if err := ipCmd(h.ns, "route", "replace", l.host+"/32", "dev", h.nodeIf, "src", l.src); err != nil && first == nil {
				first = err
			} else {
				delete(h.blackholed, "up"+l.host)
			}
		}
		if h.blackholed["down"+l.src] {
			if err := ipCmd("", "route", "del", "blackhole", l.src+"/32"); err != nil && first == nil {
				first = err
			} else {
				delete(h.blackholed, "down"+l.src)
			}
		}
	}
	return first
}

// close removes the namespace (and with it the veth pair) and the host's blackhole routes.
func (h *netHost) close() {
	_ = h.heal()
	_ = ipCmd("", "link", "del", h.hostIf)
	_ = ipCmd("", "netns", "del", h.ns)
}
