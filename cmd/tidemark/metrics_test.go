package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// documentedFamilies returns the metric families docs/metrics.md's table
// documents.
func documentedFamilies(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| `(tidemark_[a-z_]+)` \\|")
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := row.FindStringSubmatch(sc.Text()); m != nil {
			names = append(names, m[1])
		}
	}
	if len(names) < 10 {
		t.Fatalf("docs/metrics.md documents %d metric families: the table is missing", len(names))
	}
	return names
}

// A running demo serves every family docs/metrics.md documents at
// --metrics-addr, with non-zero values where a checkpoint implies them.
// The demo's checkpoints are two-phase (its sink): each is two saves, the
// prepared record and its completion, so two checkpoints are four.
func TestDemoServesTheDocumentedMetrics(t *testing.T) {
	addr := freeAddr(t)
	done := make(chan int, 1)
	go func() {
		_, _, code := tm(t, "", "demo", "--dir", t.TempDir(), "--records", "20000", "--words", "300", "--batch", "500",
			"--checkpoint-every", "2000", "--interval", "1h", "--slow", "50ms", "--metrics-addr", addr)
		done <- code
	}()
	body := scrapeUntil(t, addr, "two checkpoints", done, func(b string) bool {
		return metricValue(b, "tidemark_checkpoint_save_duration_seconds_count") >= 4
	})
	for _, name := range documentedFamilies(t) {
		if strings.HasPrefix(name, "tidemark_replication_") {
			continue // tidemark replicate's (TestReplicateServesTheDocumentedMetrics)
		}
		if !strings.Contains(body, "\n"+name) && !strings.Contains(body, "# TYPE "+name+" ") {
			t.Errorf("family %s (in docs/metrics.md) is not served", name)
		}
	}
	wantPositive(t, body, "after two checkpoints",
		"tidemark_checkpoint_save_duration_seconds_count",
		"tidemark_checkpoint_uploaded_bytes_total",
		"tidemark_checkpoint_uploaded_files_total",
		"tidemark_checkpoint_save_requests_count",
		"tidemark_checkpoint_last_completed_timestamp_seconds",
		`tidemark_objstore_operations_total{key_class="record",operation="put_if_absent"}`,
		"tidemark_build_info",
	)
	if code := <-done; code != 0 {
		t.Fatalf("demo: exit %d", code)
	}
}

// freeAddr returns a local TCP address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// scrapeUntil scrapes http://addr/metrics until enough holds of what it
// serves and returns that; it fails the test if the process ends first
// (its exit code arrives on ended) or a minute passes.
func scrapeUntil(t *testing.T, addr, what string, ended <-chan int, enough func(body string) bool) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if b, err := scrape("http://" + addr + "/metrics"); err == nil && enough(b) {
			return b
		}
		select {
		case code := <-ended:
			t.Fatalf("the process ended (exit %d) before %s were scraped", code, what)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in the scraped metrics after a minute", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// wantPositive fails the test for each series of names whose value in
// body is not above 0.
func wantPositive(t *testing.T, body, when string, names ...string) {
	t.Helper()
	for _, name := range names {
		if v := metricValue(body, name); v <= 0 {
			t.Errorf("%s = %v %s, want > 0", name, v, when)
		}
	}
}

func scrape(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// metricValue returns the sum of the samples whose name (with labels, if
// given) starts the line, or -1.
func metricValue(body, name string) float64 {
	sum, found := 0.0, false
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name) || strings.HasPrefix(line, "#") {
			continue
		}
		rest := line[len(name):]
		if !strings.HasPrefix(rest, " ") && !strings.HasPrefix(rest, "{") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum, found = sum+v, true
		}
	}
	if !found {
		return -1
	}
	return sum
}

// A worker started with --metrics-addr serves its own metrics: the parts
// it saved, their uploads, and its store operations by key class.
func TestDemoWorkerServesItsMetrics(t *testing.T) {
	metricsAddr := freeAddr(t)
	coord := startCoordinator(t, "100ms")
	worker := make(chan int, 1)
	go func() {
		_, _, code := tmEnv(t, natsCreds, "demo", "worker", "--coordinator", coord.addr, "--slot", "0", "--dir", t.TempDir(), "--metrics-addr", metricsAddr)
		worker <- code
	}()
	body := scrapeUntil(t, metricsAddr, "two parts", worker, func(b string) bool {
		return metricValue(b, `tidemark_checkpoint_part_save_duration_seconds_count{result="success"}`) >= 2
	})
	wantPositive(t, body, "in a worker after two parts",
		"tidemark_checkpoint_uploaded_bytes_total",
		"tidemark_checkpoint_uploaded_files_total",
		`tidemark_objstore_operations_total{key_class="part",operation="put_if_absent"}`,
		"tidemark_build_info",
	)
	if v := metricValue(body, "tidemark_checkpoint_save_duration_seconds_count"); v != 0 {
		t.Errorf("worker: %v checkpoint saves counted; a worker saves parts, the coordinator saves checkpoints", v)
	}
	if code := <-worker; code != 0 {
		t.Errorf("worker: exit %d", code)
	}
	if c := <-coord.done; c.code != 0 {
		t.Errorf("coordinator: exit %d\n%s", c.code, c.stderr)
	}
}

// A --metrics-addr that parses but cannot be bound (a port in use) fails
// naming the flag, before the demo or the worker creates its --dir.
func TestMetricsAddrInUseLeavesNoDir(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().String()
	for _, args := range [][]string{
		{"demo", "--records", "1000", "--metrics-addr", busy, "--dir"},
		{"demo", "worker", "--coordinator", "127.0.0.1:7070", "--slot", "0", "--metrics-addr", busy, "--dir"},
	} {
		dir := filepath.Join(t.TempDir(), "deep", "dir")
		_, errOut, code := tm(t, "", append(args, dir)...)
		if code == exitOK || !strings.Contains(errOut, "--metrics-addr") {
			t.Errorf("tidemark %s with %s in use: exit %d, want a failure naming --metrics-addr:\n%s", strings.Join(args, " "), busy, code, errOut)
		}
		if _, err := os.Stat(filepath.Dir(dir)); !os.IsNotExist(err) {
			t.Errorf("tidemark %s with %s in use created %s (%v)", strings.Join(args, " "), busy, filepath.Dir(dir), err)
		}
	}
}
