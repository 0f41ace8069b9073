package s3store

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

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

// OptionsFromURL parses an s3://bucket/prefix?param=value URL (see the
// package documentation for the parameters) into Options. Credentials
// are refused: they come from the AWS chain.
func OptionsFromURL(u *url.URL) (Options, error) {
	var o Options
	fail := func(format string, args ...any) (Options, error) {
		// u.Redacted hides a password, should someone have put one in.
		return Options{}, fmt.Errorf("%w %s: %w", blobstore.ErrInvalidURL, u.Redacted(), fmt.Errorf(format, args...))
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
			o.Region = v
		case "endpoint":
			o.Endpoint = v
		case "path_style":
			o.PathStyle, err = strconv.ParseBool(v)
		case "part_size":
			o.PartSize, err = parseSize(v)
		case "concurrency":
			o.Concurrency, err = strconv.Atoi(v)
		case "max_attempts":
			o.MaxAttempts, err = strconv.Atoi(v)
		case "max_backoff":
			o.MaxBackoff, err = parseDuration(v)
		case "attempt_timeout":
			o.AttemptTimeout, err = parseDuration(v)
		case "idle_timeout":
			o.IdleTimeout, err = parseDuration(v)
		case "operation_timeout":
			o.OperationTimeout, err = parseDuration(v)
		case "sse":
			o.SSE = v
		case "sse_kms_key_id":
			o.SSEKMSKeyID = v
		case "checksum":
			switch v {
			case "when_supported":
			case "when_required":
				o.ChecksumWhenRequired = true
			default:
				err = fmt.Errorf("want when_supported or when_required")
			}
		default:
			return fail("unknown parameter %q", name)
		}
		if err != nil {
			return fail("parameter %s=%q: %v", name, v, err)
		}
	}
	return o, nil
}

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

// parseDuration parses a Go duration ("500ms", "30s", "2m"); "none"
// turns the timeout off (a negative duration in Options).
func parseDuration(v string) (time.Duration, error) {
	if v == "none" {
		return -1, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("want a duration like 500ms, 30s or 2m, or none")
	}
	return d, nil
}
