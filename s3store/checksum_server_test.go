package s3store

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/crc64"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/integration/miniotest"
)

// checksumServers are the servers the checksum tests run on: the three
// of the harness (docs/servers.md). Each is started by the subtest that
// uses it, so that -run can pick one.
var checksumServers = []struct {
	name  string
	start func(testing.TB) *miniotest.Server
}{
	{"minio", miniotest.Shared},
	{"versitygw", miniotest.SharedVersity},
	{"seaweedfs", miniotest.SharedSeaweedFS},
}

// headChecksum returns the CRC32C and checksum type the server reports for
// key (HEAD with checksum mode enabled).
func headChecksum(t *testing.T, s *Store, key string) (crc string, typ types.ChecksumType) {
	t.Helper()
	okey, _ := s.objectKey(key)
	out, err := s.client.HeadObject(t.Context(), &s3.HeadObjectInput{
		Bucket: &s.bucket, Key: &okey, ChecksumMode: types.ChecksumModeEnabled,
	})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.ChecksumCRC32C), out.ChecksumType
}

// TestUploadsCarryAFullObjectChecksum checks that a single-part and a
// multipart Put leave an object whose CRC32C, as the server reports it, is
// the CRC32C of the whole content: the server received and kept the
// checksum Put computed, so it verified it.
func TestUploadsCarryAFullObjectChecksum(t *testing.T) {
	for _, srv := range checksumServers {
		t.Run(srv.name, func(t *testing.T) {
			s := newStore(t, srv.start(t), nil)
			for _, size := range []int{0, 100 << 10, 2*testPartSize + 12345} {
				data := randomBytes(size, uint64(size))
				key := "k" + strconv.Itoa(size)
				if err := s.Put(t.Context(), key, stream(data)); err != nil {
					t.Fatalf("put %d bytes: %v", size, err)
				}
				crc, typ := headChecksum(t, s, key)
				want := aws.ToString(crc32cBase64(crc32.Checksum(data, castagnoli)))
				if crc != want {
					t.Errorf("%d bytes: server's CRC32C %q, want %q (of the whole object)", size, crc, want)
				}
				if typ != "" && typ != types.ChecksumTypeFullObject {
					t.Errorf("%d bytes: checksum type %q, want FULL_OBJECT", size, typ)
				}
				if got := readAll(t, s, key); !bytes.Equal(got, data) {
					t.Errorf("%d bytes: read back %d bytes that differ", size, len(got))
				}
			}
		})
	}
}

// TestUploadsWithoutChecksumsWhenRequired checks the setting for servers
// that reject checksums: no upload then carries one.
func TestUploadsWithoutChecksumsWhenRequired(t *testing.T) {
	for _, srv := range checksumServers {
		t.Run(srv.name, func(t *testing.T) {
			s := newStore(t, srv.start(t), func(o *Options) { o.ChecksumWhenRequired = true })
			for _, size := range []int{100 << 10, 2*testPartSize + 1} {
				key := "k" + strconv.Itoa(size)
				if err := s.Put(t.Context(), key, stream(randomBytes(size, 1))); err != nil {
					t.Fatal(err)
				}
				if crc, _ := headChecksum(t, s, key); crc != "" {
					t.Errorf("%d bytes: CRC32C %q stored with checksum=when_required", size, crc)
				}
			}
		})
	}
}

// TestPlainGetVerifiesAMultipartObject checks the download side: a Get of
// an object uploaded in parts is checked against its full-object CRC32C,
// so a body damaged in transit fails with blobstore.ErrChecksum (a
// composite checksum of parts, as uploads had before, is not checked by
// the SDK at all), also through the resuming reader every read path uses,
// which must not resume past the mismatch and end cleanly.
func TestPlainGetVerifiesAMultipartObject(t *testing.T) {
	for _, srv := range checksumServers {
		t.Run(srv.name, func(t *testing.T) { testPlainGetVerifiesAMultipartObject(t, srv.start(t)) })
	}
}

func testPlainGetVerifiesAMultipartObject(t *testing.T, srv *miniotest.Server) {
	tr := &flipGetBody{base: http.DefaultTransport}
	s := newStore(t, srv, func(o *Options) { o.HTTPClient = &http.Client{Transport: tr} })
	data := randomBytes(2*testPartSize+7, 9)
	if err := s.Put(t.Context(), "k", stream(data)); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, "k"); !bytes.Equal(got, data) {
		t.Fatal("intact read differs")
	}
	tr.mu.Lock()
	tr.flip = true
	tr.mu.Unlock()
	for name, bs := range map[string]blobstore.Blobstore{
		"plain":    s,
		"resuming": blobstore.WithResumingReads(s, blobstore.DefaultReadResumptions),
	} {
		// io.ReadAll reads; io.Copy takes the body's WriteTo (body.go).
		for how, read := range map[string]func(io.Reader) ([]byte, error){
			"read": io.ReadAll,
			"copy": func(r io.Reader) ([]byte, error) {
				var b bytes.Buffer
				_, err := io.Copy(&b, r)
				return b.Bytes(), err
			},
		} {
			rc, err := bs.Get(t.Context(), "k")
			if err != nil {
				t.Fatal(err)
			}
			got, err := read(rc)
			rc.Close()
			if !errors.Is(err, blobstore.ErrChecksum) {
				t.Fatalf("%s Get (%s) of a damaged multipart body: %d bytes (equal %v), err %v; want blobstore.ErrChecksum",
					name, how, len(got), bytes.Equal(got, data), err)
			}
			if !strings.Contains(err.Error(), `"k"`) {
				t.Errorf("%s Get (%s): %v does not name the key", name, how, err)
			}
		}
	}
}

// TestServersRejectWrongChecksums sends wrong checksums straight to each
// server and checks that it refuses them: on PutObject, on UploadPart,
// and a wrong full-object checksum on CompleteMultipartUpload. CRC32C is
// what Tidemark sends and must be verified everywhere; CRC64NVME's
// answers are logged, for the tables in docs/integrity.md and
// docs/servers.md.
func TestServersRejectWrongChecksums(t *testing.T) {
	nvme := crc64.MakeTable(0x9a6c9329ac4bc9b5)
	type algo struct {
		name string
		alg  types.ChecksumAlgorithm
		sum  func([]byte) string
		set  func(put *s3.PutObjectInput, part *s3.UploadPartInput, done *s3.CompleteMultipartUploadInput, v string)
	}
	algos := []algo{
		{"CRC32C", types.ChecksumAlgorithmCrc32c,
			func(b []byte) string { return aws.ToString(crc32cBase64(crc32.Checksum(b, castagnoli))) },
			func(put *s3.PutObjectInput, part *s3.UploadPartInput, done *s3.CompleteMultipartUploadInput, v string) {
				if put != nil {
					put.ChecksumCRC32C = &v
				}
				if part != nil {
					part.ChecksumCRC32C = &v
				}
				if done != nil {
					done.ChecksumCRC32C = &v
				}
			}},
		{"CRC64NVME", types.ChecksumAlgorithmCrc64nvme,
			func(b []byte) string { return crc64Base64(crc64.Checksum(b, nvme)) },
			func(put *s3.PutObjectInput, part *s3.UploadPartInput, done *s3.CompleteMultipartUploadInput, v string) {
				if put != nil {
					put.ChecksumCRC64NVME = &v
				}
				if part != nil {
					part.ChecksumCRC64NVME = &v
				}
				if done != nil {
					done.ChecksumCRC64NVME = &v
				}
			}},
	}
	for _, srv := range checksumServers {
		t.Run(srv.name, func(t *testing.T) {
			s := newStore(t, srv.start(t), nil)
			ctx := t.Context()
			data := randomBytes(MinPartSize, 5)
			wrong := randomBytes(16, 6)
			for _, a := range algos {
				// PutObject with the checksum of other bytes.
				put := &s3.PutObjectInput{Bucket: &s.bucket, Key: aws.String("put-" + a.name), Body: bytes.NewReader(data), ChecksumAlgorithm: a.alg}
				a.set(put, nil, nil, a.sum(wrong))
				_, putErr := s.client.PutObject(ctx, put)
				// UploadPart with a wrong part checksum, then Complete of
				// right parts with a wrong full-object checksum.
				partErr, completeErr := wrongMultipart(ctx, s, a.name, a.alg, data, func(part *s3.UploadPartInput, done *s3.CompleteMultipartUploadInput, right bool) {
					v := a.sum(wrong)
					if right {
						v = a.sum(data)
					}
					a.set(nil, part, done, v)
				})
				t.Logf("%s %s: wrong PutObject checksum: %v; wrong UploadPart checksum: %v; wrong full-object checksum on Complete: %v",
					srv.name, a.name, verdict(putErr), verdict(partErr), verdict(completeErr))
				if a.alg == types.ChecksumAlgorithmCrc32c && (putErr == nil || partErr == nil || completeErr == nil) {
					t.Errorf("%s does not verify CRC32C on every upload: PutObject %v, UploadPart %v, Complete %v",
						srv.name, verdict(putErr), verdict(partErr), verdict(completeErr))
				}
			}
		})
	}
}

// wrongMultipart makes two multipart uploads of FULL_OBJECT type: one
// whose part carries a wrong checksum (set(part, nil, false)), and one of
// right parts whose Complete carries a wrong whole-object checksum. It
// returns the errors of the UploadPart and of the Complete that should
// fail, and aborts what is left.
func wrongMultipart(ctx context.Context, s *Store, name string, alg types.ChecksumAlgorithm, data []byte, set func(*s3.UploadPartInput, *s3.CompleteMultipartUploadInput, bool)) (partErr, completeErr error) {
	upload := func(key string, rightPart bool) (*string, *s3.UploadPartOutput, error) {
		created, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
			Bucket: &s.bucket, Key: &key, ChecksumAlgorithm: alg, ChecksumType: types.ChecksumTypeFullObject,
		})
		if err != nil {
			return nil, nil, err
		}
		part := &s3.UploadPartInput{Bucket: &s.bucket, Key: &key, UploadId: created.UploadId, PartNumber: aws.Int32(1),
			Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))), ChecksumAlgorithm: alg}
		set(part, nil, rightPart)
		out, err := s.client.UploadPart(ctx, part)
		return created.UploadId, out, err
	}
	abort := func(key string, id *string) {
		_, _ = s.client.AbortMultipartUpload(context.Background(), &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: &key, UploadId: id})
	}
	key := "part-" + name
	id, _, partErr := upload(key, false)
	if id != nil {
		abort(key, id)
	}
	key = "complete-" + name
	id, out, err := upload(key, true)
	if err != nil {
		if id != nil {
			abort(key, id)
		}
		return partErr, err
	}
	done := &s3.CompleteMultipartUploadInput{Bucket: &s.bucket, Key: &key, UploadId: id, ChecksumType: types.ChecksumTypeFullObject,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{
			PartNumber: aws.Int32(1), ETag: out.ETag, ChecksumCRC32C: out.ChecksumCRC32C, ChecksumCRC64NVME: out.ChecksumCRC64NVME}}}}
	set(nil, done, false)
	if _, completeErr = s.client.CompleteMultipartUpload(ctx, done); completeErr != nil {
		abort(key, id)
	}
	return partErr, completeErr
}

func crc64Base64(v uint64) string {
	return base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint64(nil, v))
}

func verdict(err error) string {
	if err == nil {
		return "ACCEPTED"
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, "api error "); i >= 0 {
		msg = msg[i+len("api error "):]
	}
	return "refused (" + msg + ")"
}

// flipRanges flips one bit of every ranged GET's body (206) while on.
type flipRanges struct {
	base http.RoundTripper
	mu   sync.Mutex
	on   bool
}

func (f *flipRanges) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := f.base.RoundTrip(req)
	f.mu.Lock()
	on := f.on
	f.mu.Unlock()
	if err != nil || !on || resp.StatusCode != http.StatusPartialContent {
		return resp, err
	}
	body, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	if rerr != nil {
		return nil, rerr
	}
	body[len(body)/3] ^= 4
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// TestRangedDownloadsVerifyTheWholeObject checks GetParallel and Download:
// the ranges' CRC32Cs, folded in order, must give the object's, so a range
// damaged in transit fails with blobstore.ErrChecksum; a caller that
// verifies the content itself (WithContentVerified) gets the bytes.
func TestRangedDownloadsVerifyTheWholeObject(t *testing.T) {
	for _, srv := range checksumServers {
		t.Run(srv.name, func(t *testing.T) { testRangedDownloadsVerifyTheWholeObject(t, srv.start(t)) })
	}
}

func testRangedDownloadsVerifyTheWholeObject(t *testing.T, srv *miniotest.Server) {
	tr := &flipRanges{base: http.DefaultTransport}
	s := newStore(t, srv, func(o *Options) { o.HTTPClient = &http.Client{Transport: tr} })
	data := randomBytes(3*testPartSize+99, 4)
	if err := s.Put(t.Context(), "k", stream(data)); err != nil {
		t.Fatal(err)
	}
	parallel := func(ctx context.Context) ([]byte, error) {
		rc, err := s.GetParallel(ctx, "k")
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		var b bytes.Buffer
		_, err = io.Copy(&b, rc)
		return b.Bytes(), err
	}
	download := func(ctx context.Context) ([]byte, error) {
		w := &memWriterAt{b: make([]byte, len(data))}
		_, err := s.Download(ctx, "k", w)
		return w.b, err
	}
	for name, get := range map[string]func(context.Context) ([]byte, error){"GetParallel": parallel, "Download": download} {
		tr.mu.Lock()
		tr.on = false
		tr.mu.Unlock()
		if got, err := get(t.Context()); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s of an intact object: equal %v, %v", name, bytes.Equal(got, data), err)
		}
		tr.mu.Lock()
		tr.on = true
		tr.mu.Unlock()
		if _, err := get(t.Context()); !errors.Is(err, blobstore.ErrChecksum) {
			t.Errorf("%s of damaged ranges: %v, want blobstore.ErrChecksum", name, err)
		}
		got, err := get(blobstore.WithContentVerified(t.Context()))
		if err != nil || bytes.Equal(got, data) {
			t.Errorf("%s verified by the caller: err %v, equal %v; want the damaged bytes, no error", name, err, bytes.Equal(got, data))
		}
	}
}

type memWriterAt struct {
	mu sync.Mutex
	b  []byte
}

func (m *memWriterAt) WriteAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return copy(m.b[off:], p), nil
}

// payloadHashes records the x-amz-content-sha256 of every PUT.
type payloadHashes struct {
	base   http.RoundTripper
	mu     sync.Mutex
	hashes []string
}

func (p *payloadHashes) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut {
		p.mu.Lock()
		p.hashes = append(p.hashes, req.Header.Get("X-Amz-Content-Sha256"))
		p.mu.Unlock()
	}
	return p.base.RoundTrip(req)
}

// TestUnsignedPayloadHashesNoBody checks Options.UnsignedPayload on every
// server: every PUT (single-part, parts, the upload records) is signed
// as UNSIGNED-PAYLOAD, the server still verifies the CRC32C, and the
// objects read back intact. Without it every PUT carries a body digest.
func TestUnsignedPayloadHashesNoBody(t *testing.T) {
	for _, srv := range checksumServers {
		for _, unsigned := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/unsigned=%v", srv.name, unsigned), func(t *testing.T) {
				rec := &payloadHashes{base: http.DefaultTransport}
				s := newStore(t, srv.start(t), func(o *Options) {
					o.HTTPClient = &http.Client{Transport: rec}
					o.UnsignedPayload = unsigned
				})
				for _, size := range []int{1000, 2*testPartSize + 1} {
					data := randomBytes(size, 3)
					key := "k" + strconv.Itoa(size)
					if err := s.Put(t.Context(), key, stream(data)); err != nil {
						t.Fatal(err)
					}
					if got := readAll(t, s, key); !bytes.Equal(got, data) {
						t.Fatalf("%d bytes read back differ", size)
					}
					if crc, _ := headChecksum(t, s, key); crc != aws.ToString(crc32cBase64(crc32.Checksum(data, castagnoli))) {
						t.Errorf("%d bytes: CRC32C %q stored, not the content's", size, crc)
					}
				}
				rec.mu.Lock()
				defer rec.mu.Unlock()
				if len(rec.hashes) < 5 {
					t.Fatalf("%d PUTs seen, want a single PUT, records and parts", len(rec.hashes))
				}
				for _, h := range rec.hashes {
					if (h == "UNSIGNED-PAYLOAD") != unsigned {
						t.Errorf("a PUT signed with payload hash %q (unsigned payload %v)", h, unsigned)
					}
				}
			})
		}
	}
}
