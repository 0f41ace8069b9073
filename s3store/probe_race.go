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
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tidemark-io/tidemark/blobstore"
)

// The racing checks' size: rounds of concurrent writers of one key, for
// creates and again for compare-and-swaps. Probe runs at every Acquire,
// so it is small; a server that races loses most rounds, not one in ten.
const (
	probeRaceRounds  = 3
	probeRaceWriters = 4
)

// probeKeys are the keys a probe wrote, for its cleanup.
type probeKeys struct {
	mu   sync.Mutex
	keys []string
}

func (p *probeKeys) add(keys ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = append(p.keys, keys...)
}

func (p *probeKeys) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.keys...)
}

// deleteAll deletes keys, a few at a time, ignoring failures: a probe's
// cleanup only leaves a few bytes behind when it fails.
func (s *Store) deleteAll(ctx context.Context, keys []string) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, probeRaceWriters)
	for _, k := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_ = s.Delete(ctx, k)
		})
	}
	wg.Wait()
}

// raceResult is the outcome of one racing write.
type raceResult struct {
	etag string
	err  error
}

// race runs write(0..n-1) concurrently, released together so that the
// requests are in flight at once, and returns their results.
func race(n int, write func(i int) (string, error)) []raceResult {
	res := make([]raceResult, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			res[i].etag, res[i].err = write(i)
		})
	}
	close(start)
	wg.Wait()
	return res
}

// lostRace reports whether err is a racing conditional write that lost:
// its condition failed (412), or the server refused it for conflicting
// with a write in flight (AWS answers 409 ConditionalRequestConflict).
func lostRace(err error) bool {
	if errors.Is(err, blobstore.ErrPreconditionFailed) {
		return true
	}
	code, status := errCodes(err)
	return code == "ConditionalRequestConflict" || status == 409
}

// probeRaces checks that racing conditional writes of one key have
// exactly one winner, for rounds of writers concurrent PutIfAbsent of a
// fresh key and then of writers concurrent PutIfMatch of one key with
// the same ETag; the key must then hold the winner's bytes.
func (s *Store) probeRaces(ctx context.Context, base string, rounds, writers int, written *probeKeys) error {
	const creates = "racing If-None-Match: * creates"
	for r := range rounds {
		key := fmt.Sprintf("%s/race-create-%d", base, r)
		written.add(key)
		bodies := raceBodies("create", r, writers)
		res := race(writers, func(i int) (string, error) {
			return s.PutIfAbsent(ctx, key, strings.NewReader(bodies[i]))
		})
		if _, err := s.judgeRace(ctx, creates, r, rounds, key, bodies, res); err != nil {
			return err
		}
	}

	const swaps = "racing If-Match compare-and-swaps"
	key := base + "/race-swap"
	written.add(key)
	etag, err := s.PutIfAbsent(ctx, key, strings.NewReader("swap start"))
	if err != nil {
		return fmt.Errorf("s3store: probe %s: %s: %w", s.describe(), swaps, err)
	}
	for r := range rounds {
		bodies := raceBodies("swap", r, writers)
		res := race(writers, func(i int) (string, error) {
			return s.PutIfMatch(ctx, key, etag, strings.NewReader(bodies[i]))
		})
		if etag, err = s.judgeRace(ctx, swaps, r, rounds, key, bodies, res); err != nil {
			return err
		}
	}
	return nil
}

// raceBodies are the distinct contents of one round's writers, so that
// what the key holds names the writer that won.
func raceBodies(kind string, round, writers int) []string {
	b := make([]string, writers)
	for i := range b {
		b[i] = fmt.Sprintf("probe %s round %d writer %d", kind, round, i)
	}
	return b
}

// judgeRace checks one round's results: one winner, every other writer
// refused, and the key holding the winner's bytes. It returns the
// winner's ETag.
func (s *Store) judgeRace(ctx context.Context, what string, round, rounds int, key string, bodies []string, res []raceResult) (string, error) {
	var won []int
	for i, r := range res {
		switch {
		case r.err == nil:
			won = append(won, i)
		case !lostRace(r.err):
			return "", fmt.Errorf("s3store: probe %s: %s, round %d: writer %d: %w", s.describe(), what, round+1, i, r.err)
		}
	}
	switch {
	case len(won) > 1:
		return "", fmt.Errorf("%w: %s: %s of one key: %d of %d concurrent writers succeeded in round %d of %d (at most one may)",
			ErrConditionsIgnored, s.describe(), what, len(won), len(res), round+1, rounds)
	case len(won) == 0:
		return "", fmt.Errorf("s3store: probe %s: %s: none of %d concurrent writers of one key succeeded in round %d (one must)",
			s.describe(), what, len(res), round+1)
	}
	w := won[0]
	rc, err := s.Get(ctx, key)
	if err != nil {
		return "", fmt.Errorf("s3store: probe %s: %s: %w", s.describe(), what, err)
	}
	got, err := io.ReadAll(io.LimitReader(rc, 1<<10))
	rc.Close()
	if err != nil {
		return "", fmt.Errorf("s3store: probe %s: %s: read %q: %w", s.describe(), what, key, err)
	}
	if string(got) != bodies[w] {
		return "", fmt.Errorf("%w: %s: %s of one key: writer %d of %d was told it won round %d of %d, but the key holds %q",
			ErrConditionsIgnored, s.describe(), what, w, len(res), round+1, rounds, got)
	}
	return res[w].etag, nil
}

// rejectsFeature reports whether err is the endpoint refusing a request
// for a header it does not support, rather than failing to answer.
func rejectsFeature(err error) bool {
	code, status := errCodes(err)
	return status == 400 || status == 501 || code == "NotImplemented" || code == "InvalidArgument" || code == "InvalidRequest"
}

// probeConditionalDelete reports whether DeleteObject honours If-Match:
// a wrong ETag must be refused with 412 and the right one delete.
func (s *Store) probeConditionalDelete(ctx context.Context, key string, written *probeKeys) (blobstore.Support, error) {
	written.add(key)
	etag, err := s.PutIfAbsent(ctx, key, strings.NewReader("probe delete"))
	if err != nil {
		return "", err
	}
	okey, err := s.objectKey(key)
	if err != nil {
		return "", err
	}
	del := func(etag string) error {
		_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &okey, IfMatch: aws.String(quote(etag))})
		return err
	}
	switch err := del("00000000000000000000000000000000"); {
	case err == nil:
		return blobstore.Ignored, nil
	case rejectsFeature(err):
		return blobstore.Rejected, nil
	case !isPrecondition(err):
		return "", s.wrap("delete-if-match", key, err, true)
	}
	switch err := del(etag); {
	case err == nil:
	case isPrecondition(err) || rejectsFeature(err):
		return blobstore.Rejected, nil // refused whatever the ETag
	default:
		return "", s.wrap("delete-if-match", key, err, true)
	}
	switch ok, err := s.Exists(ctx, key); {
	case err != nil:
		return "", err
	case ok:
		return blobstore.Rejected, nil // answered success, deleted nothing
	}
	return blobstore.Enforced, nil
}

// probeChecksums reports, for CRC32C and CRC64NVME, whether an upload's
// checksum header is verified: the right value must be accepted and a
// wrong one refused.
func (s *Store) probeChecksums(ctx context.Context, base string, written *probeKeys) (map[string]blobstore.Support, error) {
	body := []byte("probe checksum")
	algs := []struct {
		name  string
		sum   []byte
		apply func(in *s3.PutObjectInput, b64 string)
	}{
		{"CRC32C", binary.BigEndian.AppendUint32(nil, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli))),
			func(in *s3.PutObjectInput, b64 string) { in.ChecksumCRC32C = &b64 }},
		{"CRC64NVME", binary.BigEndian.AppendUint64(nil, crc64.Checksum(body, crc64NVME)),
			func(in *s3.PutObjectInput, b64 string) { in.ChecksumCRC64NVME = &b64 }},
	}
	out := make(map[string]blobstore.Support, len(algs))
	for _, a := range algs {
		key := base + "-" + strings.ToLower(a.name)
		written.add(key)
		okey, err := s.objectKey(key)
		if err != nil {
			return nil, err
		}
		put := func(sum []byte) error {
			in := &s3.PutObjectInput{
				Bucket: &s.bucket, Key: &okey,
				Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
			}
			s.setSSE(&in.ServerSideEncryption, &in.SSEKMSKeyId)
			a.apply(in, base64.StdEncoding.EncodeToString(sum))
			_, err := s.client.PutObject(ctx, in)
			return err
		}
		switch err := put(a.sum); {
		case err == nil:
		case rejectsFeature(err):
			out[a.name] = blobstore.Rejected
			continue
		default:
			return nil, s.wrap("put-checksum-"+strings.ToLower(a.name), key, err, false)
		}
		wrong := append([]byte(nil), a.sum...)
		wrong[0] ^= 0xff
		switch err := put(wrong); {
		case err == nil:
			out[a.name] = blobstore.Ignored
		case rejectsFeature(err):
			out[a.name] = blobstore.Enforced // BadDigest and kin are 400s
		default:
			return nil, s.wrap("put-checksum-"+strings.ToLower(a.name), key, err, false)
		}
	}
	return out, nil
}

// probeBackslash reports whether a key with '\' is stored as given:
// after a PUT of base/back\slash, base/back/slash must not exist.
func (s *Store) probeBackslash(ctx context.Context, base string, written *probeKeys) (bool, error) {
	key, alias := base+`/back\slash`, base+"/back/slash"
	written.add(key, alias)
	if err := s.Put(ctx, key, strings.NewReader("probe backslash")); err != nil {
		return false, err
	}
	aliased, err := s.Exists(ctx, alias)
	return !aliased, err
}

// crc64NVME is the CRC-64/NVME table (the reflected polynomial
// 0xad93d23594c93659), which S3 names CRC64NVME.
var crc64NVME = crc64.MakeTable(0x9a6c9329ac4bc9b5)
