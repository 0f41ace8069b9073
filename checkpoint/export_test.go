package checkpoint

import "time"

// SetCleanupTimeout sets the deadline of the sink abort after a failure,
// for tests, and returns a function restoring it.
func SetCleanupTimeout(d time.Duration) (restore func()) {
	old := cleanupTimeout
	cleanupTimeout = d
	return func() { cleanupTimeout = old }
}
