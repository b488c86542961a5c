package main

import (
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// point is one sample of a series.
type point struct {
	T time.Time
	V float64
}

// series is one result series of a PromQL query: its labels and samples in time order (one
// sample for an instant query).
type series struct {
	Labels map[string]string
	Points []point
}

// named is a series as a panel draws it: the legend it shows and the samples.
type named struct {
	Name   string
	Points []point
}

// last returns the newest sample that is a number (Grafana's "last not null" reduction,
// which stat panels use by default); ok is false when there is none.
func (s named) last() (float64, bool) {
	for i := len(s.Points) - 1; i >= 0; i-- {
		if v := s.Points[i].V; !math.IsNaN(v) && !math.IsInf(v, 0) {
			return v, true
		}
	}
	return 0, false
}

// labelString spells labels in PromQL notation, sorted by name: {a="1", b="2"}.
func labelString(labels map[string]string) string {
	var b strings.Builder
	b.WriteString("{")
	for i, k := range slices.Sorted(maps.Keys(labels)) {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k + `="` + labels[k] + `"`)
	}
	b.WriteString("}")
	return b.String()
}

// sortSeries orders a query's series by their labels, so that legends and colours come out
// the same on every render of the same data.
func sortSeries(ss []series) {
	slices.SortFunc(ss, func(a, b series) int { return strings.Compare(labelString(a.Labels), labelString(b.Labels)) })
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
