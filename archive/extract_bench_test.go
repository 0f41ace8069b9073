package archive

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// archiveOfEmptyFiles is an archive of n empty files, 100 per directory.
func archiveOfEmptyFiles(tb testing.TB, n int) []byte {
	files := make([]File, n)
	entries := make([]entry, 0, n+1)
	for i := range files {
		files[i] = fileOf(fmt.Sprintf("state/op/d%04d/%06d", i/100, i), nil)
	}
	entries = append(entries, reg(ManifestName, manifestOf(files...)))
	for _, f := range files {
		entries = append(entries, reg(f.Path, nil))
	}
	return rawTar(entries...)
}

// BenchmarkExtract100kEmptyFiles is issue 23's figure: 100,000 empty
// files (16 s before their fsyncs ran in parallel; the target is 10 s).
func BenchmarkExtract100kEmptyFiles(b *testing.B) {
	data := archiveOfEmptyFiles(b, 100_000)
	var worst time.Duration
	for b.Loop() {
		dir := filepath.Join(b.TempDir(), "out")
		start := time.Now()
		if _, err := ExtractDir(b.Context(), bytes.NewReader(data), dir, Limits{}); err != nil {
			b.Fatal(err)
		}
		worst = max(worst, time.Since(start))
	}
	b.ReportMetric(worst.Seconds(), "worst-s")
}
