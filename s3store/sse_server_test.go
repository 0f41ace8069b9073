package s3store

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/integration/miniotest"
)

// sseVerdict says what a server did with a PutObject asking for sse (and
// kmsID): refused it, or stored it and reported which encryption on a
// HEAD ("" when it reports none: accepted and silently not applied, or
// applied and not said, which a client cannot tell apart).
func sseVerdict(t *testing.T, s *Store, key string, sse types.ServerSideEncryption, kmsID string) (reported types.ServerSideEncryption, refused error) {
	t.Helper()
	okey, _ := s.objectKey(key)
	in := &s3.PutObjectInput{Bucket: &s.bucket, Key: &okey, Body: bytes.NewReader([]byte("sse")), ContentLength: aws.Int64(3), ServerSideEncryption: sse}
	if kmsID != "" {
		in.SSEKMSKeyId = &kmsID
	}
	if _, err := s.client.PutObject(t.Context(), in); err != nil {
		return "", err
	}
	out, err := s.client.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: &s.bucket, Key: &okey})
	if err != nil {
		t.Fatal(err)
	}
	return out.ServerSideEncryption, nil
}

// sseOnServers is what each server of the harness, as the harness starts
// it (no KMS), does with a PutObject asking for SSE-S3 or SSE-KMS: the
// SSE column of docs/servers.md.
var sseOnServers = map[string]string{
	"minio":     "refused", // 501 NotImplemented: no KMS configured
	"versitygw": "ignored", // 200, and HEAD reports no encryption
	"seaweedfs": "refused", // 500 InternalError: no KMS configured
}

// TestServerSideEncryptionOnEveryServer checks, on each server of the
// harness, what it does with SSE-S3 and SSE-KMS requests (sseOnServers,
// the table in docs/servers.md), and what Tidemark then does: a server
// that refuses them fails every write, the probe's first; a server that
// accepts them and does not say on HEAD that it applied them (versitygw)
// is refused by the probe with blobstore.ErrSSENotApplied, naming the
// setting, before anything relies on it. The SSE tests proper, on MinIO
// with its built-in KMS, are in integration/encryption_test.go.
func TestServerSideEncryptionOnEveryServer(t *testing.T) {
	for _, srv := range checksumServers {
		t.Run(srv.name, func(t *testing.T) {
			server := srv.start(t)
			s := newStore(t, server, nil)
			for _, c := range []struct {
				name  string
				sse   types.ServerSideEncryption
				kmsID string
			}{
				{"SSE-S3", types.ServerSideEncryptionAes256, ""},
				{"SSE-KMS", types.ServerSideEncryptionAwsKms, miniotest.KMSKeyName},
			} {
				reported, refused := sseVerdict(t, s, "sse-"+strings.ToLower(c.name), c.sse, c.kmsID)
				verdict, got := fmt.Sprintf("stored, HEAD reports %q", reported), "applied"
				switch {
				case refused != nil:
					verdict, got = "refused: "+verdictOf(refused), "refused"
				case reported != c.sse:
					got = "ignored"
				}
				t.Logf("%s %s (no KMS configured): %s", srv.name, c.name, verdict)
				if want := sseOnServers[srv.name]; got != want {
					t.Errorf("%s %s: %s (%s); docs/servers.md says %s: update the table", srv.name, c.name, got, verdict, want)
				}
				withSSE := newStore(t, server, func(o *Options) { o.SSE, o.SSEKMSKeyID = string(c.sse), c.kmsID })
				err := withSSE.Probe(t.Context())
				t.Logf("%s %s: probe of a store with sse=%s: %v", srv.name, c.name, c.sse, err)
				switch got {
				case "ignored":
					if !errors.Is(err, blobstore.ErrSSENotApplied) || !strings.Contains(err.Error(), string(c.sse)) {
						t.Errorf("%s ignores %s and the probe says %v; want blobstore.ErrSSENotApplied naming %s", srv.name, c.name, err, c.sse)
					}
				case "refused":
					if err == nil {
						t.Errorf("%s refuses %s and the probe passes", srv.name, c.name)
					}
				default:
					if err != nil {
						t.Errorf("%s applies %s and the probe fails: %v", srv.name, c.name, err)
					}
				}
			}
		})
	}
}

// TestProbeAcceptsSSEWhereItApplies: on MinIO with its built-in KMS, the
// probe of a store asking for SSE-S3 or SSE-KMS passes (its HEAD reports
// the encryption asked for), so the SSE check refuses only the servers
// that ignore the header.
func TestProbeAcceptsSSEWhereItApplies(t *testing.T) {
	srv := miniotest.StartWithKMS(t)
	for _, c := range []struct{ sse, kmsID string }{{"AES256", ""}, {"aws:kms", miniotest.KMSKeyName}} {
		s := newStore(t, srv, func(o *Options) { o.SSE, o.SSEKMSKeyID = c.sse, c.kmsID })
		if err := s.Probe(t.Context()); err != nil {
			t.Errorf("probe with sse=%s on MinIO with a KMS: %v", c.sse, err)
		}
	}
}

func verdictOf(err error) string {
	code, status := errCodes(err)
	return fmt.Sprintf("%d %s", status, code)
}
