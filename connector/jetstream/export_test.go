package jetstream

import (
	"context"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark-io/tidemark/job"
)

// CommitPartly commits only txn's first n chunks, as a commit that
// crashed in the middle would have.
func CommitPartly(ctx context.Context, s *Sink, txn job.Txn, n int) error {
	return s.commit(ctx, txn, n)
}

// RecordOf decodes a message of the output stream.
func RecordOf(t interface{ Fatal(...any) }, m natsjs.Msg) job.Record {
	r, err := recordOf(m.Headers(), m.Data())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// StallPartition stops partition p's consumer without the source knowing,
// as a consumer that silently stopped delivering would.
func StallPartition(s *Source, p int) {
	s.mu.Lock()
	cc := s.consume[p]
	s.mu.Unlock()
	if cc != nil {
		cc.Stop()
	}
}

// Retry is retry, for test helpers that read through a cluster in transition.
func Retry(ctx context.Context, f func(context.Context) error) error { return retry(ctx, f) }
