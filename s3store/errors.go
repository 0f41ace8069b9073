package s3store

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/tidemark-io/tidemark/blobstore"
)

// Sentinel errors for configuration problems, wrapped with the bucket and
// endpoint so the message says what to fix. They never contain a secret.
var (
	// ErrBucketNotFound is returned when the bucket does not exist.
	ErrBucketNotFound = errors.New("s3store: bucket not found")
	// ErrAccessDenied is returned for wrong or missing credentials or a
	// policy that denies the request (403, InvalidAccessKeyId,
	// SignatureDoesNotMatch).
	ErrAccessDenied = errors.New("s3store: access denied")
	// ErrUnreachable is returned when no connection to the endpoint could
	// be made.
	ErrUnreachable = errors.New("s3store: endpoint unreachable")
	// ErrNotTLS is returned when an https endpoint answers in plain
	// HTTP: a wrong URL, not an outage, so it is never retried.
	ErrNotTLS = errors.New("s3store: the endpoint does not speak TLS")
	// ErrConditionsIgnored is returned by Probe when the endpoint accepts
	// a conditional write whose condition does not hold. It is
	// blobstore.ErrConditionsIgnored, which store-independent callers
	// test for.
	ErrConditionsIgnored = blobstore.ErrConditionsIgnored
)

// errCodes extracts the S3 error code and HTTP status from an SDK error.
func errCodes(err error) (code string, status int) {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	return code, status
}

// holds reports whether target itself (not an error that merely says
// errors.Is target) is in err's chain.
func holds(err, target error) bool {
	for err != nil {
		if err == target {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if holds(e, target) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

// isNetTimeout reports whether err is a network timeout: a dial, TLS
// handshake, response header or idle timeout of the HTTP client.
func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isNotTLS reports whether err is a TLS handshake answered by a server
// that is not speaking TLS (most often plain HTTP on that port).
func isNotTLS(err error) bool {
	var rh tls.RecordHeaderError
	// net/http turns the record header error of an HTTP answer into an
	// unexported error of its own: only its text identifies it.
	return errors.As(err, &rh) || strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")
}

// noRetryNotTLS stops the retryer from retrying a TLS handshake that met
// plain HTTP: every attempt would fail alike until the operation timeout.
type noRetryNotTLS struct{}

func (noRetryNotTLS) IsErrorRetryable(err error) aws.Ternary {
	if isNotTLS(err) {
		return aws.FalseTernary
	}
	return aws.UnknownTernary
}

// isPrecondition reports whether err says a condition did not hold. 304
// counts: MinIO once answered a failed If-None-Match with it (#19442).
func isPrecondition(err error) bool {
	code, status := errCodes(err)
	return status == 412 || status == 304 || code == "PreconditionFailed"
}

// invalidNameCodes are the error codes with which S3 and S3-compatible
// servers refuse an object name or prefix.
var invalidNameCodes = map[string]bool{
	"KeyTooLongError":           true, // S3, MinIO: over 1024 bytes
	"KeyTooLong":                true,
	"InvalidObjectName":         true,
	"XMinioInvalidObjectName":   true, // MinIO: characters it cannot store
	"XMinioInvalidResourceName": true, // MinIO: dot segments, also with '\' and spaces
	"ObjectNameTooLong":         true,
}

// isInvalidName reports whether err is a server's refusal of an object
// name. InvalidArgument, which S3 returns for many bad arguments, counts
// only when its message is about the key or name.
func isInvalidName(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	if invalidNameCodes[ae.ErrorCode()] {
		return true
	}
	if ae.ErrorCode() == "InvalidArgument" {
		msg := strings.ToLower(ae.ErrorMessage())
		return strings.Contains(msg, "object name") || strings.Contains(msg, "key")
	}
	return false
}

// wrap turns an SDK error from operation op on key into one that wraps a
// blobstore or s3store sentinel where one applies, prefixed with
// "s3store: op key:". conditional says op carried If-Match/If-None-Match,
// so 412 and 304 mean the condition failed.
func (s *Store) wrap(op, key string, err error, conditional bool) error {
	if err == nil {
		return nil
	}
	if cerr := s.noCredentials(op, key, err); cerr != nil {
		return cerr
	}
	var se *smithyhttp.RequestSendError
	var oe *net.OpError
	dialFailed := errors.As(err, &se) && errors.As(err, &oe) && oe.Op == "dial"
	switch {
	case errors.Is(err, ErrTimeout) && dialFailed:
		// Refused or unroutable until the operation timeout: unreachable
		// is the more useful answer, and the error is ErrTimeout too.
		return fmt.Errorf("s3store: %s %q: %w: %s (bucket %q): %w", op, key, ErrUnreachable, s.endpoint, s.bucket, err)
	case errors.Is(err, ErrTimeout):
		return fmt.Errorf("s3store: %s %q: %s (bucket %q): %w", op, key, s.endpoint, s.bucket, err)
	case isNotTLS(err):
		return fmt.Errorf("s3store: %s %q: %w: %s (bucket %q) answers plain HTTP; use http:// in the endpoint, or the port that serves TLS: %w",
			op, key, ErrNotTLS, s.endpoint, s.bucket, err)
	case holds(err, context.Canceled) || holds(err, context.DeadlineExceeded):
		// The caller's context, not one of ours.
		return fmt.Errorf("s3store: %s %q: %w", op, key, err)
	case isNetTimeout(err) || errors.As(err, &se) && errors.Is(err, net.ErrClosed):
		// A request whose connection our own client closed under it: the
		// caller's context is ruled out above, so the response header
		// timeout fired while the body was still being flushed (net/http
		// then reports the write error, not the timeout).
		// The attempt or idle timeout, on the last attempt. (net/http's
		// timeout errors also say errors.Is context.DeadlineExceeded,
		// which is why the case above looks for the value itself.)
		return fmt.Errorf("s3store: %s %q: %w: %s (bucket %q): %w", op, key, ErrTimeout, s.endpoint, s.bucket, err)
	}
	code, status := errCodes(err)
	switch {
	case code == "NoSuchBucket":
		return fmt.Errorf("s3store: %s %q: %w: bucket %q at %s: %w", op, key, ErrBucketNotFound, s.bucket, s.endpoint, err)
	case code == "NoSuchKey" || code == "NotFound" || status == 404 && code != "NoSuchUpload":
		return fmt.Errorf("s3store: %s %q: %w", op, key, blobstore.ErrNotFound)
	case isInvalidName(err):
		// The key rules (blobstore.ValidateKey) are meant to refuse every
		// key a server refuses; should a server refuse more, the caller
		// still learns that the key is the problem.
		return fmt.Errorf("s3store: %s %q: %w: the server refused the name: %w", op, key, blobstore.ErrInvalidKey, err)
	case conditional && isPrecondition(err):
		return fmt.Errorf("s3store: %s %q: %w", op, key, blobstore.ErrPreconditionFailed)
	case code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" || code == "AccessDenied" ||
		code == "InvalidToken" || code == "ExpiredToken" || status == 403:
		return fmt.Errorf("s3store: %s %q: %w to bucket %q at %s (check credentials and policy): %w",
			op, key, ErrAccessDenied, s.bucket, s.endpoint, err)
	}
	if dialFailed {
		return fmt.Errorf("s3store: %s %q: %w: %s (bucket %q): %w", op, key, ErrUnreachable, s.endpoint, s.bucket, err)
	}
	return fmt.Errorf("s3store: %s %q: %w", op, key, err)
}
