package demo

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demofault"
)

// snapshot returns every key of bs with its contents.
func snapshot(t *testing.T, bs blobstore.Blobstore) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range blobstoretest.ListKeys(t, bs, "") {
		out[k] = string(blobstoretest.Get(t, bs, k))
	}
	return out
}

func sameSnapshot(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if !maps.Equal(got, want) {
		var diff []string
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				diff = append(diff, k)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				diff = append(diff, "+"+k)
			}
		}
		t.Fatalf("%s changed the store: %v", what, diff)
	}
}

// A job with workers resumed in one process, and a job run in one
// process resumed with workers, are refused before anything is written
// (no writer role taken, no probe object left), and the refusal says how
// to resume.
func TestRunRefusesAJobOfTheOtherShapeBeforeWriting(t *testing.T) {
	t.Run("workers job in one process", func(t *testing.T) {
		bs := fileStore(t)
		wc, _ := workersNode(t, bs, 2)
		_, err := RunWorkers(demofault.With(t.Context(), demofault.Faults{CrashAfter: 5000}), wc)
		if !errors.Is(err, ErrCrashed) {
			t.Fatalf("run workers: %v, want a crash", err)
		}
		before := snapshot(t, bs)
		cfg := node(t, bs)
		cfg.Records, cfg.Words = wc.Records, wc.Words
		_, err = Run(t.Context(), cfg)
		want := "this job runs with workers (owners part-00…part-07"
		if !errors.Is(err, ErrJobMismatch) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "resume with --workers N") {
			t.Fatalf("one-process run of a job with workers: %v, want ErrJobMismatch saying %q and resume with --workers N", err, want)
		}
		sameSnapshot(t, "the refused run", snapshot(t, bs), before)
	})
	t.Run("one-process job with workers", func(t *testing.T) {
		bs := fileStore(t)
		cfg := node(t, bs)
		cfg.Records, cfg.Words = 8000, 100
		_, err := Run(demofault.With(t.Context(), demofault.Faults{CrashAfter: 5000}), cfg)
		if !errors.Is(err, ErrCrashed) {
			t.Fatalf("run: %v, want a crash", err)
		}
		before := snapshot(t, bs)
		wc, _ := workersNode(t, bs, 2)
		_, err = RunWorkers(t.Context(), wc)
		if !errors.Is(err, ErrJobMismatch) || !strings.Contains(err.Error(), "this job runs in one process") ||
			!strings.Contains(err.Error(), "resume without --workers") || strings.Contains(err.Error(), "another job") {
			t.Fatalf("run with workers of a one-process job: %v, want ErrJobMismatch saying this job runs in one process: resume without --workers", err)
		}
		sameSnapshot(t, "the refused run", snapshot(t, bs), before)
	})
}

// More workers than owners is refused before anything is written: a
// worker holds at least one owner.
func TestRunWorkersRefusesMoreWorkersThanOwners(t *testing.T) {
	bs := fileStore(t)
	wc, _ := workersNode(t, bs, DefaultOwners+1)
	_, err := RunWorkers(t.Context(), wc)
	if err == nil || !strings.Contains(err.Error(), "9 workers for 8 owners") {
		t.Fatalf("run with %d workers: %v, want a refusal naming 8 owners", wc.Workers, err)
	}
	sameSnapshot(t, "the refused run", snapshot(t, bs), map[string]string{})
}
