package sim

import (
	"context"
	"io"
	"iter"

	"github.com/tidemark-io/tidemark/blobstore"
)

type procKey struct{}

// WithProc returns ctx naming the simulated process every store call made
// with it belongs to.
func WithProc(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, procKey{}, name)
}

// ProcName returns the process ctx names, or "".
func ProcName(ctx context.Context) string {
	name, _ := ctx.Value(procKey{}).(string)
	return name
}

type sentKey struct{}

// withSent returns ctx saying its call left the process at scheduler
// step: a link that delays calls (slowLink) sends them at once and they
// reach the store later, so a check of what the process knew when it
// sent a call looks at this step, not at the call's arrival.
func withSent(ctx context.Context, step int) context.Context {
	return context.WithValue(ctx, sentKey{}, step)
}

// sentStep returns the step withSent recorded, or arrived if none.
func sentStep(ctx context.Context, arrived int) int {
	if step, ok := ctx.Value(sentKey{}).(int); ok && step < arrived {
		return step
	}
	return arrived
}

type ungatedKey struct{}

// ungated reports whether ctx's call bypasses the scheduler.
func ungated(ctx context.Context) bool { return ctx.Value(ungatedKey{}) != nil }

// procStore names process proc on every call that comes without one:
// Pebble's own calls in remote mode, which carry no context of the
// process. Pebble makes some holding its locks (Open sizes remote
// objects under the DB's mutex): waiting on the scheduler there would
// block a goroutine of Pebble's on that mutex, not durably, and the
// scheduler's synctest.Wait with it. Such calls bypass the scheduler:
// never faulted, not in the trace, still seen by the checks.
type procStore struct {
	blobstore.Blobstore
	proc string
}

func (s procStore) Unwrap() blobstore.Blobstore { return s.Blobstore }

func (s procStore) ctx(ctx context.Context) context.Context {
	if ProcName(ctx) == "" {
		return context.WithValue(WithProc(ctx, s.proc), ungatedKey{}, true)
	}
	return ctx
}

func (s procStore) Put(ctx context.Context, key string, r io.Reader) error {
	return s.Blobstore.Put(s.ctx(ctx), key, r)
}

func (s procStore) PutIfAbsent(ctx context.Context, key string, r io.Reader) (string, error) {
	return s.Blobstore.PutIfAbsent(s.ctx(ctx), key, r)
}

func (s procStore) PutIfMatch(ctx context.Context, key, etag string, r io.Reader) (string, error) {
	return s.Blobstore.PutIfMatch(s.ctx(ctx), key, etag, r)
}

func (s procStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.Blobstore.Get(s.ctx(ctx), key)
}

func (s procStore) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	return s.Blobstore.GetRange(s.ctx(ctx), key, offset, length)
}

func (s procStore) Stat(ctx context.Context, key string) (blobstore.ObjectInfo, error) {
	return s.Blobstore.Stat(s.ctx(ctx), key)
}

func (s procStore) Exists(ctx context.Context, key string) (bool, error) {
	return s.Blobstore.Exists(s.ctx(ctx), key)
}

func (s procStore) List(ctx context.Context, prefix string) iter.Seq2[blobstore.ObjectInfo, error] {
	return s.Blobstore.List(s.ctx(ctx), prefix)
}

func (s procStore) Delete(ctx context.Context, key string) error {
	return s.Blobstore.Delete(s.ctx(ctx), key)
}
