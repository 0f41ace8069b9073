package job

import (
	"context"

	"github.com/tidemark-io/tidemark/checkpoint"
)

// ErrHalted ends a run whose crash hook returned checkpoint.HookHalt.
var ErrHalted = errHalted

// WithHook returns cfg with a crash hook on the Coordinator: it fires
// after each protocol step, as Coordinator.Hook does.
func WithHook(cfg Config, hook func(checkpoint.Step, string) checkpoint.HookAction) Config {
	cfg.hook = hook
	return cfg
}

// Sweep runs s's recovery sweep for writer, as the runtime does.
func Sweep(ctx context.Context, s *BlobSink, writer string) (lastID string, err error) {
	return s.sweep(ctx, "", writer)
}
