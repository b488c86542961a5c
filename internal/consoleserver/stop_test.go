package consoleserver_test

import (
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
	srv, addr := serveChild(t, t.TempDir()) // no certificate there: plaintext
	peer := exec.Command(os.Args[0], "-test.run=^$")
	peer.Env = append(os.Environ(), remoteClientEnv+"="+addr, remoteClientEnv+"_ADVERTISE=127.0.0.1:1", remoteClientEnv+"_WAIT=500ms")
	if b, err := peer.CombinedOutput(); err == nil || !strings.Contains(string(b), "no reply") {
		t.Fatalf("the peer that went away got a reply: %v\n%s", err, b)
	}
	srv.CloseStdin() // the runtime stops
	line := srv.Line()
	took, err := time.ParseDuration(strings.TrimPrefix(line, "stopped in "))
	if err != nil {
		t.Fatalf("the runtime's stop: %q, %v", line, err)
	}
	t.Logf("Runtime.Stop took %v after the client went away", took)
	if took > 5*time.Second {
		t.Errorf("Runtime.Stop took %v after a client went away: protoactor's dial retries held it", took)
	}
	if err := srv.Wait(); err != nil {
		t.Errorf("runtime process: %v", err)
	}
}
