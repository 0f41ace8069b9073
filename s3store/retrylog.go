package s3store

import (
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// retryLogInterval is how often, at most, a Store logs that it retries:
// once at the start of an outage, then every so often while it lasts.
const retryLogInterval = 15 * time.Second

// loggedRetryer is the SDK's retryer, with a warning when an attempt
// failed and is retried: without it a store that does not answer (an
// endpoint down at start-up, an outage) is silent until the operation
// gives up, up to OperationTimeout later.
type loggedRetryer struct {
	aws.RetryerV2
	log       *slog.Logger
	endpoint  string
	operation time.Duration

	mu   sync.Mutex
	last time.Time
}

// RetryDelay logs the first retry of an outage, and then one every
// retryLogInterval, and returns the delay of the retryer it wraps.
func (r *loggedRetryer) RetryDelay(attempt int, err error) (time.Duration, error) {
	d, derr := r.RetryerV2.RetryDelay(attempt, err)
	if derr == nil && r.log != nil {
		r.mu.Lock()
		now := time.Now()
		due := now.Sub(r.last) >= retryLogInterval
		if due {
			r.last = now
		}
		r.mu.Unlock()
		if due {
			r.log.Warn("s3store: an attempt failed; retrying", "endpoint", r.endpoint, "attempt", attempt,
				"gives_up_after", r.operation.String(), "err", err.Error())
		}
	}
	return d, derr
}
