package console

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/test/mongosim"
)

// TestPlaintextClientOfATLSConsoleIsToldSo: a TLS server closes a plaintext client's connection
// before its HTTP/2 preface; the client reads EOF or, when the server closed before reading what
// the client sent, a reset. Both get the hint at TLS; other unreachable errors do not.
func TestPlaintextClientOfATLSConsoleIsToldSo(t *testing.T) {
	c := &Client{addr: "127.0.0.1:1"}
	for _, msg := range []string{
		`connection error: desc = "error reading server preface: EOF"`,
		`connection error: desc = "error reading server preface: connection reset by peer"`,
		`connection error: desc = "error reading server preface: read tcp 127.0.0.1:2->127.0.0.1:1: read: connection reset by peer"`,
	} {
		err := c.wrap(status.Error(codes.Unavailable, msg))
		if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "if the console serves TLS") {
			t.Errorf("%s: %v, want ErrUnreachable with a hint at TLS", msg, err)
		}
	}
	err := c.wrap(status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`))
	if !errors.Is(err, ErrUnreachable) || strings.Contains(err.Error(), "TLS") {
		t.Errorf("connection refused: %v, want ErrUnreachable without a hint at TLS", err)
	}
}

// TestMongoDBIsNotAConsole: a client pointed at a MongoDB server (a mongosim), in plaintext or
// with TLS, is told it is a MongoDB server, not a watchtree console, and gets no hint at TLS.
func TestMongoDBIsNotAConsole(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	srv, err := mongosim.Start(ctx, mongosim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for name, o := range map[string]ClientOptions{
		"plaintext": {Timeout: 5 * time.Second},
		"TLS":       {Timeout: 5 * time.Second, TLS: &tls.Config{InsecureSkipVerify: true}},
	} {
		c, err := Dial(srv.Addr(), o)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Snapshot(ctx, &messages.SnapshotRequest{})
		_ = c.Close()
		if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "this is a MongoDB server, not a watchtree console") ||
			strings.Contains(err.Error(), "--tls") || errors.Is(err, ErrTLS) {
			t.Errorf("%s: %v, want ErrUnreachable naming MongoDB, without a hint at TLS", name, err)
		}
	}
}
