package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Everything a soak names carries its tag, "wtc" and the soak's pid: its network namespaces
// (wtc<pid>n1), veth ends (wtc<pid>h1, wtc<pid>v1; 15 bytes at most with a 7-digit pid, the
// kernel's limit for interface names), its folder in the temporary directory (wtc<pid>-*,
// where the binaries it runs live) and its lock file there (wtc<pid>.lock). The lock file is
// flock'd for the soak's whole life and the kernel drops the lock when the soak dies, however
// it dies, so a cleanup tells a live soak from a dead one without trusting the pid alone (a
// pid is reused); a soak whose lock file is gone counts as live while its pid is.
//
// A soak is cleaned up by Run's deferred cleanup when it ends, and otherwise by the next
// soak's start or by `chaos -cleanup`: both call Cleanup, which touches the tagged resources
// of dead soaks only. The processes a soak started die with it without help (Pdeathsig and
// the node's lifeline, procs.go); Cleanup still kills any process whose binary lies in a dead
// soak's folder, for the processes of a soak older than that.

// tagPrefix starts every tag; tagOf is a soak's tag.
const tagPrefix = "wtc"

func tagOf(pid int) string { return tagPrefix + strconv.Itoa(pid) }

// keptMarker is the file in a soak's folder that keeps the folder from Cleanup: a soak that
// found violations leaves its histories there for the seed's analysis.
const keptMarker = ".kept"

var (
	nsName     = regexp.MustCompile(`^wtc(\d+)n\d+$`)
	linkName   = regexp.MustCompile(`^wtc(\d+)[hv]\d+$`)
	folderName = regexp.MustCompile(`^wtc(\d+)-`)
	lockName   = regexp.MustCompile(`^wtc(\d+)\.lock$`)
)

// lockPath is the lock file of the soak with pid.
func lockPath(pid int) string { return filepath.Join(os.TempDir(), tagOf(pid)+".lock") }

// owner is this process's claim on its tag: the flock'd lock file, which also lists the
// host routes the soak added (one "route <args of ip route del>" line each, written before
// the route is added), since those carry no name.
type owner struct {
	pid  int
	lock *os.File
}

// claim takes this process's lock file. The file of a dead soak with the same pid (a reused
// pid) may be removed by a cleanup under our feet: claim retries until the file it holds
// locked is the one at the path.
func claim() (*owner, error) {
	pid := os.Getpid()
	path := lockPath(pid)
	for range 10 {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, fmt.Errorf("soak lock %s: %w", path, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, fmt.Errorf("soak lock %s: flock: %w", path, err)
		}
		if same(f, path) {
			if err := f.Truncate(0); err != nil { // what a dead soak with our pid recorded was cleaned up before we got the lock
				f.Close()
				return nil, fmt.Errorf("soak lock %s: %w", path, err)
			}
			return &owner{pid: pid, lock: f}, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("soak lock %s: removed under us 10 times", path)
}

// same reports whether the open file f is the file at path.
func same(f *os.File, path string) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	pi, err := os.Stat(path)
	return err == nil && os.SameFile(fi, pi)
}

// record notes a host route before it is added, so that a cleanup can remove it after a
// crash.
func (o *owner) record(route string) error {
	if _, err := fmt.Fprintf(o.lock, "route %s\n", route); err != nil {
		return fmt.Errorf("soak lock: record %q: %w", route, err)
	}
	return nil
}

// release removes the lock file and then drops the lock, at the end of a soak that cleaned
// up after itself.
func (o *owner) release() {
	_ = os.Remove(o.lock.Name())
	_ = o.lock.Close()
}

// dead reports whether the soak with pid is dead; when it is, the returned file (if not nil)
// is its lock file, held locked by the caller until it closes it, so that no soak reusing the
// pid starts in the middle of the cleanup.
func dead(pid int) (bool, *os.File) {
	if pid == os.Getpid() {
		return false, nil
	}
	f, err := os.OpenFile(lockPath(pid), os.O_RDWR, 0)
	if err != nil {
		// No lock file (a soak older than the lock files, or one that was removing its
		// own): the pid decides.
		err := syscall.Kill(pid, 0)
		return errors.Is(err, syscall.ESRCH), nil
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false, nil // held: the soak lives
	}
	return true, f
}

// Cleanup removes what dead soaks left behind: it kills the processes run from their
// folders, deletes their network namespaces, veth links and recorded host routes (as root;
// otherwise it says so and skips them), and removes their folders (but those with a kept
// marker: a finished soak's histories) and lock files. Live soaks, this one included, are
// spared. With redisAddr, it also deletes the dead soaks' Redis keys (wtc<pid>-<seed>:...);
// a Redis it cannot reach within a second is skipped. It reports each removal on log and
// returns the errors of removals that failed; finding nothing to do is no error.
func Cleanup(log io.Writer, redisAddr string) error {
	if log == nil {
		log = io.Discard
	}
	tmp := os.TempDir()
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return fmt.Errorf("cleanup: read %s: %w", tmp, err)
	}
	pids := map[int]bool{} // every tag found, whatever its kind
	folders := map[int][]string{}
	for _, e := range entries {
		if m := lockName.FindStringSubmatch(e.Name()); m != nil {
			pids[atoi(m[1])] = true
		} else if m := folderName.FindStringSubmatch(e.Name()); m != nil && e.IsDir() {
			pid := atoi(m[1])
			pids[pid] = true
			folders[pid] = append(folders[pid], filepath.Join(tmp, e.Name()))
		}
	}
	root := os.Geteuid() == 0
	_, ipErr := exec.LookPath("ip")
	var nets []string
	if root && ipErr == nil {
		nets = ipNames(pids)
	} else {
		fmt.Fprintf(log, "chaos cleanup: not root or no ip(8): network namespaces, links and routes left alone\n")
	}
	keys := redisKeys(redisAddr, pids)
	var errs []error
	for pid := range pids {
		isDead, lock := dead(pid)
		if !isDead {
			continue
		}
		tag := tagOf(pid)
		killed := killRunFrom(tag)
		if killed > 0 {
			fmt.Fprintf(log, "chaos cleanup: killed %d processes of %s\n", killed, tag)
		}
		if root && ipErr == nil {
			errs = append(errs, cleanNet(log, pid, lock, nets)...)
		}
		if err := delKeys(redisAddr, keys[pid]); err != nil {
			errs = append(errs, err)
		} else if len(keys[pid]) > 0 {
			fmt.Fprintf(log, "chaos cleanup: deleted %d Redis keys of %s\n", len(keys[pid]), tag)
		}
		for _, dir := range folders[pid] {
			if _, err := os.Stat(filepath.Join(dir, keptMarker)); err == nil {
				continue
			}
			if err := os.RemoveAll(dir); err != nil {
				errs = append(errs, fmt.Errorf("cleanup: remove %s: %w", dir, err))
			} else {
				fmt.Fprintf(log, "chaos cleanup: removed %s\n", dir)
			}
		}
		if lock != nil {
			if err := os.Remove(lock.Name()); err != nil && !os.IsNotExist(err) {
				errs = append(errs, fmt.Errorf("cleanup: remove %s: %w", lock.Name(), err))
			}
			lock.Close()
		}
	}
	return errors.Join(errs...)
}

// redisKeyName is a soak's Redis key: the tag, the seed, a colon.
var redisKeyName = regexp.MustCompile(`^wtc(\d+)-\d+:`)

// redisKeys lists the tagged keys at addr by pid, adding the pids to pids; nothing when addr
// is "" or does not answer within a second.
func redisKeys(addr string, pids map[int]bool) map[int][]string {
	if addr == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, MaxRetries: -1})
	defer rdb.Close()
	byPid := map[int][]string{}
	it := rdb.Scan(ctx, 0, tagPrefix+"*", 1000).Iterator()
	for it.Next(ctx) {
		if m := redisKeyName.FindStringSubmatch(it.Val()); m != nil {
			pid := atoi(m[1])
			pids[pid] = true
			byPid[pid] = append(byPid[pid], it.Val())
		}
	}
	return byPid // on an error (no Redis here), what was listed
}

// delKeys deletes keys at addr.
func delKeys(addr string, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, MaxRetries: -1})
	defer rdb.Close()
	if err := rdb.Del(ctx, keys...).Err(); err != nil {
		return fmt.Errorf("cleanup: delete %d Redis keys at %s: %w", len(keys), addr, err)
	}
	return nil
}

// ipNames lists the tagged namespaces and links, adding their pids to pids.
func ipNames(pids map[int]bool) []string {
	var names []string
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) > 0 {
				if m := nsName.FindStringSubmatch(f[0]); m != nil {
					pids[atoi(m[1])] = true
					names = append(names, f[0])
				}
			}
		}
	}
	if out, err := exec.Command("ip", "-o", "link", "show").Output(); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			// "7: wtc123h1@if6: <BROADCAST,..."
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if m := linkName.FindStringSubmatch(name); m != nil {
				pids[atoi(m[1])] = true
				names = append(names, name)
			}
		}
	}
	return names
}

// cleanNet removes the dead soak's recorded host routes, links and namespaces.
func cleanNet(log io.Writer, pid int, lock *os.File, names []string) []error {
	var errs []error
	if lock != nil {
		sc := bufio.NewScanner(lock)
		for sc.Scan() {
			if route, ok := strings.CutPrefix(sc.Text(), "route "); ok {
				// Gone already when the route was never added or was healed: no error.
				_ = ipCmd("", append([]string{"route", "del"}, strings.Fields(route)...)...)
			}
		}
	}
	owned := func(re *regexp.Regexp, name string) bool {
		m := re.FindStringSubmatch(name)
		return m != nil && atoi(m[1]) == pid
	}
	for _, name := range names {
		var err error
		switch {
		case owned(nsName, name):
			err = ipCmd("", "netns", "del", name)
		case owned(linkName, name):
			err = ipCmd("", "link", "del", name)
			if err != nil && !linkExists(name) { // the peer's deletion took it with it
				err = nil
			}
		default:
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("cleanup: %w", err))
		} else {
			fmt.Fprintf(log, "chaos cleanup: removed %s\n", name)
		}
	}
	return errs
}

func linkExists(name string) bool { return exec.Command("ip", "link", "show", name).Run() == nil }

// killRunFrom SIGKILLs every process whose binary lies in a folder of tag, and waits (up to
// 5s) for them to go, so that their namespaces can be deleted.
func killRunFrom(tag string) int {
	prefix := filepath.Join(os.TempDir(), tag) + "-"
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var pids []int
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", p.Name(), "exe")); err == nil && strings.HasPrefix(exe, prefix) {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				pids = append(pids, pid)
			}
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond) // a poll period: the kernel tells no one else
		}
	}
	return len(pids)
}

// alive reports whether pid runs (a zombie, dead but not yet reaped, does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// "pid (comm) S ...": the state follows the last ')'.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }
