package sim

import (
	"testing"
	"time"
)

func ev(op, key string, step int, applied bool, etag, match, body string, err error) Event {
	return Event{Call: Call{Op: op, Key: key}, Fault: Fault{Step: step}, Applied: applied, ETag: etag, Match: match, Body: []byte(body), Err: err, Found: err == nil}
}

// The linearizability check passes a history a register can produce,
// lost responses included, and fails one it cannot.
func TestHistory(t *testing.T) {
	const k = "job/_latest"
	legal := NewHistory(k)
	legal.Add(1, ev("put-if-absent", k, 1, true, `"1"`, "", "a", nil))
	legal.Add(2, ev("put-if-match", k, 2, true, `"2"`, `"1"`, "b", ErrLostResponse)) // applied, the caller does not know
	legal.Add(3, ev("stat", k, 3, false, `"2"`, "", "", nil))
	legal.Add(4, ev("get", k, 4, false, `"2"`, "", "b", nil))
	if ok, checked := legal.Check(10 * time.Second); !ok || !checked {
		t.Errorf("a legal history: ok %v, checked %v", ok, checked)
	}

	stale := NewHistory(k)
	stale.Add(1, ev("put-if-absent", k, 1, true, `"1"`, "", "a", nil))
	stale.Add(2, ev("put-if-match", k, 2, true, `"2"`, `"1"`, "b", nil))
	stale.Add(3, ev("get", k, 3, false, `"1"`, "", "a", nil)) // reads the value before the acknowledged write
	if ok, checked := stale.Check(10 * time.Second); ok || !checked {
		t.Errorf("a stale read: ok %v, checked %v; want a failed check", ok, checked)
	}
}
