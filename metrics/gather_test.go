package metrics

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// series is one gathered series: a counter's or gauge's value, or a
// histogram's count and sum.
type series struct {
	typ   dto.MetricType
	value float64
	count uint64
	sum   float64
}

// families is what a registry gathered: family name, then the series'
// labels (`k="v",k="v"`, sorted by name), then the series.
type families map[string]map[string]series

// gather gathers reg, failing the test on a gathering error (an invalid
// or inconsistent metric).
func gather(t *testing.T, reg prometheus.Gatherer) families {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := make(families)
	for _, mf := range mfs {
		fam := make(map[string]series)
		for _, m := range mf.GetMetric() {
			var lv []string
			for _, l := range m.GetLabel() {
				lv = append(lv, l.GetName()+`="`+l.GetValue()+`"`)
			}
			slices.Sort(lv)
			s := series{typ: mf.GetType()}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				s.value = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				s.value = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				s.count = m.GetHistogram().GetSampleCount()
				s.sum = m.GetHistogram().GetSampleSum()
			default:
				t.Fatalf("%s: unexpected type %v", mf.GetName(), mf.GetType())
			}
			fam[strings.Join(lv, ",")] = s
		}
		out[mf.GetName()] = fam
	}
	return out
}

// get returns the series of family name with labels, failing the test
// when there is none (or the family has another type).
func (f families) get(t *testing.T, name string, typ dto.MetricType, labels string) series {
	t.Helper()
	fam, ok := f[name]
	if !ok {
		t.Fatalf("no family %s", name)
	}
	s, ok := fam[labels]
	if !ok {
		t.Fatalf("%s has no series {%s}; it has %v", name, labels, keys(fam))
	}
	if s.typ != typ {
		t.Fatalf("%s is a %v, want %v", name, s.typ, typ)
	}
	return s
}

// value returns the value of a counter or gauge series.
func (f families) value(t *testing.T, name string, typ dto.MetricType, labels string) float64 {
	t.Helper()
	return f.get(t, name, typ, labels).value
}

func keys(m map[string]series) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

const (
	counter   = dto.MetricType_COUNTER
	gauge     = dto.MetricType_GAUGE
	histogram = dto.MetricType_HISTOGRAM
)
