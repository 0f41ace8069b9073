package metrics

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// documented is one row of a metrics table.
type documented struct {
	typ    string
	labels []string // sorted; optional ones included
}

// registered returns every tidemark_ family, its type and its label
// names, with every option that adds a label set.
func registered(t *testing.T) map[string]documented {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if _, err := NewBlobstoreMetrics(reg, BlobstoreOptions{KeyClass: func(string) string { return "x" }, KeyClasses: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewCheckpointMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := NewReplicationMetrics(reg); err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(BuildInfoCollector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]documented)
	for _, mf := range mfs {
		var labels []string
		for _, l := range mf.GetMetric()[0].GetLabel() {
			labels = append(labels, l.GetName())
		}
		slices.Sort(labels)
		out[mf.GetName()] = documented{typ: strings.ToLower(mf.GetType().String()), labels: labels}
	}
	return out
}

// docTable reads the table of the package doc: the indented rows of
// doc.go that start with a metric name.
func docTable(t *testing.T) map[string]documented {
	t.Helper()
	f, err := os.Open("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := make(map[string]documented)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "//\t")
		if !ok || !strings.HasPrefix(line, Namespace+"_") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 4 {
			t.Fatalf("doc.go: a table row needs name, type, labels and meaning: %q", line)
		}
		var labels []string
		if fields[2] != "-" {
			for _, l := range strings.Split(fields[2], ",") {
				labels = append(labels, strings.TrimSuffix(l, "?"))
			}
		}
		slices.Sort(labels)
		out[fields[0]] = documented{typ: fields[1], labels: labels}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// pageRow matches a row of docs/metrics.md's table:
// | `name` | type | `label`, `label` … | meaning |
var pageRow = regexp.MustCompile("^\\| `(" + Namespace + "_[a-z_]+)` \\| ([a-z]+) \\|([^|]*)\\|")

// pageTable reads the table of the repository's metrics page,
// docs/metrics.md.
func pageTable(t *testing.T) map[string]documented {
	t.Helper()
	data, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]documented)
	label := regexp.MustCompile("`([a-z_]+)`")
	for line := range strings.Lines(string(data)) {
		m := pageRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var labels []string
		for _, l := range label.FindAllStringSubmatch(m[3], -1) {
			labels = append(labels, l[1])
		}
		slices.Sort(labels)
		out[m[1]] = documented{typ: m[2], labels: labels}
	}
	return out
}

func compareTable(t *testing.T, where string, doc, reg map[string]documented) {
	t.Helper()
	for name, r := range reg {
		d, ok := doc[name]
		switch {
		case !ok:
			t.Errorf("%s does not document %s", where, name)
		case d.typ != r.typ:
			t.Errorf("%s: %s is a %s, documented as a %s", where, name, r.typ, d.typ)
		case !slices.Equal(d.labels, r.labels):
			t.Errorf("%s: %s has labels %v, documented %v", where, name, r.labels, d.labels)
		}
	}
	for name := range doc {
		if _, ok := reg[name]; !ok {
			t.Errorf("%s documents %s, which does not exist", where, name)
		}
	}
}

// The package doc's table lists every family, with its type and labels,
// and nothing else.
func TestDocTableIsComplete(t *testing.T) {
	compareTable(t, "the package doc", docTable(t), registered(t))
}

// So does docs/metrics.md's.
func TestMetricsPageTableIsComplete(t *testing.T) {
	doc := pageTable(t)
	if len(doc) == 0 {
		t.Fatal("docs/metrics.md has no metrics table: every family must be documented there")
	}
	compareTable(t, "docs/metrics.md", doc, registered(t))
}
