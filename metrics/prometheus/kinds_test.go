package prometheus

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	prom "github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/observe/observetest"
)

// counters renders every counter and histogram of m.
func counters(t *testing.T, m *Metrics) string {
	t.Helper()
	reg := prom.NewPedanticRegistry()
	for _, c := range m.vecs() {
		reg.MustRegister(c)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			fmt.Fprintf(&b, "%s %v\n", mf.GetName(), metricValue(mt))
		}
	}
	return b.String()
}

func metricValue(mt *dto.Metric) string {
	var labels []string
	for _, l := range mt.GetLabel() {
		labels = append(labels, l.GetName()+"="+l.GetValue())
	}
	sort.Strings(labels)
	return fmt.Sprint(labels, mt.GetCounter().GetValue(), mt.GetHistogram().GetSampleCount())
}

// TestEveryKindCountedOrListed: every observe kind either changes a metric of the adapter or is
// in notCounted with a reason, never both.
func TestEveryKindCountedOrListed(t *testing.T) {
	observetest.EveryKind(t, notCounted, func(ev observe.Event) bool {
		m := New(Options{})
		m.zero(ev.EventMeta().Stream) // the stream's zero series, which its first event would create
		before := counters(t, m)
		m.OnEvent(ev)
		return counters(t, m) != before
	})
}
