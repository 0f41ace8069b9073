package s3store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/tidemark-io/tidemark/blobstore"
)

// Scheme is the URL scheme s3store registers with blobstore.Open.
const Scheme = "s3"

func init() {
	blobstore.Register(Scheme, func(ctx context.Context, u *url.URL) (blobstore.Blobstore, error) {
		opts, err := OptionsFromURL(u)
		if err != nil {
			return nil, err
		}
		opts.Logger = blobstore.LoggerFromContext(ctx) // nil: discard
		return New(ctx, opts)
	})
}

// OptionsFromURL parses an s3://bucket/prefix?param=value URL (docs/s3.md
// lists the parameters) into Options. Credentials
// are refused: they come from the AWS chain.
func OptionsFromURL(u *url.URL) (Options, error) {
	var o Options
	fail := func(format string, args ...any) (Options, error) {
		// redacted hides a password, should someone have put one in.
		return Options{}, fmt.Errorf("%w %s: %w", blobstore.ErrInvalidURL, redacted(u), fmt.Errorf(format, args...))
	}
	if u.Scheme != Scheme {
		return fail("scheme %q, want %q", u.Scheme, Scheme)
	}
	if u.User != nil {
		return fail("credentials in the URL are refused; use AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a profile")
	}
	if u.Host == "" {
		return fail("no bucket (want s3://bucket/prefix)")
	}
	if u.Port() != "" || strings.Contains(u.Host, ":") {
		return fail("bucket %q has a port; the endpoint goes in ?endpoint=http://host:port", u.Host)
	}
	if err := ValidateBucket(u.Host); err != nil {
		return fail("%v", err)
	}
	if u.Fragment != "" || u.RawFragment != "" {
		return fail("s3 URLs take no fragment (#%s)", u.EscapedFragment())
	}
	o.Bucket = u.Host
	o.Prefix = strings.Trim(u.Path, "/")
	for name, vals := range u.Query() {
		if len(vals) != 1 {
			return fail("parameter %s given %d times", name, len(vals))
		}
		v := vals[0]
		var err error
		switch name {
		case "region":
			o.Region, err = parseRegion(v)
		case "endpoint":
			o.Endpoint, err = parseEndpoint(v)
			if e, perr := url.Parse(v); perr == nil && e.User != nil {
				v = e.Redacted() // the message must not show the password
			}
		case "path_style":
			o.PathStyle, err = parseBool(v)
		case "unsigned_payload":
			o.UnsignedPayload, err = parseBool(v)
		case "part_size":
			o.PartSize, err = parsePartSize(v)
		case "concurrency":
			o.Concurrency, err = parseConcurrency(v)
		case "max_attempts":
			o.MaxAttempts, err = parseMaxAttempts(v)
		case "max_backoff":
			o.MaxBackoff, err = parseBackoff(v)
		case "attempt_timeout":
			o.AttemptTimeout, err = parseTimeout(v)
		case "idle_timeout":
			o.IdleTimeout, err = parseTimeout(v)
		case "operation_timeout":
			o.OperationTimeout, err = parseTimeout(v)
		case "sse":
			o.SSE, err = parseSSE(v)
		case "sse_kms_key_id":
			o.SSEKMSKeyID = v
			if v == "" {
				err = errors.New("want a KMS key id or ARN (leave the parameter out for the account's default key)")
			}
		case "checksum":
			switch v {
			case "when_supported":
			case "when_required":
				o.ChecksumWhenRequired = true
			default:
				err = fmt.Errorf("want when_supported or when_required")
			}
		default:
			return fail("unknown parameter %q (s3 URLs take %s)", name, strings.Join(urlParams, ", "))
		}
		if err != nil {
			return fail("parameter %s=%q: %v", name, v, err)
		}
	}
	// Combinations New would refuse.
	if o.SSEKMSKeyID != "" && o.SSE != "aws:kms" {
		return fail("parameter sse_kms_key_id needs sse=aws:kms")
	}
	if o.MaxAttempts < 0 && o.OperationTimeout < 0 {
		return fail("max_attempts=-1 needs an operation_timeout (a duration, not none)")
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		if err := blobstore.ValidateKey(p); err != nil {
			return fail("prefix: %v", err)
		}
	}
	return o, nil
}

// ValidateBucket reports whether name follows S3's bucket naming rules,
// which MinIO enforces too: 3 to 63 characters of lowercase letters,
// digits, '.' and '-', starting and ending with a letter or digit, no two
// dots in a row, and not an IP address. OptionsFromURL applies it, so a
// URL naming a bucket no server can have fails when it is opened
// (blobstore.ErrInvalidURL) instead of at the first request. New does not:
// Options.Bucket is passed as is, for the legacy us-east-1 buckets whose
// names predate these rules.
func ValidateBucket(name string) error {
	bad := func(why string) error {
		return fmt.Errorf("bucket %q: %s (S3 bucket names are 3-63 characters of a-z, 0-9, '.' and '-', starting and ending with a letter or digit)", name, why)
	}
	switch {
	case len(name) < 3:
		return bad("too short")
	case len(name) > 63:
		return bad(fmt.Sprintf("%d characters, too long", len(name)))
	}
	for _, c := range name {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-') {
			if 'A' <= c && c <= 'Z' {
				return bad("uppercase letters")
			}
			return bad(fmt.Sprintf("the character %q", c))
		}
	}
	switch {
	case !isAlnum(name[0]) || !isAlnum(name[len(name)-1]):
		return bad("starts or ends with '.' or '-'")
	case strings.Contains(name, ".."):
		return bad("two dots in a row")
	case net.ParseIP(name) != nil:
		return bad("an IP address")
	}
	return nil
}

func isAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

// parseSize parses a byte count with an optional KiB, MiB or GiB suffix.
func parseSize(v string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mult = n, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("want a byte count like 16777216 or 16MiB")
	}
	return n * mult, nil
}

// urlParams are the parameters OptionsFromURL takes.
var urlParams = []string{"region", "endpoint", "path_style", "part_size", "concurrency", "sse", "sse_kms_key_id",
	"checksum", "unsigned_payload", "max_attempts", "max_backoff", "attempt_timeout", "idle_timeout", "operation_timeout"}

// redacted returns u as a string with the password of its user
// information, and of its endpoint parameter's, replaced by "xxxxx".
func redacted(u *url.URL) string {
	q := u.Query()
	e, err := url.Parse(q.Get("endpoint"))
	if err != nil || e.User == nil {
		return u.Redacted()
	}
	if _, has := e.User.Password(); has {
		e.User = url.UserPassword(e.User.Username(), "xxxxx")
	}
	q.Set("endpoint", e.String())
	c := *u
	c.RawQuery = q.Encode()
	return c.Redacted()
}
