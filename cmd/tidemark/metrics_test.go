package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// readmeFamilies returns the metric families the README's table documents.
func readmeFamilies(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../../README.md")
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
		t.Fatalf("the README documents %d metric families: the table is missing", len(names))
	}
	return names
}

// A running demo serves every family the README documents at
// --metrics-addr, with non-zero values where a checkpoint implies them.
// The demo's checkpoints are two-phase (its sink): each is two saves, the
// prepared record and its completion, so two checkpoints are four.
func TestDemoServesTheDocumentedMetrics(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	done := make(chan int, 1)
	go func() {
		_, _, code := tm(t, "", "demo", "--dir", t.TempDir(), "--records", "20000", "--words", "300", "--batch", "500",
			"--checkpoint-every", "2000", "--interval", "1h", "--slow", "50ms", "--metrics-addr", addr)
		done <- code
	}()
	var body string
	deadline := time.Now().Add(60 * time.Second)
	for {
		if b, err := scrape("http://" + addr + "/metrics"); err == nil && metricValue(b, "tidemark_checkpoint_save_duration_seconds_count") >= 4 {
			body = b
			break
		}
		select {
		case code := <-done:
			t.Fatalf("the demo ended (exit %d) before two checkpoints were scraped", code)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint in the scraped metrics after 60 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, name := range readmeFamilies(t) {
		if !strings.Contains(body, "\n"+name) && !strings.Contains(body, "# TYPE "+name+" ") {
			t.Errorf("family %s (in the README) is not served", name)
		}
	}
	for _, name := range []string{
		"tidemark_checkpoint_save_duration_seconds_count",
		"tidemark_checkpoint_uploaded_bytes_total",
		"tidemark_checkpoint_uploaded_files_total",
		"tidemark_checkpoint_save_requests_count",
		"tidemark_checkpoint_last_completed_timestamp_seconds",
		`tidemark_objstore_operations_total{key_class="record",operation="put_if_absent"}`,
		"tidemark_build_info",
	} {
		if v := metricValue(body, name); v <= 0 {
			t.Errorf("%s = %v after two checkpoints, want > 0", name, v)
		}
	}
	if code := <-done; code != 0 {
		t.Fatalf("demo: exit %d", code)
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
	free := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	coordAddr, metricsAddr := free(), free()
	coord := make(chan string, 1)
	go func() {
		_, errOut, code := tm(t, "", "demo", "--dir", t.TempDir(), "--store", fileURL(t.TempDir()), "--records", "20000", "--words", "300",
			"--batch", "500", "--checkpoint-every", "2000", "--interval", "1h", "--slow", "100ms", "--workers", "1", "--worker-listen", coordAddr)
		coord <- fmt.Sprintf("exit %d\n%s", code, errOut)
	}()
	worker := make(chan int, 1)
	go func() {
		_, _, code := tm(t, "", "demo", "worker", "--coordinator", coordAddr, "--slot", "0", "--dir", t.TempDir(), "--metrics-addr", metricsAddr)
		worker <- code
	}()
	var body string
	deadline := time.Now().Add(60 * time.Second)
	for {
		if b, err := scrape("http://" + metricsAddr + "/metrics"); err == nil &&
			metricValue(b, `tidemark_checkpoint_part_save_duration_seconds_count{result="success"}`) >= 2 {
			body = b
			break
		}
		select {
		case code := <-worker:
			t.Fatalf("the worker ended (exit %d) before two parts were scraped; coordinator: %s", code, <-coord)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no part in the worker's scraped metrics after 60 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, name := range []string{
		"tidemark_checkpoint_uploaded_bytes_total",
		"tidemark_checkpoint_uploaded_files_total",
		`tidemark_objstore_operations_total{key_class="part",operation="put_if_absent"}`,
		"tidemark_build_info",
	} {
		if v := metricValue(body, name); v <= 0 {
			t.Errorf("worker: %s = %v after two parts, want > 0", name, v)
		}
	}
	if v := metricValue(body, "tidemark_checkpoint_save_duration_seconds_count"); v != 0 {
		t.Errorf("worker: %v checkpoint saves counted; a worker saves parts, the coordinator saves checkpoints", v)
	}
	if code := <-worker; code != 0 {
		t.Errorf("worker: exit %d", code)
	}
	if c := <-coord; !strings.HasPrefix(c, "exit 0\n") {
		t.Errorf("coordinator: %s", c)
	}
}
