package health_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/health"
	"github.com/watchtree/watchtree/test/mongosim"
)

const wait = 20 * time.Second

func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

type fixed []watchtree.StreamStatus

func (f fixed) Streams(context.Context) ([]watchtree.StreamStatus, error) { return f, nil }

func TestReadinessByState(t *testing.T) {
	for _, c := range []struct {
		state watchtree.StreamState
		ready bool
	}{
		{watchtree.StateRunning, true}, {watchtree.StateStandby, true},
		{watchtree.StateStarting, false}, {watchtree.StateBackoff, false}, {watchtree.StateStopping, false},
		{watchtree.StateStopped, false}, {watchtree.StateCrashed, false},
	} {
		srv := httptest.NewServer(health.Handler(fixed{{Name: "a", State: watchtree.StateRunning}, {Name: "b", State: c.state, Why: "because"}}, health.Options{}))
		code, body := get(t, srv, "/readyz")
		srv.Close()
		if (code == http.StatusOK) != c.ready || !strings.Contains(body, "b: "+string(c.state)) {
			t.Errorf("%s: %d %q, want ready %v", c.state, code, body, c.ready)
		}
	}
}

func TestHealthzAndMetricsRoutes(t *testing.T) {
	srv := httptest.NewServer(health.Handler(fixed{}, health.Options{}))
	defer srv.Close()
	if code, body := get(t, srv, "/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, _ := get(t, srv, "/metrics"); code != http.StatusNotFound {
		t.Errorf("/metrics without a handler: %d", code)
	}
	srv2 := httptest.NewServer(health.Handler(fixed{}, health.Options{Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "# metrics\n")
	})}))
	defer srv2.Close()
	if code, body := get(t, srv2, "/metrics"); code != 200 || body != "# metrics\n" {
		t.Errorf("/metrics: %d %q", code, body)
	}
}

// TestReadinessFollowsALiveStream: running is ready, crashed (restart attempts run out) is not,
// started again it is ready again.
func TestReadinessFollowsALiveStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	uri := os.Getenv("WATCHTREE_MONGODB_URI")
	if uri == "" {
		sim, err := mongosim.Start(ctx, mongosim.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer sim.Close()
		uri = sim.URI()
	}
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetAppName("wt-health-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	db := client.Database(fmt.Sprintf("wt_health_%d", time.Now().UnixNano()%1e9))
	defer db.Drop(context.Background())
	rt, err := watchtree.New(watchtree.Config{Client: client, Database: db.Name()})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(context.Background())
	h, err := rt.Spawn(ctx, watchtree.Stream[bson.Raw]{Name: "feed", Collection: "feed",
		Restart:  watchtree.RestartPolicy{MaxAttempts: 1, InitialDelay: 10 * time.Millisecond},
		OnChange: func(context.Context, *watchtree.Event[bson.Raw]) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(health.Handler(rt, health.Options{}))
	defer srv.Close()
	if code, body := get(t, srv, "/readyz"); code != 200 || !strings.Contains(body, "feed: running") {
		t.Fatalf("running: %d %q", code, body)
	}
	failPoint := func(mode any) {
		cmd := bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: mode},
			{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"getMore", "aggregate"}}, {Key: "errorCode", Value: 50},
				{Key: "errorLabels", Value: bson.A{}}, {Key: "appName", Value: "wt-health-test"}}}}
		if err := client.Database("admin").RunCommand(ctx, cmd).Err(); err != nil {
			t.Fatal(err)
		}
	}
	failPoint("alwaysOn")
	deadline := time.Now().Add(wait)
	for {
		code, body := get(t, srv, "/readyz")
		if code == http.StatusServiceUnavailable && strings.Contains(body, "feed: crashed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never crashed: %d %q", code, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("crashed after %v", time.Since(deadline.Add(-wait)))
	failPoint("off")
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, srv, "/readyz"); code != 200 || !strings.Contains(body, "feed: running") {
		t.Fatalf("started again: %d %q", code, body)
	}
}

// TestHandlerUnderAPrefix: mounted under /ops/ without http.StripPrefix, the handler serves
// /ops/healthz, /ops/readyz and /ops/metrics (it used to 404 them); with StripPrefix too. Other
// paths are 404 and other methods 405.
func TestHandlerUnderAPrefix(t *testing.T) {
	h := health.Handler(fixed{{Name: "a", State: watchtree.StateRunning}}, health.Options{Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "# metrics\n")
	})})
	mux := http.NewServeMux()
	mux.Handle("/ops/", h)
	mux.Handle("/stripped/", http.StripPrefix("/stripped", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, prefix := range []string{"/ops", "/stripped"} {
		for path, want := range map[string]string{"/healthz": "ok\n", "/readyz": "ready\na: running\n", "/metrics": "# metrics\n"} {
			if code, body := get(t, srv, prefix+path); code != http.StatusOK || body != want {
				t.Errorf("%s%s: %d %q, want 200 %q", prefix, path, code, body, want)
			}
		}
		if code, _ := get(t, srv, prefix+"/nothing"); code != http.StatusNotFound {
			t.Errorf("%s/nothing: %d, want 404", prefix, code)
		}
	}
	resp, err := srv.Client().Post(srv.URL+"/ops/healthz", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /ops/healthz: %d, want 405", resp.StatusCode)
	}
}
