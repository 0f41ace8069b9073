package s3store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
)

// cancelledCleanupTimeout bounds the cleanup of a probe whose context was
// cancelled.
const cancelledCleanupTimeout = 2 * time.Second

// Probe checks that the endpoint enforces conditional writes, which
// fencing and pointer moves rely on: some S3-compatible servers accept
// If-None-Match and If-Match and ignore them. Under a random key below
// "_tidemark_probe/" it checks that
//
//   - PutIfAbsent creates the key, and a second PutIfAbsent fails;
//   - PutIfMatch with a wrong ETag fails, and with the right one succeeds;
//   - PutIfMatch on a missing key fails (MinIO once created it, #21526);
//
// and deletes what it wrote. An endpoint that lets a write through that
// should have failed is ErrConditionsIgnored; any other failure (access,
// missing bucket) is returned as it is. Probe tests single-part writes
// only; conditions on CompleteMultipartUpload are covered by this
// package's tests against MinIO.
func (s *Store) Probe(ctx context.Context) (err error) {
	base := "_tidemark_probe/" + newWriteID()
	key, missing := base+"/object", base+"/missing"
	defer func() {
		// Clean up even if ctx is done, but briefly then: a caller that
		// was interrupted (Ctrl-C) must not wait for a dead endpoint. A
		// failure here only leaves a few bytes under _tidemark_probe/, so
		// it does not override the probe's answer.
		budget := abortTimeout
		if ctx.Err() != nil {
			budget = cancelledCleanupTimeout
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
		defer cancel()
		_ = s.Delete(cctx, key)
		_ = s.Delete(cctx, missing)
	}()
	ignored := func(what string) error {
		return fmt.Errorf("%w: %s: %s succeeded", ErrConditionsIgnored, s.describe(), what)
	}
	etag, err := s.PutIfAbsent(ctx, key, strings.NewReader("probe 1"))
	if err != nil {
		return fmt.Errorf("s3store: probe %s: %w", s.describe(), err)
	}
	switch _, err := s.PutIfAbsent(ctx, key, strings.NewReader("probe 2")); {
	case err == nil:
		return ignored("If-None-Match: * on an existing object")
	case !errors.Is(err, blobstore.ErrPreconditionFailed):
		return fmt.Errorf("s3store: probe %s: %w", s.describe(), err)
	}
	switch _, err := s.PutIfMatch(ctx, key, "00000000000000000000000000000000", strings.NewReader("probe 3")); {
	case err == nil:
		return ignored("If-Match with a wrong ETag")
	case !errors.Is(err, blobstore.ErrPreconditionFailed):
		return fmt.Errorf("s3store: probe %s: %w", s.describe(), err)
	}
	if _, err := s.PutIfMatch(ctx, key, etag, strings.NewReader("probe 4")); err != nil {
		return fmt.Errorf("s3store: probe %s: If-Match with the current ETag: %w", s.describe(), err)
	}
	switch _, err := s.PutIfMatch(ctx, missing, etag, strings.NewReader("probe 5")); {
	case err == nil:
		return ignored("If-Match on a missing object")
	case !errors.Is(err, blobstore.ErrPreconditionFailed) && !errors.Is(err, blobstore.ErrNotFound):
		return fmt.Errorf("s3store: probe %s: %w", s.describe(), err)
	}
	return nil
}
