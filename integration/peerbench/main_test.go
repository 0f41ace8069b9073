package main

import (
	"bytes"
	"encoding/csv"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestMain lets the test binary play the re-executed Tidemark child, as
// the peerbench binary does.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	os.Exit(m.Run())
}

// TestPeerbenchRunsEndToEndAtSmallSize runs the whole benchmark, one
// round at a small size (16 MiB streams, 8 × 1 MiB files), against real
// MinIO, mc and rclone, so that it keeps working: every operation by
// every tool succeeds, and the CSV and the PNG are written and readable.
// The figures are printed, not checked (no timed assertions).
func TestPeerbenchRunsEndToEndAtSmallSize(t *testing.T) {
	cfg, err := parseFlags([]string{"-rounds", "1", "-stream-size", "16MiB", "-files", "8", "-file-size", "1MiB", "-out", t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	samples, err := run(t.Context(), cfg, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if want := len(ops) * len(tools); len(samples) != want {
		t.Fatalf("%d samples, want %d", len(samples), want)
	}
	f, err := os.Open(filepath.Join(cfg.out, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) != len(samples)+1 {
		t.Fatalf("results.csv: %d rows, %v; want a header and %d samples", len(rows), err, len(samples))
	}
	pf, err := os.Open(filepath.Join(cfg.out, "results.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	if img, err := png.Decode(pf); err != nil || img.Bounds().Dx() < 600 {
		t.Fatalf("results.png: %v", err)
	}
	entries, _ := os.ReadDir(cfg.out)
	if len(entries) != 2 {
		t.Errorf("the work directory was not removed: %d entries in %s", len(entries), cfg.out)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1GiB": 1 << 30, "64MiB": 64 << 20, "512KiB": 512 << 10, "100": 100} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0MiB", "-1", "1TB", "MiB"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) succeeded", bad)
		}
	}
}

// TestInstallScriptPinsThePeersVersions: scripts/install-peers.sh builds
// the versions the table names.
func TestInstallScriptPinsThePeersVersions(t *testing.T) {
	script, err := os.ReadFile("../../scripts/install-peers.sh")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"RCLONE_VERSION": RcloneVersion, "MC_VERSION": McVersion} {
		m := regexp.MustCompile(`(?m)^` + name + `="\$\{` + name + `:-([^}]+)\}"$`).FindSubmatch(script)
		if m == nil || string(m[1]) != want {
			t.Errorf("scripts/install-peers.sh: %s line %q, want the default %s", name, m, want)
		}
	}
}
