package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/messages"
)

// generic runs a verb with -o json and decodes its output as plain JSON.
func generic(t *testing.T, args ...string) map[string]any {
	t.Helper()
	code, out, errs := cli(t, append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("watchtree %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("watchtree %s: not JSON: %v\n%s", strings.Join(args, " "), err, out)
	}
	return v
}

// TestJSONShapes: the CLI's JSON has numbers as numbers (protojson wrote int64 and uint64 as
// strings) and every enum in the short form the string fields use ("running", not
// SUPERVISOR_STATE_RUNNING); the mode is watchtree.Mode's name; the instance has its name and
// its ID.
func TestJSONShapes(t *testing.T) {
	snap := generic(t, "streams")
	inst := snap["instance"].(map[string]any)
	if _, ok := inst["pid"].(float64); !ok {
		t.Errorf("instance.pid = %#v, want a JSON number", inst["pid"])
	}
	if inst["id"] != "cli-test-instance" || inst["name"] == "" || inst["name"] == nil {
		t.Errorf("instance id %v name %v: want both", inst["id"], inst["name"])
	}
	d := generic(t, "describe", "orders")
	row := d["stream"].(map[string]any)
	if _, ok := row["incarnation"].(float64); !ok {
		t.Errorf("stream.incarnation = %#v, want a JSON number", row["incarnation"])
	}
	if row["mode"] != "AllInstances" || row["state"] != "running" {
		t.Errorf("stream mode %v state %v", row["mode"], row["state"])
	}
	st := d["status"].(map[string]any)
	if st["state"] != "running" {
		t.Errorf("status.state = %#v, want \"running\" (the spelling of stream.state)", st["state"])
	}
	if _, ok := st["incarnation"].(float64); !ok {
		t.Errorf("status.incarnation = %#v, want a JSON number", st["incarnation"])
	}
}

// TestTreeHidesProtoactor: tree shows watchtree's actors; protoactor's own (its "deadletter"
// sink, which has nothing to do with watchtree's dead letters) only with --all.
func TestTreeHidesProtoactor(t *testing.T) {
	var tree, all messages.TreeReply
	cliJSON(t, &tree, "tree")
	cliJSON(t, &all, "tree", "--all")
	names := func(tr *messages.TreeReply) map[string]bool {
		out := map[string]bool{}
		var walk func(ns []*messages.ActorNode)
		walk = func(ns []*messages.ActorNode) {
			for _, n := range ns {
				out[n.GetId()] = true
				walk(n.GetChildren())
			}
		}
		walk(tr.GetRoots())
		return out
	}
	if names(&tree)["deadletter"] || tree.GetHidden() == 0 {
		t.Errorf("tree shows protoactor's deadletter (hidden %d): %v", tree.GetHidden(), names(&tree))
	}
	if !names(&all)["deadletter"] || all.GetHidden() != 0 || all.GetActors() != tree.GetActors()+tree.GetHidden() {
		t.Errorf("tree --all: %d actors, %d hidden, deadletter %v; the default has %d + %d hidden", all.GetActors(), all.GetHidden(),
			names(&all)["deadletter"], tree.GetActors(), tree.GetHidden())
	}
	if !names(&tree)["console"] {
		t.Errorf("tree lacks the console: %v", names(&tree))
	}
	_, out, _ := cli(t, "tree")
	if !strings.Contains(out, "not shown: --all") {
		t.Errorf("tree does not say what it hides:\n%s", out)
	}
}

// TestReplayRefreshAndSummary: replay (all) prints one summary line, replayed, failed and
// skipped; --refresh replays a fixed document with its current content; a refresh of a deleted
// document skips it.
func TestReplayRefreshAndSummary(t *testing.T) {
	live.healthy.Store(false)
	insert(t, "flaky", Order{ID: 301, Fail: true}, Order{ID: 302, Fail: true})
	var dl messages.DeadLettersReply
	waitFor(t, "two dead letters", func() bool {
		cliJSON(t, &dl, "deadletters", "flaky")
		return len(dl.GetDeadLetters()) == 2
	})
	defer func() { // the documents and dead letters go, so that -count=N runs again
		cli(t, "purge", "flaky", "--token", testToken)
		_, _ = live.db.Collection("flaky").DeleteMany(context.Background(), bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{301, 302}}}}})
		live.mu.Lock()
		delete(live.deliveries["flaky"], 301)
		live.mu.Unlock()
	}()
	for _, x := range dl.GetDeadLetters() {
		if !x.GetReplayable() || x.GetErrorType() != "error" {
			t.Errorf("dead letter %v: want replayable, error_type error", x)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := live.db.Collection("flaky").UpdateOne(ctx, bson.D{{Key: "_id", Value: 301}}, bson.D{{Key: "$set", Value: bson.D{{Key: "fail", Value: false}}}}); err != nil {
		t.Fatal(err)
	}
	code, out, errs := cli(t, "replay", "flaky", "--token", testToken)
	if code != 1 || !strings.HasPrefix(out, "replay flaky: 0 replayed, 2 failed, 0 skipped\n") || strings.Count(out, "failed: ") != 2 ||
		!strings.Contains(errs, "2 of 2 dead letters failed") {
		t.Errorf("replay as stored: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = cli(t, "replay", "flaky", "--refresh", "--token", testToken)
	if code != 1 || !strings.HasPrefix(out, "replay flaky: 1 replayed, 1 failed, 0 skipped\n") {
		t.Errorf("replay --refresh: exit %d\n%s%s", code, out, errs)
	}
	if delivered("flaky", 301) != 1 || delivered("flaky", 302) != 0 {
		t.Errorf("deliveries 301: %d, 302: %d; want the refreshed 301 once", delivered("flaky", 301), delivered("flaky", 302))
	}
	if _, err := live.db.Collection("flaky").DeleteOne(ctx, bson.D{{Key: "_id", Value: 302}}); err != nil {
		t.Fatal(err)
	}
	code, out, errs = cli(t, "replay", "flaky", "--refresh", "--token", testToken)
	if code != 0 || out != "replay flaky: 0 replayed, 0 failed, 1 skipped\n" {
		t.Errorf("replay --refresh of a deleted document: exit %d\n%s%s", code, out, errs)
	}
}
