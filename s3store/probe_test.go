package s3store

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/tidemark-io/tidemark/integration/miniotest"
)

func TestProbeSucceedsOnMinIOAndCleansUp(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, miniotest.Shared(t), nil)
	if err := s.Probe(ctx); err != nil {
		t.Fatal(err)
	}
	for info, err := range s.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("probe left %q behind", info.Key)
	}
}

func TestProbeDetectsAnEndpointThatIgnoresConditions(t *testing.T) {
	// Removing the conditional headers before the request is signed makes
	// MinIO behave as a server that ignores them.
	ctx := context.Background()
	s := newStore(t, miniotest.Shared(t), nil)
	strip := middleware.BuildMiddlewareFunc("stripConditions", func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
		if req, ok := in.Request.(*smithyhttp.Request); ok {
			req.Header.Del("If-Match")
			req.Header.Del("If-None-Match")
		}
		return next.HandleBuild(ctx, in)
	})
	s.client = s3.New(s.client.Options(), func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Build.Add(strip, middleware.After)
		})
	})
	err := s.Probe(ctx)
	if !errors.Is(err, ErrConditionsIgnored) {
		t.Fatalf("got %v, want ErrConditionsIgnored", err)
	}
	t.Logf("probe: %v", err)
}
