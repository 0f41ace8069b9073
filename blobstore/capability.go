package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Optional capabilities.
//
// Some stores can do more than the methods of Blobstore. Each such
// capability is an interface of its own, below; a store implements it or
// not, and a caller finds it with As, which looks through any chain of
// decorators. Every decorator in this module implements Unwrapper, so that
// wrapping a store never hides what the store underneath can do. A
// decorator that changes keys (WithPrefix) implements the key-scoped
// capabilities itself, translating the keys, instead of letting As reach
// past it: otherwise a caller would act on keys outside its prefix.
//
// The conformance suite (blobstoretest.RunDecorator) checks that a
// decorator forwards every capability listed here.

// Unwrapper is implemented by a decorator: Unwrap returns the store it
// wraps.
type Unwrapper interface {
	Unwrap() Blobstore
}

// Prober is implemented by a store whose conditional writes are enforced
// by a remote endpoint that might silently ignore them (s3store). Probe
// checks that they are enforced: it returns an error wrapping
// ErrConditionsIgnored when the endpoint accepted a write that should have
// failed, and another error when it could not tell. Stores that enforce
// their conditions locally (filestore, memstore) do not implement it.
type Prober interface {
	Probe(ctx context.Context) error
}

// ProbeReporter is implemented by a Prober that also reports what else it
// found out about the endpoint. ProbeReport runs the same checks as
// Probe, with the same errors, and on success says what the endpoint
// enforces beyond what Tidemark requires.
type ProbeReporter interface {
	ProbeReport(ctx context.Context) (ProbeReport, error)
}

// ProbeReport is what a probe found out about an endpoint. Conditional
// writes on PutObject and CompleteMultipartUpload, alone and racing, are
// required: a report exists only when they hold. The rest is reported,
// not required.
type ProbeReport struct {
	// RaceRounds and RaceWriters say how hard the racing checks pushed:
	// rounds of RaceWriters concurrent conditional writes of one key,
	// once for creates (If-None-Match: *) and once for compare-and-swaps
	// (If-Match), each round with exactly one winner.
	RaceRounds, RaceWriters int
	// ConditionalDelete is whether DeleteObject honours If-Match.
	ConditionalDelete Support
	// Checksums says, by algorithm ("CRC32C", "CRC64NVME"), whether the
	// endpoint verifies an upload's x-amz-checksum-* header.
	Checksums map[string]Support
	// KeysKeepBackslash is whether a key with '\' is stored under that
	// key. SeaweedFS by default stores it as '/', so that two valid keys
	// name one object.
	KeysKeepBackslash bool
}

// Support is how an endpoint treats an optional request feature.
type Support string

// Values of Support.
const (
	// Enforced: the endpoint refuses a request whose condition or
	// checksum does not hold, and accepts one whose does.
	Enforced Support = "enforced"
	// Ignored: the endpoint accepts the feature and does not check it.
	Ignored Support = "ignored"
	// Rejected: the endpoint refuses requests that carry the feature.
	Rejected Support = "rejected"
)

// UploadAborter is implemented by a store that can leave incomplete
// uploads behind after a crash (s3store's multipart uploads).
// AbortIncompleteUploads aborts those started under prefix more than
// olderThan ago and returns how many it aborted.
type UploadAborter interface {
	AbortIncompleteUploads(ctx context.Context, prefix string, olderThan time.Duration) (int, error)
}

// ConditionalDeleter is implemented by a store that can delete an object
// only while it still has a given ETag (S3's DeleteObject with If-Match).
// DeleteIfMatch fails with ErrPreconditionFailed when the object has
// another ETag and with ErrNotFound when it is absent. A decorator that
// cannot reach such a store returns an error wrapping errors.ErrUnsupported.
// GC uses it so that an object rewritten after it was planned is kept.
type ConditionalDeleter interface {
	DeleteIfMatch(ctx context.Context, key, etag string) error
}

// InfoGetter is implemented by a store that returns an object's info with
// its body, from one request (s3store's GetObject response, filestore's
// open file). GetWithInfo is Get that also returns the Size, ETag and
// ModTime of the version it reads. A missing key is ErrNotFound.
//
// Unlike the other capabilities, every decorator implements it itself: a
// read must pass through each decorator (decryption, counting, prefix).
// Call the function GetWithInfo, which falls back to Stat and Get.
type InfoGetter interface {
	GetWithInfo(ctx context.Context, key string) (io.ReadCloser, ObjectInfo, error)
}

// GetWithInfo opens the object at key and returns its info. On an
// InfoGetter that is one request, and the info is the version read.
// Otherwise Stat comes before Get: the ETag is of the version read or an
// older one, so a compare-and-swap based on it fails, never acts on
// stale content. The caller closes the reader.
func GetWithInfo(ctx context.Context, bs Blobstore, key string) (io.ReadCloser, ObjectInfo, error) {
	if g, ok := bs.(InfoGetter); ok {
		return g.GetWithInfo(ctx, key)
	}
	info, err := bs.Stat(ctx, key)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	rc, err := bs.Get(ctx, key)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	return rc, info, nil
}

// ErrConditionsIgnored is wrapped by the error of a Prober whose endpoint
// accepts conditional-write headers but does not enforce them.
var ErrConditionsIgnored = errors.New("blobstore: endpoint ignores conditional writes")

// ErrSSENotApplied is wrapped by the error of a Prober configured to ask
// for server-side encryption whose endpoint accepts the request and does
// not say it applied it (versitygw's posix backend stores the object
// unencrypted and answers 200): every object would be stored in the
// clear while the configuration says otherwise.
var ErrSSENotApplied = errors.New("blobstore: endpoint does not apply the server-side encryption requested")

// As returns the capability T of bs: bs itself if it implements T,
// otherwise the first store down its chain of decorators (Unwrapper) that
// does. ok is false when none does.
func As[T any](bs Blobstore) (capability T, ok bool) {
	for bs != nil {
		if c, ok := bs.(T); ok {
			return c, true
		}
		u, ok := bs.(Unwrapper)
		if !ok {
			break
		}
		bs = u.Unwrap()
	}
	return capability, false
}

// CheckConditionalWrites checks, before anything relies on them, that bs
// enforces conditional writes: fencing, pointers and commits are all
// compare-and-swap or create-if-absent writes, and an endpoint that
// accepts the headers but ignores them would let a cut-off writer
// overwrite its successor's pointers without anyone noticing.
//
// It runs the Prober found through bs's decorators and reports whether
// there was one: false with a nil error means the store's conditions are
// enforced locally. An endpoint that ignores the conditions is an error
// wrapping ErrConditionsIgnored; a probe that could not finish is an error
// saying so, wrapping the probe's error.
func CheckConditionalWrites(ctx context.Context, bs Blobstore) (probed bool, err error) {
	_, probed, err = ReportConditionalWrites(ctx, bs)
	return probed, err
}

// ReportConditionalWrites is CheckConditionalWrites that also returns what
// the probe reported, when the store's Prober is a ProbeReporter; report
// is nil otherwise, and whenever err is not nil.
func ReportConditionalWrites(ctx context.Context, bs Blobstore) (report *ProbeReport, probed bool, err error) {
	p, ok := As[Prober](bs)
	if !ok {
		return nil, false, nil
	}
	if r, ok := p.(ProbeReporter); ok {
		var rep ProbeReport
		rep, err = r.ProbeReport(ctx)
		report = &rep
	} else {
		err = p.Probe(ctx)
	}
	switch {
	case err == nil:
		return report, true, nil
	case errors.Is(err, ErrConditionsIgnored):
		return nil, true, fmt.Errorf("this endpoint does not enforce conditional writes (If-None-Match/If-Match); Tidemark's fencing would be unsafe on it: %w", err)
	case errors.Is(err, ErrSSENotApplied):
		return nil, true, fmt.Errorf("this endpoint does not apply the server-side encryption configured; objects would be stored unencrypted: %w", err)
	default:
		return nil, true, fmt.Errorf("could not check that the endpoint enforces conditional writes: %w", err)
	}
}
