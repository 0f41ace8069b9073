package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Namespace prefixes every metric name this package defines.
const Namespace = "tidemark"

// register registers cs on reg, all or none: when one fails (most often
// because the same family is already registered there), it unregisters
// those it registered, so that a failed constructor leaves reg as it was.
// A nil reg registers nothing, as promauto.With(nil) does.
func register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return fmt.Errorf("metrics: already registered (use one instance per registry, or prometheus.WrapRegistererWith to tell instances apart by a label): %w", err)
			}
			return fmt.Errorf("metrics: register: %w", err)
		}
	}
	return nil
}
