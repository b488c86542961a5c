package consoleserver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/console"
	"github.com/watchtree/watchtree/internal/consoleserver"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/test/mongosim"
)

// tlsServeEnv makes the test binary a runtime whose console serves TLS (TestConsoleOverTLS).
const tlsServeEnv = "WT_CONSOLE_TLS_SERVE"

// TestConsoleOverTLS runs a runtime whose console gets TLS through Config.Console.RemoteOptions
// (in its own process: one protoactor remote per process) and checks that a client with the CA
// is served and a plaintext one is not.
func TestConsoleOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	dir := t.TempDir()
	pool := writeCert(t, dir)
	_, addr := serveChild(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, err := console.Dial(addr, console.ClientOptions{TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	snap, err := c.Snapshot(ctx, &messages.SnapshotRequest{})
	if err != nil || snap.GetInstance().GetId() != "tls-node" {
		t.Fatalf("snapshot over TLS: %v, %v", snap, err)
	}
	plain, _ := console.Dial(addr, console.ClientOptions{Timeout: 2 * time.Second})
	defer plain.Close()
	if _, err := plain.Snapshot(ctx, &messages.SnapshotRequest{}); !errors.Is(err, console.ErrUnreachable) || !strings.Contains(err.Error(), "if the console serves TLS") {
		t.Errorf("a plaintext client of a TLS console: %v, want a hint at TLS", err)
	}
	// And the other way round: a TLS client of a plaintext console is told so.
	tlsToPlain, _ := console.Dial(live.addr, console.ClientOptions{Timeout: 2 * time.Second, TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}})
	defer tlsToPlain.Close()
	if _, err := tlsToPlain.Snapshot(ctx, &messages.SnapshotRequest{}); !errors.Is(err, console.ErrTLS) || !strings.Contains(err.Error(), "does not speak TLS") {
		t.Errorf("a TLS client of a plaintext console: %v, want ErrTLS saying it does not speak TLS", err)
	}
}

// writeCert writes a self-signed certificate for 127.0.0.1 and its key into dir.
func writeCert(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "watchtree console test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(filepath.Join(dir, "cert.pem"), certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	return pool
}

// TestConsoleOverMutualTLS: a console that requires client certificates (tls.Config.ClientAuth
// through Config.Console.RemoteOptions) serves a client whose certificate its CA signed, and
// refuses, with an error that says so, a client without a certificate and one whose certificate
// another CA signed.
func TestConsoleOverMutualTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	dir := t.TempDir()
	serverCAs := writeCert(t, dir)
	clientCA, clientKey := newCA(t, "console clients")
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: clientCA.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	otherCA, otherKey := newCA(t, "someone else")
	_, addr := serveChild(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	call := func(certs ...tls.Certificate) error {
		c, err := console.Dial(addr, console.ClientOptions{Timeout: 5 * time.Second,
			TLS: &tls.Config{RootCAs: serverCAs, Certificates: certs, MinVersion: tls.VersionTLS12}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		snap, err := c.Snapshot(ctx, &messages.SnapshotRequest{})
		if err == nil && snap.GetInstance().GetId() != "tls-node" {
			t.Fatalf("snapshot = %v", snap)
		}
		return err
	}
	if err := call(clientCert(t, "operator", clientCA, clientKey)); err != nil {
		t.Fatalf("a client with a certificate of the console's client CA: %v", err)
	}
	for name, certs := range map[string][]tls.Certificate{
		"no certificate":   nil,
		"an untrusted one": {clientCert(t, "intruder", otherCA, otherKey)},
	} {
		err := call(certs...)
		t.Logf("a client with %s: %v", name, err)
		if !errors.Is(err, console.ErrTLS) || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("a client with %s: %v, want ErrTLS naming the certificate", name, err)
		}
	}
}

// newCA makes a certificate authority.
func newCA(t *testing.T, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key
}

// clientCert makes a client certificate for cn signed by ca.
func clientCert(t *testing.T, cn string, ca *x509.Certificate, caKey *ecdsa.PrivateKey) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// serveChild starts tlsServe(dir) in a child process and returns it with the console's
// address; unless the test stops it, it is stopped and checked when the test ends.
func serveChild(t *testing.T, dir string) (*consoleserver.Child, string) {
	t.Helper()
	c := consoleserver.StartChild(t, tlsServeEnv+"="+dir)
	t.Cleanup(func() {
		c.CloseStdin() // the child stops its runtime and exits
		if err := c.Wait(); err != nil {
			t.Errorf("runtime process: %v", err)
		}
	})
	line := c.Line()
	addr, ok := strings.CutPrefix(line, "console ")
	if !ok {
		t.Fatalf("the runtime did not report its address: %q", line)
	}
	return c, addr
}

// tlsServe is the child process: a runtime on its own mongosim with a console, over TLS when
// dir holds cert.pem and key.pem (and demanding client certificates signed by ca.pem when it is
// there too); it prints the console's address, runs until its stdin closes, stops the runtime
// and prints how long Stop took.
func tlsServe(dir string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cc := watchtree.ConsoleConfig{Addr: "127.0.0.1:0"}
	if _, err := os.Stat(filepath.Join(dir, "cert.pem")); err == nil {
		cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		conf := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		if ca, err := os.ReadFile(filepath.Join(dir, "ca.pem")); err == nil {
			conf.ClientCAs = x509.NewCertPool()
			conf.ClientCAs.AppendCertsFromPEM(ca)
			conf.ClientAuth = tls.RequireAndVerifyClientCert
		}
		cc.RemoteOptions = []remote.ConfigOption{remote.WithServerOptions(grpc.Creds(credentials.NewTLS(conf)))}
	}
	sim, err := mongosim.Start(ctx, mongosim.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer sim.Close()
	client, err := mongo.Connect(options.Client().ApplyURI(sim.URI()))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer client.Disconnect(context.Background())
	rt, err := watchtree.New(watchtree.Config{Client: client, Database: "tls", InstanceID: "tls-node", Console: cc})
	if err == nil {
		err = rt.Start(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("console", rt.ConsoleAddr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	start := time.Now()
	if err := rt.Stop(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("stopped in", time.Since(start))
	return 0
}
