package sim

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/tidemark-io/tidemark/blobstore"
)

// regInput is one call on a register (a pointer key) as the client made it.
type regInput struct {
	key, op string
	match   string // put-if-match: the ETag required
	etag    string // writes: the ETag the write gets if it applies
	body    string
}

// regOutput is what the client heard back.
type regOutput struct {
	unknown  bool // an error that does not say whether the call applied
	ok       bool
	notFound bool
	precond  bool
	etag     string // stat and get: the ETag seen
	body     string // get: the bytes read
}

// regState is a register: an object or none.
type regState struct {
	exists     bool
	etag, body string
}

// History collects the calls on some keys, for the linearizability check.
type History struct {
	keys map[string]bool
	mu   sync.Mutex
	ops  []porcupine.Operation
}

// NewHistory returns a history of the calls on keys.
func NewHistory(keys ...string) *History {
	h := &History{keys: map[string]bool{}}
	for _, k := range keys {
		h.keys[k] = true
	}
	return h
}

// Add records ev if it is on one of the keys. done is the step at which
// the caller heard back.
func (h *History) Add(done int, ev Event) {
	if !h.keys[ev.Key] {
		return
	}
	in := regInput{key: ev.Key, op: ev.Op, match: ev.Match, etag: ev.ETag}
	switch ev.Op {
	case "put", "put-if-absent", "put-if-match":
		in.body = string(ev.Body)
		if !ev.Applied {
			in.etag = ""
		}
	case "get", "stat", "delete":
	default:
		return // ranges and the scheduler's own
	}
	var out regOutput
	switch {
	case ev.Err == nil:
		out.ok = true
		if ev.Op == "get" || ev.Op == "stat" {
			out.etag = ev.ETag
			out.body = string(ev.Body)
		}
	case errors.Is(ev.Err, blobstore.ErrNotFound):
		out.notFound = true
	case errors.Is(ev.Err, blobstore.ErrPreconditionFailed):
		out.precond = true
	default:
		out.unknown = true
	}
	if ev.Op == "get" && out.ok && ev.Body == nil {
		out.body = "\x00unknown" // too large to keep: never a pointer
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	op := porcupine.Operation{ClientId: 0, Input: in, Output: out, Call: int64(ev.Fault.Step) * 2, Return: int64(done)*2 + 1}
	if out.unknown {
		// The caller cannot tell whether or when it applied.
		op.Return = math.MaxInt64
	}
	h.ops = append(h.ops, op)
}

// Len returns how many calls the history holds.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

var registerModel = porcupine.NondeterministicModel{
	Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range ops {
			k := op.Input.(regInput).key
			if _, ok := byKey[k]; !ok {
				order = append(order, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		var parts [][]porcupine.Operation
		for _, k := range order {
			parts = append(parts, byKey[k])
		}
		return parts
	},
	Init: func() []any { return []any{regState{}} },
	Step: func(state, input, output any) []any {
		st, in, out := state.(regState), input.(regInput), output.(regOutput)
		written := regState{exists: true, etag: in.etag, body: in.body}
		switch in.op {
		case "stat", "get":
			switch {
			case out.unknown:
				return []any{st}
			case out.notFound:
				if st.exists {
					return nil
				}
				return []any{st}
			case !st.exists || st.etag != out.etag:
				return nil
			case in.op == "get" && out.body != "\x00unknown" && st.body != out.body:
				return nil
			}
			return []any{st}
		case "put":
			if out.unknown {
				return []any{st, written}
			}
			return []any{written}
		case "put-if-absent", "put-if-match":
			holds := !st.exists
			if in.op == "put-if-match" {
				holds = st.exists && st.etag == in.match
			}
			switch {
			case out.unknown:
				if holds && in.etag != "" {
					return []any{st, written}
				}
				return []any{st}
			case out.ok:
				if !holds {
					return nil
				}
				return []any{written}
			case out.precond:
				if holds {
					return nil
				}
				return []any{st}
			}
			return nil
		case "delete":
			if out.unknown {
				return []any{st, regState{}}
			}
			return []any{regState{}}
		}
		return nil
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		return fmt.Sprintf("%s %s match=%s etag=%s → %+v", in.op, in.key, in.match, in.etag, out)
	},
}

// Check reports whether the history is linearizable, as registers. It
// gives up (ok, with checked false) after timeout.
func (h *History) Check(timeout time.Duration) (ok, checked bool) {
	h.mu.Lock()
	ops := h.ops
	h.mu.Unlock()
	res := porcupine.CheckOperationsTimeout(registerModel.ToModel(), ops, timeout)
	switch res {
	case porcupine.Ok:
		return true, true
	case porcupine.Illegal:
		return false, true
	}
	return true, false
}
