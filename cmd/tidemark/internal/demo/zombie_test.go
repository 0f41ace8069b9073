package demo

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demofault"
)

// A run fenced by another node stops at its next checkpoint, saying so.
func TestRunStopsWithAFencedMessageWhenAnotherNodeTakesOver(t *testing.T) {
	bs := memstore.New()
	zombie := node(t, bs)
	takeover := make(chan error, 1)
	zombie.Progress = func(p Progress) {
		// Once the zombie completed a checkpoint, another node takes the
		// writer role.
		if p.Event == "checkpoint" && p.Checkpoints == 1 {
			other := blobstorage.New(bs, filepath.Join(t.TempDir(), "checkpoints"), blobstorage.Options{})
			_, err := other.Acquire(t.Context())
			takeover <- err
		}
	}
	start := time.Now()
	res, err := Run(demofault.With(t.Context(), demofault.Faults{Slow: time.Millisecond}), zombie)
	if terr := <-takeover; terr != nil {
		t.Fatal(terr)
	}
	if !errors.Is(err, checkpoint.ErrFenced) || !strings.HasPrefix(err.Error(), "demo: fenced: another node took over") {
		t.Fatalf("zombie run: %v, want a fenced error saying another node took over", err)
	}
	t.Logf("zombie stopped at offset %d: %v", res.EndOffset, err)
	// Promptly: at its next checkpoint, not after reading the whole source.
	if res.EndOffset >= zombie.Records {
		t.Fatalf("zombie read to offset %d of %d after being fenced (in %s)", res.EndOffset, zombie.Records, time.Since(start))
	}
}
