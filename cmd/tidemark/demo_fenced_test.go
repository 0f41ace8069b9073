package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demo"
)

func TestFencedDemoSaysOnceThatAnotherNodeTookOver(t *testing.T) {
	// The chain a fenced demo ends on: the demo's words, the storage's,
	// then the sentinel's.
	chain := fmt.Errorf("demo: fenced: another node took over this job; this one stops without touching it: %w",
		fmt.Errorf("blobstorage: save %q: %w", checkpoint.NewID(3), checkpoint.ErrFenced))
	var stderr bytes.Buffer
	a := &app{env: env{stdout: &bytes.Buffer{}, stderr: &stderr, getenv: func(string) string { return "" }}}
	err := a.finishDemo(t.Context(), demo.Result{}, chain, map[string]any{}, func(string, ...any) {}, func() {}, nil)
	if !errors.Is(err, checkpoint.ErrFenced) {
		t.Fatalf("finishDemo: %v, want an error wrapping checkpoint.ErrFenced", err)
	}
	msg := err.Error()
	if n := strings.Count(msg, "took over"); n != 1 || !strings.Contains(msg, "fenced") || !strings.Contains(msg, "stop one of them") {
		t.Fatalf("fenced message says %d times that another node took over: %q", n, msg)
	}
	if code := exitCode(t.Context(), err); code != exitCode(t.Context(), chain) {
		t.Errorf("exit code %d, the fenced error's is %d", code, exitCode(t.Context(), chain))
	}
}
