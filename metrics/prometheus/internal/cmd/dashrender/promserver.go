package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// promServer is a Prometheus server of this run: its own process, configuration and storage
// in a temporary directory, listening on a free loopback port.
type promServer struct {
	proc *proc
	base string // http://127.0.0.1:port
	http *http.Client
}

// startPrometheus starts Prometheus scraping targets (host:port, each serving /metrics) every
// scrape interval, with its configuration, storage and log in dir, and waits until it is ready.
func startPrometheus(ctx context.Context, bin, dir string, scrape time.Duration, targets []string) (*promServer, error) {
	quoted := make([]string, len(targets))
	for i, t := range targets {
		quoted[i] = strconv.Quote(t)
	}
	cfg := fmt.Sprintf("global:\n  scrape_interval: %s\n  scrape_timeout: %s\nscrape_configs:\n  - job_name: watchtree\n    static_configs:\n      - targets: [%s]\n",
		scrape, scrape, strings.Join(quoted, ", "))
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	p, err := startProc("prometheus", filepath.Join(dir, "prometheus.log"), bin,
		"--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	if err != nil {
		return nil, err
	}
	s := &promServer{proc: p, base: "http://" + addr, http: &http.Client{Timeout: 10 * time.Second}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := s.http.Get(s.base + "/-/ready")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		switch {
		case p.exited():
			return nil, fmt.Errorf("prometheus exited at start (%v); its log ends:\n%s", p.err, logTail(filepath.Join(dir, "prometheus.log")))
		case time.Now().After(deadline):
			p.stop()
			return nil, fmt.Errorf("prometheus not ready on %s within 30s (last: %v)", addr, err)
		case ctx.Err() != nil:
			p.stop()
			return nil, ctx.Err()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// apiResponse is the envelope of Prometheus's HTTP API.
type apiResponse struct {
	Status    string          `json:"status"`
	Error     string          `json:"error"`
	ErrorType string          `json:"errorType"`
	Data      json.RawMessage `json:"data"`
}

// get calls an API path with query parameters and returns its data, or the API's error.
func (s *promServer) get(ctx context.Context, path string, q url.Values) (json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+path+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%s: HTTP %d, not an API reply: %.200s", path, resp.StatusCode, body)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s: %s", path, r.ErrorType, r.Error)
	}
	return r.Data, nil
}

// queryRange evaluates expr at every step from start to end (/api/v1/query_range).
func (s *promServer) queryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]series, error) {
	data, err := s.get(ctx, "/api/v1/query_range", url.Values{"query": {expr},
		"start": {unixString(start)}, "end": {unixString(end)}, "step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}})
	if err != nil {
		return nil, err
	}
	return decodeResult(data)
}

// query evaluates expr at one instant (/api/v1/query).
func (s *promServer) query(ctx context.Context, expr string, at time.Time) ([]series, error) {
	data, err := s.get(ctx, "/api/v1/query", url.Values{"query": {expr}, "time": {unixString(at)}})
	if err != nil {
		return nil, err
	}
	return decodeResult(data)
}

// version returns the server's version (/api/v1/status/buildinfo).
func (s *promServer) version(ctx context.Context) (string, error) {
	data, err := s.get(ctx, "/api/v1/status/buildinfo", url.Values{})
	if err != nil {
		return "", err
	}
	var bi struct {
		Version string `json:"version"`
	}
	return bi.Version, json.Unmarshal(data, &bi)
}

// upTargets returns how many scrape targets are up.
func (s *promServer) upTargets(ctx context.Context) (int, error) {
	ss, err := s.query(ctx, "sum(up)", time.Now())
	if err != nil || len(ss) == 0 || len(ss[0].Points) == 0 {
		return 0, err
	}
	return int(ss[0].Points[0].V), nil
}

// decodeResult turns a query's data (a matrix, a vector or a scalar) into series sorted by
// their labels.
func decodeResult(data json.RawMessage) ([]series, error) {
	var r struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, err
	}
	var out []series
	switch r.ResultType {
	case "matrix":
		var m []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		}
		if err := json.Unmarshal(r.Result, &m); err != nil {
			return nil, err
		}
		for _, s := range m {
			ser := series{Labels: s.Metric}
			for _, v := range s.Values {
				pt, err := samplePoint(v)
				if err != nil {
					return nil, err
				}
				ser.Points = append(ser.Points, pt)
			}
			out = append(out, ser)
		}
	case "vector":
		var v []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(r.Result, &v); err != nil {
			return nil, err
		}
		for _, s := range v {
			pt, err := samplePoint(s.Value)
			if err != nil {
				return nil, err
			}
			out = append(out, series{Labels: s.Metric, Points: []point{pt}})
		}
	case "scalar":
		var v [2]any
		if err := json.Unmarshal(r.Result, &v); err != nil {
			return nil, err
		}
		pt, err := samplePoint(v)
		if err != nil {
			return nil, err
		}
		out = []series{{Labels: map[string]string{}, Points: []point{pt}}}
	default:
		return nil, fmt.Errorf("result type %q not drawn", r.ResultType)
	}
	sortSeries(out)
	return out, nil
}

// samplePoint decodes one [unix seconds, "value"] pair of the API.
func samplePoint(v [2]any) (point, error) {
	ts, ok := v[0].(float64)
	str, ok2 := v[1].(string)
	if !ok || !ok2 {
		return point{}, fmt.Errorf("sample %v is not [time, \"value\"]", v)
	}
	f, err := strconv.ParseFloat(str, 64)
	if err != nil {
		return point{}, fmt.Errorf("sample value %q: %w", str, err)
	}
	sec, frac := math.Modf(ts)
	return point{T: time.Unix(int64(sec), int64(math.Round(frac*1e3))*int64(time.Millisecond)).UTC(), V: f}, nil
}

func unixString(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1e3, 'f', 3, 64)
}
