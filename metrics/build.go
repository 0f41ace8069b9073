package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tidemark-io/tidemark/internal/version"
)

// BuildInfoCollector returns the tidemark_build_info gauge: always 1,
// labelled by the Tidemark version, VCS revision and Go version of this
// binary (see tidemark version), so that dashboards can tell builds apart
// and join them to other series.
func BuildInfoCollector() prometheus.Collector {
	b := version.Info()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "build_info",
		Help: "Always 1; its labels say which build of Tidemark is running.",
		ConstLabels: prometheus.Labels{
			"version":   b.Version,
			"revision":  b.Revision,
			"goversion": b.GoVersion,
		},
	})
	g.Set(1)
	return g
}

// NewRegistry returns a registry holding what a Tidemark process exposes
// besides the families of BlobstoreMetrics and CheckpointMetrics: the Go
// runtime and process collectors (go_*, process_*) and
// tidemark_build_info.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		BuildInfoCollector(),
	)
	return reg
}
