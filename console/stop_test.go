package console_test

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestStopIsPromptAfterAClientWentAway: a protoactor peer asks the console something and is
// gone before the reply (here it advertises an address nothing listens on, as a CLI that quit or
// sits behind a port-forward does). protoactor dials it back on a goroutine remote.Shutdown waits
// for; Runtime.Stop right after must still return promptly, not after protoactor's five dial
// attempts 2 s apart. The bound is generous: a machine under load must not fail it.
func TestStopIsPromptAfterAClientWentAway(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	srv := exec.Command(os.Args[0], "-test.run=^$")
	srv.Env = append(os.Environ(), tlsServeEnv+"="+t.TempDir()) // no certificate there: plaintext
	srv.Stderr = os.Stderr
	stdin, err := srv.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	out := bufio.NewReader(stdout)
	line, err := out.ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "console ")
	if err != nil || !ok {
		t.Fatalf("the runtime did not report its address: %q, %v", line, err)
	}
	peer := exec.Command(os.Args[0], "-test.run=^$")
	peer.Env = append(os.Environ(), remoteClientEnv+"="+addr, remoteClientEnv+"_ADVERTISE=127.0.0.1:1", remoteClientEnv+"_WAIT=500ms")
	if b, err := peer.CombinedOutput(); err == nil || !strings.Contains(string(b), "no reply") {
		t.Fatalf("the peer that went away got a reply: %v\n%s", err, b)
	}
	_ = stdin.Close() // the runtime stops
	line, err = out.ReadString('\n')
	took, perr := time.ParseDuration(strings.TrimPrefix(strings.TrimSpace(line), "stopped in "))
	if err != nil || perr != nil {
		t.Fatalf("the runtime's stop: %q, %v, %v", line, err, perr)
	}
	t.Logf("Runtime.Stop took %v after the client went away", took)
	if took > 5*time.Second {
		t.Errorf("Runtime.Stop took %v after a client went away: protoactor's dial retries held it", took)
	}
	if err := srv.Wait(); err != nil {
		t.Errorf("runtime process: %v", err)
	}
}
