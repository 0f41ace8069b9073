package savepoint

import "context"

// Test seams (see hookAfterPresence and testNoLocks).

func SetHookAfterPresence(f func()) func() {
	hookAfterPresence = f
	return func() { hookAfterPresence = nil }
}

func SetNoLocks(on bool) func() {
	testNoLocks = on
	return func() { testNoLocks = false }
}

// Held reports what the lock of an operation in progress would: taken
// and released here, for the staleness tests.
var (
	Acquire   = acquire
	Shared    = shared
	Exclusive = exclusive
)

func (l *lock) Held() error { return l.held() }

// Crash stops l's refresher without removing l, as a killed process
// leaves it.
func (l *lock) Crash() {
	close(l.stop)
	<-l.done
}

func (l *lock) Release() { l.release(context.Background()) }
