package s3store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/tidemark-io/tidemark/blobstore"
)

// Part sizes. S3 (and MinIO) refuse non-final multipart parts under 5 MiB
// and uploads of more than 10,000 parts, so with the default part size
// one object can hold at most 160 GiB; raise PartSize for more.
const (
	// DefaultPartSize is the part size when Options.PartSize is zero.
	DefaultPartSize = 16 << 20
	// MinPartSize is the smallest part size S3 accepts for a non-final part.
	MinPartSize = 5 << 20
	// MaxPartSize is the largest part size S3 accepts.
	MaxPartSize = 5 << 30
	// MaxParts is the largest number of parts in one multipart upload.
	MaxParts = 10000
	// DefaultConcurrency is the number of parallel part transfers per
	// upload or download when Options.Concurrency is zero.
	DefaultConcurrency = 4
	// DefaultMaxAttempts is the number of attempts per request (the first
	// one included) when Options.MaxAttempts is zero. With the default
	// backoff they span about 8 s of failures on average (16 s at most)
	// before a request gives up; see Options.MaxAttempts to ride through
	// longer outages.
	DefaultMaxAttempts = 10
)

// Options configure a Store. The zero value of every field but Bucket is
// useful.
type Options struct {
	// Bucket is the bucket name. Required.
	Bucket string
	// Prefix, if not empty, is prepended with a '/' to every key, so
	// several jobs can share a bucket. It must be a valid key (a trailing
	// '/' is dropped).
	Prefix string
	// Region is the bucket's region. Empty means the region from the AWS
	// chain (AWS_REGION, the shared config), or "us-east-1" when Endpoint
	// is set (S3-compatible stores mostly ignore it).
	Region string
	// Endpoint is the base URL of an S3-compatible store, for example
	// "http://127.0.0.1:9000". Empty means AWS S3.
	Endpoint string
	// PathStyle addresses buckets as endpoint/bucket rather than
	// bucket.endpoint, as MinIO and most S3-compatible stores need.
	PathStyle bool
	// PartSize is the multipart part size and the size of the buffers an
	// upload or parallel download holds; DefaultPartSize if zero. It must
	// be between MinPartSize and MaxPartSize.
	PartSize int64
	// Concurrency is the number of parts transferred in parallel per
	// upload or download; DefaultConcurrency if zero. An upload holds at
	// most PartSize × (Concurrency+1) bytes of buffers, GetParallel
	// PartSize × Concurrency, Download none.
	Concurrency int
	// SSE is the server-side encryption to request: "" (the bucket's
	// default), "AES256" or "aws:kms".
	SSE string
	// SSEKMSKeyID is the KMS key for SSE "aws:kms"; empty means the
	// account's default key.
	SSEKMSKeyID string
	// ChecksumWhenRequired makes the client compute request checksums and
	// validate response checksums only for operations that require them.
	// By default every upload carries a CRC32C the server verifies and
	// every whole-object read checks it (checksum.go); some S3-compatible
	// stores reject checksums: set this for those. AWS S3, MinIO and
	// versitygw accept the default.
	ChecksumWhenRequired bool
	// UnsignedPayload, for a plain-HTTP endpoint, signs requests without
	// the SHA-256 of their body (UNSIGNED-PAYLOAD, what the SDK does over
	// HTTPS anyway). The body is still checked against corruption by the
	// CRC32C the server verifies, but no longer against tampering on the
	// way: use it on a network you trust. It saves hashing every uploaded
	// byte a second time (docs/integrity.md has the CPU figures). It
	// needs checksums: New refuses it with ChecksumWhenRequired.
	UnsignedPayload bool
	// AccessKey and SecretKey, if set, are static credentials (with an
	// optional SessionToken). Otherwise the standard AWS chain is used.
	AccessKey    string
	SecretKey    string
	SessionToken string
	// MaxAttempts is the number of attempts per request, the first one
	// included; DefaultMaxAttempts if zero. Negative means no limit: a
	// failing request is retried until OperationTimeout, which is how a
	// caller rides through an outage of a known length (MaxAttempts -1,
	// OperationTimeout 45 s rides through 30 s of a dead endpoint).
	// Retries back off exponentially with full jitter up to MaxBackoff,
	// with no client-side retry token bucket (see the package
	// documentation).
	MaxAttempts int
	// MaxBackoff is the longest wait between two attempts of a request;
	// DefaultMaxBackoff (5 s) if zero.
	MaxBackoff time.Duration
	// AttemptTimeout bounds connecting and, once a request is sent, the
	// wait for its response headers, per attempt; DefaultAttemptTimeout
	// (10 s) if zero, none if negative. Uploading a body does not count.
	AttemptTimeout time.Duration
	// IdleTimeout fails an attempt whose request or response body moves
	// no byte for this long; DefaultIdleTimeout (30 s) if zero, none if
	// negative. A slow transfer that keeps moving is never cut.
	IdleTimeout time.Duration
	// OperationTimeout bounds one request with all its attempts and the
	// backoff between them, until its response headers arrive, plus one
	// second per MiB of request body; DefaultOperationTimeout (1 min) if
	// zero, none if negative. It is per request (one UploadPart, one
	// HEAD), not per Put of a large object.
	OperationTimeout time.Duration
	// Logger receives the AWS SDK's own log lines (warnings such as a
	// fallback to IMDSv1), Warn at slog.LevelWarn. Nil discards them: a
	// library must not write to the terminal, and every failure that
	// matters reaches the caller as an error anyway.
	Logger *slog.Logger
	// HTTPClient, if set, sends every request (tests use it to inject
	// faults); otherwise the SDK's default client with AttemptTimeout and
	// IdleTimeout installed. It brings its own TLS configuration and
	// timeouts: AWS_CA_BUNDLE, AttemptTimeout and IdleTimeout do not
	// apply to it (OperationTimeout does).
	HTTPClient *http.Client
}

// Store is a blobstore.Blobstore on one S3 bucket (and optional prefix).
// It is safe for concurrent use.
type Store struct {
	client   *s3.Client
	bucket   string
	prefix   string // "" or ends with '/'
	endpoint string // for error messages
	partSize int64
	conc     int
	sse      types.ServerSideEncryption
	kmsKey   string
	// checksums: every upload carries a CRC32C of the whole object that
	// the server verifies (checksum.go); off with ChecksumWhenRequired.
	checksums bool
	timeouts  timeouts
	bufs      *bufCache // part buffers between operations (buffers.go)
	// signsPayload: the endpoint is plain HTTP, where the SDK signs the
	// SHA-256 of every request body (payloadhash.go).
	signsPayload bool

	// failedAborts are multipart uploads of this Store whose abort failed
	// (the server was unreachable). AbortIncompleteUploads retries them by
	// key and upload id first, since listing cannot be relied on to find
	// them on every S3-compatible store (see uploads.go).
	abortMu      sync.Mutex
	failedAborts []pendingUpload
}

// pendingUpload names a multipart upload: store key, upload id and the
// write id its record is named by.
type pendingUpload struct{ key, id, writeID string }

var (
	_ blobstore.Blobstore     = (*Store)(nil)
	_ blobstore.Prober        = (*Store)(nil)
	_ blobstore.ProbeReporter = (*Store)(nil)
	_ blobstore.UploadAborter = (*Store)(nil)
)

// New returns a Store for opts. It loads credentials and region from the
// AWS chain but sends no request; use Probe to check the endpoint.
func New(ctx context.Context, opts Options) (*Store, error) {
	if opts.Bucket == "" {
		return nil, errors.New("s3store: no bucket")
	}
	s := &Store{
		bucket:    opts.Bucket,
		endpoint:  opts.Endpoint,
		partSize:  opts.PartSize,
		conc:      opts.Concurrency,
		kmsKey:    opts.SSEKMSKeyID,
		checksums: !opts.ChecksumWhenRequired,
	}
	s.signsPayload = signsPayloads(opts.Endpoint) && !opts.UnsignedPayload
	if opts.UnsignedPayload && opts.ChecksumWhenRequired {
		return nil, errors.New("s3store: unsigned payload needs checksums: with checksum when_required nothing would check a request body")
	}
	if p := strings.TrimSuffix(opts.Prefix, "/"); p != "" {
		if err := blobstore.ValidateKey(p); err != nil {
			return nil, fmt.Errorf("s3store: prefix: %w", err)
		}
		s.prefix = p + "/"
	}
	if s.partSize == 0 {
		s.partSize = DefaultPartSize
	}
	if s.partSize < MinPartSize || s.partSize > MaxPartSize {
		return nil, fmt.Errorf("s3store: part size %d outside [%d, %d] (S3's multipart limits)", s.partSize, MinPartSize, MaxPartSize)
	}
	if s.conc == 0 {
		s.conc = DefaultConcurrency
	}
	if s.conc < 0 {
		return nil, fmt.Errorf("s3store: concurrency %d < 0", s.conc)
	}
	switch opts.SSE {
	case "", "AES256", "aws:kms":
		s.sse = types.ServerSideEncryption(opts.SSE)
	default:
		return nil, fmt.Errorf("s3store: sse %q: want \"\", \"AES256\" or \"aws:kms\"", opts.SSE)
	}
	if opts.SSEKMSKeyID != "" && opts.SSE != "aws:kms" {
		return nil, errors.New("s3store: sse_kms_key_id needs sse aws:kms")
	}
	maxAttempts := opts.MaxAttempts
	switch {
	case maxAttempts == 0:
		maxAttempts = DefaultMaxAttempts
	case maxAttempts < 0:
		maxAttempts = math.MaxInt32 // until OperationTimeout
	}
	if opts.MaxBackoff < 0 {
		return nil, fmt.Errorf("s3store: max backoff %v < 0", opts.MaxBackoff)
	}
	maxBackoff := resolveDuration(opts.MaxBackoff, DefaultMaxBackoff)
	s.timeouts = timeouts{
		attempt:   resolveDuration(opts.AttemptTimeout, DefaultAttemptTimeout),
		idle:      resolveDuration(opts.IdleTimeout, DefaultIdleTimeout),
		operation: resolveDuration(opts.OperationTimeout, DefaultOperationTimeout),
	}
	if opts.MaxAttempts < 0 && s.timeouts.operation == 0 {
		return nil, errors.New("s3store: unlimited attempts (max attempts < 0) need an operation timeout")
	}
	if s.endpoint == "" {
		s.endpoint = "AWS S3"
	}
	// The cache keeps what one upload uses, so back-to-back uploads reuse
	// their buffers.
	s.bufs = newBufCache(s.partSize, s.conc+1)

	load := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer {
			return &loggedRetryer{log: opts.Logger, endpoint: s.endpoint, operation: s.timeouts.operation, RetryerV2: retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = maxAttempts
				o.MaxBackoff = maxBackoff
				// No client-side retry token bucket: the default one
				// drains under sustained throttling and the client then
				// stops retrying at all (FLINK-40387). Backoff with jitter
				// is what spreads the load.
				o.RateLimiter = ratelimit.None
				// First: the first retryable with an answer decides, and
				// the SDK's own would call a TLS mismatch a connection
				// error worth retrying.
				o.Retryables = append([]retry.IsErrorRetryable{noRetryNotTLS{}}, o.Retryables...)
				o.Retryables = append(o.Retryables, retryConditionalConflict{})
			})}
		}),
		// The SDK logs to stderr by default ("SDK <date> WARN ...").
		config.WithLogger(sdkLogger(opts.Logger)),
	}
	if opts.Region != "" {
		load = append(load, config.WithRegion(opts.Region))
	}
	if opts.AccessKey != "" || opts.SecretKey != "" {
		load = append(load, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(opts.AccessKey, opts.SecretKey, opts.SessionToken)))
	}
	if opts.ChecksumWhenRequired {
		load = append(load,
			config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
			config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("s3store: load AWS config for bucket %q: %w", opts.Bucket, err)
	}
	if cfg.Region == "" {
		if opts.Endpoint == "" {
			return nil, fmt.Errorf("s3store: bucket %q: no region: add ?region= to the store URL or set AWS_REGION (or a region in the AWS profile; from Go, Options.Region)", opts.Bucket)
		}
		cfg.Region = "us-east-1"
	}
	if cfg.Credentials != nil {
		cfg.Credentials = markCredentials{cfg.Credentials}
	}
	s.client = s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = opts.PathStyle
		if opts.HTTPClient != nil {
			// Set here, not with config.WithHTTPClient, which refuses a
			// plain *http.Client when AWS_CA_BUNDLE is set; a custom
			// client brings its own TLS configuration.
			o.HTTPClient = opts.HTTPClient
		} else {
			// cfg's client carries AWS_CA_BUNDLE, if set.
			base, _ := o.HTTPClient.(*awshttp.BuildableClient)
			o.HTTPClient = withTimeouts(base, s.timeouts)
		}
		o.APIOptions = append(o.APIOptions, addTimeoutMiddleware(s.timeouts.operation))
		if opts.UnsignedPayload {
			o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
		}
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
		}
		// Ranged and multipart GETs carry no whole-object checksum to
		// validate; the SDK would log that it skipped validation on each.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	return s, nil
}

// Client returns the underlying S3 client, for operations this package
// does not cover.
func (s *Store) Client() *s3.Client { return s.client }

// Bucket returns the bucket name.
func (s *Store) Bucket() string { return s.bucket }

// retryConditionalConflict retries 409 ConditionalRequestConflict, which
// S3 returns while another conditional write to the same key is in flight;
// a later attempt gets a definite answer (success or 412).
type retryConditionalConflict struct{}

func (retryConditionalConflict) IsErrorRetryable(err error) aws.Ternary {
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "ConditionalRequestConflict" {
		return aws.TrueTernary
	}
	return aws.UnknownTernary
}

// objectKey validates key and returns the bucket key for it.
func (s *Store) objectKey(key string) (string, error) {
	if err := blobstore.ValidateKey(key); err != nil {
		return "", err
	}
	full := s.prefix + key
	if len(full) > blobstore.MaxKeyLen {
		return "", fmt.Errorf("%w: %q is %d bytes with prefix %q, over the %d-byte limit",
			blobstore.ErrInvalidKey, key, len(full), s.prefix, blobstore.MaxKeyLen)
	}
	return full, nil
}

// ETags are kept without the quotes S3 puts around them, so the same
// object has the same ETag whichever response it came from; quote adds
// them back for If-Match.
func unquote(etag *string) string { return strings.Trim(aws.ToString(etag), `"`) }

func quote(etag string) string { return `"` + strings.Trim(etag, `"`) + `"` }
