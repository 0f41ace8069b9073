// Package jobtest holds helpers for tests that run job nodes in the
// background and read what a BlobSink committed. Only tests import it.
package jobtest

import (
	"context"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/job"
)

// WaitLimit is how long Wait lets a node take before the test fails.
const WaitLimit = 3 * time.Minute

// Node is a coordinator or worker running in the background.
type Node struct {
	cancel context.CancelFunc
	done   chan struct{}
	res    job.Result
	err    error
}

// Go runs f in the background with a context that Cancel or the test's end cancels.
func Go(t testing.TB, f func(context.Context) (job.Result, error)) *Node {
	ctx, cancel := context.WithCancel(t.Context())
	n := &Node{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(n.done)
		n.res, n.err = f(ctx)
	}()
	return n
}

// Cancel cancels the node's context: the node stops as if killed.
func (n *Node) Cancel() { n.cancel() }

// Wait returns what the node returned, failing the test after WaitLimit.
func (n *Node) Wait(t testing.TB) (job.Result, error) {
	t.Helper()
	select {
	case <-n.done:
	case <-time.After(WaitLimit):
		t.Fatal("a node did not return")
	}
	return n.res, n.err
}

// BlobOutput reads the records that s has committed, in order.
func BlobOutput(t testing.TB, s *job.BlobSink) []job.Record {
	t.Helper()
	var out []job.Record
	for rec, err := range s.Output(t.Context()) {
		if err != nil {
			t.Fatalf("output: %v", err)
		}
		out = append(out, rec)
	}
	return out
}
