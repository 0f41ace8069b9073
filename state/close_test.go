package state

import (
	"errors"
	"testing"
	"time"
)

// closing reports whether Close has started (closed is set before Close
// waits for running operations).
func (s *Store) closing() bool {
	s.life.RLock()
	defer s.life.RUnlock()
	return s.closed
}

func TestCloseWaitsForRunningScanAndNestedCallsFailFast(t *testing.T) {
	s, err := Open(t.TempDir(), Options{MemTableSize: 256 << 10, CacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	o, err := s.Owner("op")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if err := o.Set([]byte(k), []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	closed := make(chan error, 1)
	n := 0
	for kv, err := range o.Scan(nil) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if n == 1 {
			go func() { closed <- s.Close() }()
			deadline := time.Now().Add(10 * time.Second)
			for !s.closing() {
				if time.Now().After(deadline) {
					t.Fatal("Close did not start")
				}
				time.Sleep(time.Millisecond)
			}
			// Inside the loop, after Close started: a nested call must fail
			// with ErrClosed instead of deadlocking behind Close.
			if _, _, err := o.Get(kv.Key); !errors.Is(err, ErrClosed) {
				t.Fatalf("nested Get during Close = %v, want ErrClosed", err)
			}
			select {
			case err := <-closed:
				t.Fatalf("Close returned (%v) while a Scan was running", err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	if n != 3 {
		t.Fatalf("Scan yielded %d pairs, want 3", n)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close = %v", err)
	}
}
