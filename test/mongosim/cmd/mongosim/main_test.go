package main

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMongosimServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	args := []string{"--port", "0", "--replset", "rsx", "--wire-version", "21", "--oplog-capacity", "10"}
	done := make(chan error, 1)
	go func() { done <- execute(ctx, args, pw, io.Discard); _ = pw.Close() }()

	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no URI printed: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	uri := strings.TrimSpace(line)
	if !strings.HasPrefix(uri, "mongodb://127.0.0.1:") || !strings.HasSuffix(uri, "/?replicaSet=rsx") {
		t.Fatalf("URI %q", uri)
	}
	cl, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	opCtx, opCancel := context.WithTimeout(ctx, 10*time.Second)
	defer opCancel()
	var res bson.M
	if err := cl.Database("admin").RunCommand(opCtx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&res); err != nil {
		t.Fatal(err)
	}
	if res["version"] != "7.0.15" {
		t.Errorf("--wire-version 21 must report 7.0, got %v", res["version"])
	}
	if err := cl.Disconnect(opCtx); err != nil {
		t.Fatal(err)
	}
	cancel() // what SIGINT does
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("clean shutdown returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("mongosim did not stop after its context ended")
	}
}

func TestMongosimRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--port", "70000"},
		{"--wire-version", "22"},
		{"--oplog-capacity", "0"},
		{"extra-arg"},
		{"--no-such-flag"},
	} {
		var errOut strings.Builder
		if err := execute(context.Background(), args, io.Discard, &errOut); err == nil {
			t.Errorf("%v: want an error", args)
		} else if !strings.Contains(errOut.String(), "mongosim:") && !strings.Contains(errOut.String(), "flag") {
			t.Errorf("%v: stderr %q does not say what is wrong", args, errOut.String())
		}
	}
}
