package chaos

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSoakLifecycle runs the chaos command as a process of its own, the way make chaos does,
// and once its nodes are up checks, in order, that a cleanup spares it, that a node stops
// within 2s of SIGTERM even when its server does not answer, and that after a SIGKILL of the
// soak its processes die by themselves, a paused node included (Pdeathsig and the lifeline:
// no cleanup runs before that check) and `chaos -cleanup` then removes its namespaces, links,
// routes, folder, lock file and Redis keys (those outlive any process, so a cleanup is what
// removes them). Skipped with -short, and without Redis (the soak needs it).
func TestSoakLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a soak process: about 15s")
	}
	redisAddr := os.Getenv("WATCHTREE_REDIS_ADDR")
	if redisAddr == "" {
		redisAddr = "127.0.0.1:6379"
	}
	if c, err := net.DialTimeout("tcp", redisAddr, 2*time.Second); err != nil {
		t.Skipf("the soak needs Redis at %s: %v", redisAddr, err)
	} else {
		c.Close()
	}
	bin := buildChaos(t)

	// Partitions only: no fault of the nemesis stops a node, so the SIGTERM below finds it
	// running, maybe cut off (its stop must then not wait for the link), and a host blackhole
	// route may be in place when the soak dies.
	cmd := exec.Command(bin, "-seconds", "120", "-seed", "37", "-faults", "partition-both,partition-asym")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan struct{})
	lines := make(chan string, 64)
	go func() { // ends when the soak's stdout closes: it exits, or the cleanup below kills it
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody reads any more: the progress is not needed
			}
		}
	}()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait(); close(exited) }()
	t.Cleanup(func() { // the machine stays clean whatever failed
		_ = cmd.Process.Kill()
		<-exited
		if err := Cleanup(nil, redisAddr); err != nil {
			t.Errorf("cleanup after the test: %v", err)
		}
	})
	pid := cmd.Process.Pid
	tag := tagOf(pid)

	// Up: the soak's folder from its first line, then its nodes.
	var folder string
	netns := false
	deadline := time.After(3 * time.Minute) // two builds, then three nodes
	for ready := false; !ready; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the soak exited before its nodes were up: %v\n%s", <-waited, stderr.String())
			}
			t.Log(l)
			if _, dir, ok := strings.Cut(l, "histories in "); ok {
				folder = dir
			}
			if strings.HasPrefix(l, "chaos: network: network namespaces") {
				netns = true
			}
			ready = strings.HasSuffix(l, "nodes ready")
		case <-deadline:
			t.Fatalf("the soak's nodes were not up within 3 minutes\n%s", stderr.String())
		}
	}
	if !strings.HasPrefix(filepath.Base(folder), tag+"-") {
		t.Fatalf("the soak's folder %q does not carry its tag %s", folder, tag)
	}
	procs := runFrom(folder)
	if len(procs) != 4 {
		t.Fatalf("processes run from %s: %v, want mongosim and 3 nodes", folder, procs)
	}

	t.Run("a cleanup spares a running soak", func(t *testing.T) {
		if out, err := exec.Command(bin, "-cleanup").CombinedOutput(); err != nil {
			t.Fatalf("chaos -cleanup: %v\n%s", err, out)
		} else if bytes.Contains(out, []byte(tag)) {
			t.Errorf("chaos -cleanup touched the running soak %s:\n%s", tag, out)
		}
		if got := runFrom(folder); len(got) != len(procs) {
			t.Errorf("after the cleanup, processes run from %s: %v, want %v", folder, got, procs)
		}
		for _, path := range []string{folder, lockPath(pid)} {
			if _, err := os.Stat(path); err != nil {
				t.Errorf("after the cleanup: %v", err)
			}
		}
		if netns {
			if left := netLeft(tag); len(left) != 6 {
				t.Errorf("after the cleanup, the soak's namespaces and links: %v, want 3 of each", left)
			}
		}
	})

	t.Run("a node stops within 2s of SIGTERM", func(t *testing.T) {
		// With the server paused, the node's graceful stop (the last checkpoints) cannot
		// finish: its deadline must end it.
		node, server := 0, 0
		for _, p := range procs {
			switch exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", p)); filepath.Base(exe) {
			case "chaosnode":
				node = p
			case "mongosim":
				server = p
			}
		}
		if node == 0 || server == 0 {
			t.Fatalf("no chaosnode or no mongosim among %v", procs)
		}
		if err := syscall.Kill(server, syscall.SIGSTOP); err != nil {
			t.Fatalf("SIGSTOP mongosim %d: %v", server, err)
		}
		defer func() { _ = syscall.Kill(server, syscall.SIGCONT) }()
		start := time.Now()
		if err := syscall.Kill(node, syscall.SIGTERM); err != nil {
			t.Fatalf("SIGTERM node %d: %v", node, err)
		}
		if !pollUntil(2*time.Second, func() bool { return !alive(node) }) {
			t.Fatalf("node %d still running %v after SIGTERM", node, time.Since(start))
		}
		t.Logf("node %d gone %v after SIGTERM, its server paused", node, time.Since(start).Round(time.Millisecond))
	})

	t.Run("a killed soak leaves nothing behind", func(t *testing.T) {
		// The soak's addresses, for the routes check below: 10.<octet>. of its first link.
		subnet := ""
		if netns {
			out, err := exec.Command("ip", "-o", "-4", "addr", "show", "dev", tag+"h1").Output()
			if f := strings.Fields(string(out)); err != nil || len(f) < 4 {
				t.Fatalf("ip -o -4 addr show dev %sh1: %v: %q", tag, err, out)
			} else if a := strings.Split(f[3], "."); len(a) != 4 {
				t.Fatalf("address of %sh1: %q", tag, f[3])
			} else {
				subnet = a[0] + "." + a[1] + "."
			}
		}
		// A node paused by the sigstop fault when the soak dies cannot read its lifeline's
		// EOF: the kernel must end it (Pdeathsig, or the SIGHUP and SIGCONT that a stopped
		// process of an orphaned process group gets). mongosim has no lifeline: Pdeathsig
		// alone ends it.
		for _, p := range runFrom(folder) {
			if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", p)); filepath.Base(exe) == "chaosnode" {
				if err := syscall.Kill(p, syscall.SIGSTOP); err != nil {
					t.Fatalf("SIGSTOP node %d: %v", p, err)
				}
				break
			}
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("SIGKILL the soak: %v", err)
		}
		<-exited
		// Before any cleanup: the processes die with the soak.
		if !pollUntil(5*time.Second, func() bool { return len(runFrom(folder)) == 0 }) {
			t.Errorf("5s after the soak's SIGKILL, processes still run from %s: %v", folder, runFrom(folder))
		}
		if out, err := exec.Command(bin, "-cleanup").CombinedOutput(); err != nil {
			t.Fatalf("chaos -cleanup: %v\n%s", err, out)
		} else {
			t.Logf("chaos -cleanup:\n%s", out)
		}
		for _, path := range []string{folder, lockPath(pid)} {
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("%s is left after the cleanup (stat: %v)", path, err)
			}
		}
		if left := netLeft(tag); len(left) > 0 {
			t.Errorf("namespaces and links left after the cleanup: %v", left)
		}
		if keys := redisKeys(redisAddr, map[int]bool{}); len(keys[pid]) > 0 {
			t.Errorf("Redis keys left after the cleanup: %v", keys[pid])
		}
		if netns {
			if out, err := exec.Command("ip", "route", "show").Output(); err != nil {
				t.Errorf("ip route show: %v", err)
			} else {
				for _, l := range strings.Split(string(out), "\n") {
					if strings.Contains(l, tag) || strings.HasPrefix(l, "blackhole "+subnet) {
						t.Errorf("route left after the cleanup: %s", l)
					}
				}
			}
		}
	})
}

// TestCleanupOnlyDeadSoaks makes the leftovers of a dead soak and the resources of a live one
// by hand (a folder, a kept folder, a lock file listing a blackhole route and, as root, a
// namespace, a veth pair and the route) and checks that Cleanup removes the first, but the
// kept folder, and spares the second.
func TestCleanupOnlyDeadSoaks(t *testing.T) {
	// A dead soak's pid: a process that has exited (its pid is not reused within the test,
	// short of a pid wrap-around). A live one: a running process whose lock this test holds.
	done := exec.Command("true")
	if err := done.Run(); err != nil {
		t.Fatal(err)
	}
	live := exec.Command("sleep", "600")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Process.Kill(); _ = live.Wait() })
	deadPid, livePid := done.Process.Pid, live.Process.Pid
	route := fmt.Sprintf("blackhole 10.199.%d.2/32", deadPid%250)

	network := os.Geteuid() == 0 && exec.Command("ip", "netns", "list").Run() == nil
	t.Cleanup(func() { // remove by hand whatever the test made, should Cleanup have failed
		for _, pid := range []int{deadPid, livePid} {
			tag := tagOf(pid)
			if network {
				_ = ipCmd("", "netns", "del", tag+"n1")
				_ = ipCmd("", "link", "del", tag+"h1")
			}
			dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tag+"-*"))
			for _, d := range dirs {
				_ = os.RemoveAll(d)
			}
			_ = os.Remove(lockPath(pid))
		}
		if network {
			_ = ipCmd("", append([]string{"route", "del"}, strings.Fields(route)...)...)
		}
	})
	leftovers := func(pid int, withRoute bool) (folder, kept string) {
		tag := tagOf(pid)
		var err error
		if folder, err = os.MkdirTemp("", tag+"-"); err != nil {
			t.Fatal(err)
		}
		if kept, err = os.MkdirTemp("", tag+"-"); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(kept, keptMarker), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		lock := ""
		if withRoute {
			lock = "route " + route + "\n"
		}
		if err := os.WriteFile(lockPath(pid), []byte(lock), 0o644); err != nil {
			t.Fatal(err)
		}
		if network {
			for _, args := range [][]string{
				{"netns", "add", tag + "n1"},
				{"link", "add", tag + "h1", "type", "veth", "peer", "name", tag + "v1"},
				{"link", "set", tag + "v1", "netns", tag + "n1"},
			} {
				if err := ipCmd("", args...); err != nil {
					t.Fatal(err)
				}
			}
			if withRoute {
				if err := ipCmd("", append([]string{"route", "add"}, strings.Fields(route)...)...); err != nil {
					t.Fatal(err)
				}
			}
		}
		return folder, kept
	}
	deadFolder, deadKept := leftovers(deadPid, true)
	liveFolder, liveKept := leftovers(livePid, false)
	// The live soak's lock, held as its soak would hold it.
	lf, err := os.OpenFile(lockPath(livePid), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}

	var log bytes.Buffer
	if err := Cleanup(&log, ""); err != nil {
		t.Fatalf("Cleanup: %v\n%s", err, log.String())
	}
	t.Logf("Cleanup:\n%s", log.String())
	for _, path := range []string{deadFolder, lockPath(deadPid)} {
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("the dead soak's %s is left (stat: %v)", path, err)
		}
	}
	for _, path := range []string{deadKept, liveFolder, liveKept, lockPath(livePid)} {
		if _, err := os.Stat(path); err != nil {
			t.Errorf("Cleanup removed what it should spare: %v", err)
		}
	}
	if !network {
		t.Log("not root or no ip(8): the network part is not checked")
		return
	}
	if left := netLeft(tagOf(deadPid)); len(left) > 0 {
		t.Errorf("the dead soak's namespace and links are left: %v", left)
	}
	if left := netLeft(tagOf(livePid)); len(left) != 2 {
		t.Errorf("the live soak's namespace and link: %v, want both", left)
	}
	if out, _ := exec.Command("ip", "route", "show", "type", "blackhole").Output(); bytes.Contains(out, []byte(strings.Fields(route)[1])) {
		t.Errorf("the dead soak's route %q is left:\n%s", route, out)
	}
}

// buildChaos builds the chaos command into the test's temporary directory.
func buildChaos(t *testing.T) string {
	t.Helper()
	root, err := moduleDir()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "chaos")
	build := exec.Command("go", "build", "-o", bin, "./chaos/cmd/chaos")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./chaos/cmd/chaos: %v\n%s", err, out)
	}
	return bin
}

// runFrom lists the running processes whose binary lies in folder.
func runFrom(folder string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && strings.HasPrefix(exe, folder+"/") && alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// netLeft lists the namespaces and links named with tag (none without root or ip(8)).
func netLeft(tag string) []string {
	var left []string
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) > 0 && owns(tag, f[0]) {
				left = append(left, f[0])
			}
		}
	}
	if out, err := exec.Command("ip", "-o", "link", "show").Output(); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) > 1 {
				name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
				if owns(tag, name) {
					left = append(left, name)
				}
			}
		}
	}
	return left
}

// owns reports whether name is a namespace or link of tag (wtc12 owns wtc12n1, not wtc123n1).
func owns(tag, name string) bool {
	rest, ok := strings.CutPrefix(name, tag)
	return ok && len(rest) > 1 && strings.ContainsRune("nhv", rune(rest[0])) && rest[1] >= '0' && rest[1] <= '9'
}

// pollUntil polls cond every 20ms until it holds or d has passed.
func pollUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond) // a poll period
	}
}
