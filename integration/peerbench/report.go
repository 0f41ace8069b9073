package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// stats are the figures of one operation by one tool over the rounds.
type stats struct {
	median, min, max float64 // MB/s
	rss              int64   // peak RSS, the largest of the rounds, bytes
}

func summarize(samples []sample, op, tool string) (stats, bool) {
	var v []float64
	var st stats
	for _, s := range samples {
		if s.op == op && s.tool == tool {
			v = append(v, s.mbps())
			st.rss = max(st.rss, s.maxRSS)
		}
	}
	if len(v) == 0 {
		return st, false
	}
	slices.Sort(v)
	st.min, st.max = v[0], v[len(v)-1]
	if n := len(v); n%2 == 1 {
		st.median = v[n/2]
	} else {
		st.median = (v[n/2-1] + v[n/2]) / 2
	}
	return st, true
}

// ratio is Tidemark's median over the best peer's.
func ratio(samples []sample, op string) float64 {
	t, _ := summarize(samples, op, "tidemark")
	best := 0.0
	for _, tool := range tools[1:] {
		if s, ok := summarize(samples, op, tool); ok {
			best = max(best, s.median)
		}
	}
	if best == 0 {
		return 0
	}
	return t.median / best
}

func (b *bench) title(op string) string {
	switch op {
	case "checkpoint":
		return fmt.Sprintf(opTitles[op], b.cfg.files, sizeString(b.cfg.fileSize), b.cfg.transfers)
	case "restore":
		return fmt.Sprintf(opTitles[op], b.cfg.transfers)
	}
	return opTitles[op]
}

// report prints the Markdown table and writes results.csv and
// results.png.
func (b *bench) report(w io.Writer) error {
	fmt.Fprintf(w, "\nmedians of %d rounds, MB/s (min–max); stream %s, checkpoint %d × %s, savepoint %s\n\n",
		b.cfg.rounds, sizeString(b.cfg.streamSize), b.cfg.files, sizeString(b.cfg.fileSize), sizeString(b.savept))
	fmt.Fprintln(w, "| operation | Tidemark | mc | rclone "+RcloneVersion+" | Tidemark / best |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- |")
	for _, op := range b.cfg.ops {
		row := "| " + b.title(op) + " |"
		for _, tool := range tools {
			s, _ := summarize(b.samples, op, tool)
			cell := fmt.Sprintf(" %.0f (%.0f–%.0f)", s.median, s.min, s.max)
			if op == "upload" {
				cell += fmt.Sprintf(", %d MiB RSS", s.rss>>20)
			}
			row += cell + " |"
		}
		fmt.Fprintf(w, "%s %.2f |\n", row, ratio(b.samples, op))
	}
	csvPath := filepath.Join(b.cfg.out, "results.csv")
	if err := writeCSV(csvPath, b.samples); err != nil {
		return err
	}
	pngPath := filepath.Join(b.cfg.out, "results.png")
	if err := b.writeChart(pngPath); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nwrote %s and %s\n", csvPath, pngPath)
	return nil
}

func writeCSV(path string, samples []sample) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	cw := csv.NewWriter(f)
	_ = cw.Write([]string{"operation", "tool", "round", "seconds", "bytes", "mb_per_s", "peak_rss_bytes"})
	for _, s := range samples {
		_ = cw.Write([]string{s.op, s.tool, strconv.Itoa(s.round),
			strconv.FormatFloat(s.seconds, 'f', 4, 64), strconv.FormatInt(s.bytes, 10),
			strconv.FormatFloat(s.mbps(), 'f', 1, 64), strconv.FormatInt(s.maxRSS, 10)})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// parseSize reads "64MiB", "1GiB", "512KiB" or a number of bytes.
func parseSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if len(s) > len(u.suffix) && s[len(s)-len(u.suffix):] == u.suffix {
			s, mult = s[:len(s)-len(u.suffix)], u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q: want a positive size such as 64MiB or 1GiB", s)
	}
	return n * mult, nil
}

func sizeString(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d B", n)
}
