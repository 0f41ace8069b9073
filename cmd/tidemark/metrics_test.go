package main

import (
	"bufio"
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
