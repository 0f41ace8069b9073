package s3store

import (
	"context"
	"errors"
	"testing"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/tidemark-io/tidemark/integration/miniotest"
)

// probeServers are the servers the probe must pass on: MinIO, versitygw
// and SeaweedFS, all enforcing conditions on PutObject and
// CompleteMultipartUpload, alone and racing. Each is started by the
// subtest that uses it, so that -run can pick one.
var probeServers = map[string]func(testing.TB) *miniotest.Server{
	"minio":     miniotest.Shared,
	"versitygw": miniotest.SharedVersity,
	"seaweedfs": miniotest.SharedSeaweedFS,
}

func TestProbeSucceedsAndCleansUp(t *testing.T) {
	for name, server := range probeServers {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			s := newStore(t, server(t), nil)
			if err := s.Probe(ctx); err != nil {
				t.Fatal(err)
			}
			for info, err := range s.List(ctx, "") {
				if err != nil {
					t.Fatal(err)
				}
				t.Errorf("probe left %q behind", info.Key)
			}
			assertNoUploads(t, s, "")
		})
	}
}

// stripConditions returns s with a client that removes the named
// conditional headers from the requests of the given operations (all
// operations when ops is empty) before they are signed: MinIO then
// behaves as a server that ignores those conditions there.
func stripConditions(s *Store, headers []string, ops ...string) {
	strip := middleware.BuildMiddlewareFunc("stripConditions", func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
		match := len(ops) == 0
		for _, op := range ops {
			match = match || awsmiddleware.GetOperationName(ctx) == op
		}
		if req, ok := in.Request.(*smithyhttp.Request); ok && match {
			for _, h := range headers {
				req.Header.Del(h)
			}
		}
		return next.HandleBuild(ctx, in)
	})
	s.client = s3.New(s.client.Options(), func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Build.Add(strip, middleware.After)
		})
	})
}

func TestProbeDetectsAnEndpointThatIgnoresConditions(t *testing.T) {
	s := newStore(t, miniotest.Shared(t), nil)
	stripConditions(s, []string{"If-Match", "If-None-Match"})
	err := s.Probe(t.Context())
	if !errors.Is(err, ErrConditionsIgnored) {
		t.Fatalf("got %v, want ErrConditionsIgnored", err)
	}
	t.Logf("probe: %v", err)
}

// TestProbeDetectsAnEndpointThatIgnoresConditionsOnCompleteOnly: a server
// that enforces conditions on PutObject but not on
// CompleteMultipartUpload would let every large conditional write
// through; the probe must catch it, for either header, and leave nothing
// behind (no object, no pending upload).
func TestProbeDetectsAnEndpointThatIgnoresConditionsOnCompleteOnly(t *testing.T) {
	for _, header := range []string{"If-None-Match", "If-Match"} {
		t.Run(header, func(t *testing.T) {
			ctx := t.Context()
			s := newStore(t, miniotest.Shared(t), nil)
			stripConditions(s, []string{header}, "CompleteMultipartUpload")
			err := s.Probe(ctx)
			if !errors.Is(err, ErrConditionsIgnored) {
				t.Fatalf("got %v, want ErrConditionsIgnored", err)
			}
			t.Logf("probe: %v", err)
			for info, err := range s.List(ctx, "") {
				if err != nil {
					t.Fatal(err)
				}
				t.Errorf("probe left %q behind", info.Key)
			}
			assertNoUploads(t, s, "")
		})
	}
}
