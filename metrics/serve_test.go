package metrics

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tidemark-io/tidemark/internal/version"
)

// scrape GETs url and parses the text exposition format.
func scrape(t *testing.T, url string) map[string]bool {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse the scrape: %v", err)
	}
	names := make(map[string]bool)
	for name := range mfs {
		names[name] = true
	}
	return names
}

// A scrape of a started server returns every family of the registry a
// demo would build; cancelling the context stops the server.
func TestServe(t *testing.T) {
	reg := NewRegistry()
	bm, err := NewBlobstoreMetrics(reg, BlobstoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewCheckpointMetrics(reg); err != nil {
		t.Fatal(err)
	}
	bm.Done("get", "k", 0, 0, nil)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	srv, err := Start(ctx, "127.0.0.1:0", reg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(srv.URL(), "http://127.0.0.1:") || !strings.HasSuffix(srv.URL(), "/metrics") {
		t.Errorf("URL() = %q", srv.URL())
	}
	got := scrape(t, srv.URL())
	for _, name := range []string{
		"tidemark_build_info", "go_goroutines", opsTotal,
		"tidemark_checkpoint_last_completed_timestamp_seconds",
	} {
		if !got[name] {
			t.Errorf("the scrape has no %s", name)
		}
	}
	if runtime.GOOS == "linux" && !got["process_cpu_seconds_total"] {
		t.Error("the scrape has no process_cpu_seconds_total")
	}

	cancel()
	// Close after the context's cancellation waits for the same shutdown
	// and returns its (nil) result.
	if err := srv.Close(); err != nil {
		t.Errorf("Close after cancel: %v", err)
	}
	if _, err := net.Dial("tcp", srv.Addr().String()); err == nil {
		t.Error("the server still accepts connections after its context was cancelled")
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// Only /metrics is served.
func TestServeOtherPathsAreNotFound(t *testing.T) {
	srv, err := Start(t.Context(), "127.0.0.1:0", prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	resp, err := http.Get(strings.TrimSuffix(srv.URL(), Path) + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /debug/pprof/: %s, want 404", resp.Status)
	}
}

// A port in use is an error from Start, not a goroutine that dies
// unheard.
func TestServeAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = Start(t.Context(), ln.Addr().String(), prometheus.NewRegistry())
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Errorf("Start on a port in use: %v; want EADDRINUSE naming the address", err)
	}
	if _, err := Start(t.Context(), "not an address", prometheus.NewRegistry()); err == nil {
		t.Error("Start accepted a malformed address")
	}
	if _, err := Start(t.Context(), "127.0.0.1:0", nil); err == nil {
		t.Error("Start accepted a nil Gatherer")
	}
}

func TestServeURLOfUnspecifiedAddress(t *testing.T) {
	srv, err := Start(t.Context(), ":0", prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if !strings.HasPrefix(srv.URL(), "http://localhost:") {
		t.Errorf("URL() = %q, want localhost for an unspecified address", srv.URL())
	}
	scrape(t, srv.URL())
}

func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(BuildInfoCollector())
	b := version.Info()
	labels := `goversion="` + b.GoVersion + `",revision="` + b.Revision + `",version="` + b.Version + `"`
	if v := gather(t, reg).value(t, "tidemark_build_info", gauge, labels); v != 1 {
		t.Errorf("tidemark_build_info{%s} = %v, want 1", labels, v)
	}
}
