package watchtree

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/watchtree/watchtree/console"
	"github.com/watchtree/watchtree/internal/testenv"
	"github.com/watchtree/watchtree/messages"
)

// outageBound is what the tests allow a console answer or a scrape during an outage: generous,
// so that a loaded machine does not fail them; without the in-memory readings every one took
// the console's RequestTimeout (10s). BenchmarkConsoleDuringOutage measures the real figure.
const outageBound = 2 * time.Second

type outageDoc struct {
	ID int64 `bson:"_id"`
}

// outageRuntime starts a runtime with a console and one stream holding one dead letter, reads
// the console once while MongoDB answers (so the count is known), and returns a client of it.
// The runtime stops when t ends.
func outageRuntime(t testing.TB, e *rtEnv, shutdown time.Duration) (*Runtime, *console.Client) {
	t.Helper()
	rt, err := New(Config{Client: e.client, Database: e.db, ShutdownTimeout: shutdown,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)), Console: ConsoleConfig{Addr: "127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), rtWait)
	defer cancel()
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Stop(context.Background()) }) // during an outage it reports the flushes it could not do
	if _, err := rt.Spawn(ctx, Stream[outageDoc]{Name: "pay", Collection: "pay", Retry: RetryPolicy{MaxAttempts: 1},
		OnInsert: func(context.Context, *Event[outageDoc]) error { return errors.New("refused") }}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.coll("pay").InsertOne(ctx, outageDoc{ID: 1}); err != nil {
		t.Fatal(err)
	}
	cl, err := console.Dial(rt.ConsoleAddr(), console.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	deadline := time.Now().Add(rtWait)
	for {
		snap, err := cl.Snapshot(ctx, &messages.SnapshotRequest{})
		if err == nil && len(snap.GetStreams()) == 1 && snap.GetStreams()[0].GetDeadLetters() == 1 &&
			snap.GetStreams()[0].GetDeadLettersUnknown() == "" && snap.GetInstance().GetOplogReadAt() != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dead letter was never counted: %v, %v", snap, err)
		}
		time.Sleep(20 * time.Millisecond) // polling tick
	}
	return rt, cl
}

// outages are the two ways MongoDB goes away: frozen (it holds every command, as a long GC
// pause or SIGSTOP does) and down (the process is gone: connections refused).
var outages = []struct {
	name  string
	begin func(t *testing.T, e *rtEnv)
}{
	{"frozen", func(t *testing.T, e *rtEnv) { e.srv.Pause(); t.Cleanup(e.srv.Resume) }},
	{"down", func(t *testing.T, e *rtEnv) { _ = e.srv.Close() }},
}

// TestConsoleAnswersDuringAnOutage: with MongoDB frozen or down, streams, describe and
// deadletters answer from memory within outageBound, the dead-letter count and the oplog window
// marked unknown in the one wording ("MongoDB unreachable ..."), with the last known count and
// its age. Before, each waited for the console's RequestTimeout (10s) and failed.
func TestConsoleAnswersDuringAnOutage(t *testing.T) {
	for _, o := range outages {
		t.Run(o.name, func(t *testing.T) {
			e := newRTEnv(t)
			e.needSim(t)
			_, cl := outageRuntime(t, e, 2*time.Second)
			o.begin(t, e)
			ctx := context.Background()
			timed := func(what string, f func() error) error {
				t.Helper()
				start := time.Now()
				err := f()
				if took := time.Since(start); took > outageBound {
					t.Errorf("%s took %v during the outage, want < %v", what, took, outageBound)
				}
				return err
			}
			// The first answers may come before the console knows (a refresh unanswered for
			// 1s means unreachable): poll, each answer within the bound, until it says so.
			var row *messages.StreamRow
			var inst *messages.InstanceInfo
			deadline := time.Now().Add(rtWait)
			for row.GetDeadLettersUnknown() == "" || inst.GetMongodbUnreachable() == "" {
				if time.Now().After(deadline) {
					t.Fatalf("the console never said MongoDB is unreachable: %v %v", inst, row)
				}
				var snap *messages.SnapshotReply
				if err := timed("streams", func() (err error) {
					snap, err = cl.Snapshot(ctx, &messages.SnapshotRequest{})
					return err
				}); err != nil {
					t.Fatalf("streams: %v", err)
				}
				row, inst = snap.GetStreams()[0], snap.GetInstance()
				time.Sleep(20 * time.Millisecond) // polling tick
			}
			const wording = "MongoDB unreachable since "
			if !strings.HasPrefix(inst.GetMongodbUnreachable(), wording) {
				t.Errorf("instance: mongodb_unreachable %q, want the one wording %q...", inst.GetMongodbUnreachable(), wording)
			}
			if !strings.HasPrefix(row.GetDeadLettersUnknown(), wording) || !strings.Contains(row.GetDeadLettersUnknown(), "last read") ||
				row.GetDeadLetters() != 1 || row.GetDeadLettersAt() == nil {
				t.Errorf("row: dead letters %d at %v, unknown %q; want the last known 1, its time, and why in the one wording",
					row.GetDeadLetters(), row.GetDeadLettersAt(), row.GetDeadLettersUnknown())
			}
			if !strings.HasPrefix(inst.GetOplogNote(), wording) || inst.GetOplogOldest() != nil || row.GetTokenHeadroom() != nil {
				t.Errorf("oplog: note %q, oldest %v, headroom %v; want unknown in the one wording", inst.GetOplogNote(),
					inst.GetOplogOldest(), row.GetTokenHeadroom())
			}
			if row.GetState() == "" || row.GetState() == "unknown" {
				t.Errorf("row state %q: the supervisor's state is in memory", row.GetState())
			}
			var d *messages.DescribeReply
			if err := timed("describe", func() (err error) { d, err = cl.Describe(ctx, "pay", 5); return err }); err != nil {
				t.Errorf("describe: %v", err)
			} else if !strings.HasPrefix(d.GetStream().GetDeadLettersUnknown(), wording) {
				t.Errorf("describe: dead letters unknown %q", d.GetStream().GetDeadLettersUnknown())
			}
			err := timed("deadletters", func() error { _, err := cl.DeadLetters(ctx, "pay", 10); return err })
			if err == nil || !strings.Contains(err.Error(), wording) {
				t.Errorf("deadletters: %v, want an error in the one wording", err)
			}
			var ctl *messages.ControlReply
			_ = timed("replay", func() (err error) {
				ctl, err = cl.Control(ctx, messages.ControlAction_CONTROL_ACTION_REPLAY, "pay", "", 5*time.Second)
				return err
			})
			if ctl.GetCode() != "unavailable" || !strings.Contains(ctl.GetError(), wording) {
				t.Errorf("replay: %v, want unavailable in the one wording", ctl)
			}
		})
	}
}

// TestStopWithinItsBoundDuringAnOutage: with MongoDB frozen or down, Stop returns within
// ShutdownTimeout (and a scheduling allowance), the streams that could not flush named. Before,
// the instance heartbeat's Leave waited 1s of its own after the bound had passed.
func TestStopWithinItsBoundDuringAnOutage(t *testing.T) {
	const bound, allowance = time.Second, 500 * time.Millisecond
	for _, o := range outages {
		t.Run(o.name, func(t *testing.T) {
			e := newRTEnv(t)
			e.needSim(t)
			rt, _ := outageRuntime(t, e, bound)
			ctx, cancel := context.WithTimeout(context.Background(), rtWait)
			defer cancel()
			if _, err := rt.Spawn(ctx, Stream[outageDoc]{Name: "led", Collection: "led", Mode: SingleLeader,
				OnInsert: func(context.Context, *Event[outageDoc]) error { return nil }}); err != nil {
				t.Fatal(err)
			}
			o.begin(t, e)
			start := time.Now()
			err := rt.Stop(context.Background())
			took := time.Since(start)
			t.Logf("Stop took %v (bound %v): %v", took, bound, err)
			if took > bound+allowance {
				t.Errorf("Stop took %v during the outage, past its bound %v", took, bound)
			}
			if err != nil && (strings.Contains(err.Error(), "console") || strings.Contains(err.Error(), "observer did not drain 0")) {
				t.Errorf("Stop blamed the steps after the streams, which had no time left: %v", err)
			}
		})
	}
}

// BenchmarkConsoleDuringOutage measures a console snapshot (the `streams` verb) while MongoDB
// answers and while it is frozen, in the same run: ns/op of the two, and max-ms, the slowest
// answer (the first of an outage waits up to 50ms for the refresh it starts).
func BenchmarkConsoleDuringOutage(b *testing.B) {
	for _, frozen := range []bool{false, true} {
		name := "healthy"
		if frozen {
			name = "frozen"
		}
		b.Run(name, func(b *testing.B) {
			te := testenv.New(b, "wt_rt_")
			(&testenv.Env{Srv: te.Srv}).NeedSim(b)
			_, cl := outageRuntime(b, &rtEnv{srv: te.Srv, client: te.Client, db: te.DB}, 0)
			if frozen {
				te.Srv.Pause()
				defer te.Srv.Resume()
			}
			ctx := context.Background()
			var slowest time.Duration
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				if _, err := cl.Snapshot(ctx, &messages.SnapshotRequest{}); err != nil {
					b.Fatal(err)
				}
				slowest = max(slowest, time.Since(start))
			}
			b.ReportMetric(float64(slowest.Microseconds())/1000, "max-ms")
		})
	}
}
