package s3store

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/integration/miniotest"
)

// flipGetBody records the x-amz-checksum-mode header of every GET and,
// while flip is set, flips one bit of each GET response body: damage in
// transit that only a checksum over the bytes read can see.
type flipGetBody struct {
	base  http.RoundTripper
	mu    sync.Mutex
	modes []string
	flip  bool
}

func (f *flipGetBody) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := f.base.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	f.mu.Lock()
	f.modes = append(f.modes, req.Header.Get("X-Amz-Checksum-Mode"))
	flip := f.flip
	f.mu.Unlock()
	if flip {
		body, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if rerr != nil {
			return nil, rerr
		}
		body[len(body)/2] ^= 1
		resp.Body = io.NopCloser(bytes.NewReader(body))
	}
	return resp, nil
}

func (f *flipGetBody) lastMode() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.modes[len(f.modes)-1]
}

// TestGetSkipsTheSDKChecksumOnlyForContentTheCallerVerifies checks both
// sides of blobstore.WithContentVerified: a plain Get asks for the
// object's checksum and fails on a body damaged in transit; a Get whose
// caller verifies the content (Restore, by SHA-256) asks for none and
// hands over the bytes as received, for the caller's digest to judge.
func TestGetSkipsTheSDKChecksumOnlyForContentTheCallerVerifies(t *testing.T) {
	for _, srv := range checksumServers {
		t.Run(srv.name, func(t *testing.T) { testGetSkipsTheSDKChecksum(t, srv.start(t)) })
	}
}

func testGetSkipsTheSDKChecksum(t *testing.T, srv *miniotest.Server) {
	ctx := context.Background()
	tr := &flipGetBody{base: http.DefaultTransport}
	s := newStore(t, srv, func(o *Options) { o.HTTPClient = &http.Client{Transport: tr} })
	data := randomBytes(64<<10, 3)
	// A single PUT carries a CRC32C of the whole object, which the
	// server keeps and returns to a GET that asks for it.
	if err := s.Put(ctx, "k", bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	get := func(ctx context.Context) ([]byte, error) {
		rc, err := s.Get(ctx, "k")
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}
	verified := blobstore.WithContentVerified(ctx)
	for _, c := range []struct {
		name     string
		ctx      context.Context
		wantMode string
	}{{"plain", ctx, "ENABLED"}, {"verified by the caller", verified, ""}} {
		got, err := get(c.ctx)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s Get: %d bytes, equal %v, err %v", c.name, len(got), bytes.Equal(got, data), err)
		}
		if m := tr.lastMode(); m != c.wantMode {
			t.Errorf("%s Get sent x-amz-checksum-mode %q, want %q", c.name, m, c.wantMode)
		}
	}
	tr.mu.Lock()
	tr.flip = true
	tr.mu.Unlock()
	if got, err := get(ctx); err == nil {
		t.Fatalf("plain Get of a damaged body succeeded (%d bytes, equal %v): the SDK checksum did not run", len(got), bytes.Equal(got, data))
	}
	got, err := get(verified)
	if err != nil {
		t.Fatalf("verified Get of a damaged body: %v, want the bytes as received", err)
	}
	if len(got) != len(data) || bytes.Equal(got, data) {
		t.Fatalf("verified Get returned %d bytes, equal %v: want the damaged bytes", len(got), bytes.Equal(got, data))
	}
}
