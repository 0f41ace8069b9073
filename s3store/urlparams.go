package s3store

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The parsers of the URL parameters. Each refuses, with the values it
// accepts, whatever New would refuse or the SDK would only trip over at
// the first request, so a bad URL fails when it is opened. A value given
// in the URL is meant: the zero values that mean "the default" in
// Options (part_size=0, concurrency=0, max_attempts=0) are refused there.

// parseEndpoint accepts an http or https URL with a host, without user
// information, query or fragment.
func parseEndpoint(v string) (string, error) {
	const want = "want an http:// or https:// URL with a host, like http://127.0.0.1:9000"
	e, err := url.Parse(v)
	if err != nil {
		return "", errors.New(want)
	}
	switch strings.ToLower(e.Scheme) {
	case "http", "https":
	default:
		return "", fmt.Errorf("scheme %q: %s", e.Scheme, want)
	}
	switch {
	case e.Opaque != "" || e.Hostname() == "":
		return "", fmt.Errorf("no host: %s", want)
	case e.User != nil:
		return "", errors.New("credentials in the endpoint are refused; use AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a profile")
	case e.RawQuery != "" || e.Fragment != "" || e.ForceQuery:
		return "", fmt.Errorf("query or fragment: %s", want)
	}
	if p := e.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("port %q: %s", p, want)
		}
	}
	return v, nil
}

// parseRegion accepts a region name: letters, digits and inner hyphens
// (eu-west-1; S3-compatible stores take such names too).
func parseRegion(v string) (string, error) {
	const want = "want a region name like eu-west-1 (letters, digits, hyphens)"
	if v == "" || v[0] == '-' || v[len(v)-1] == '-' || len(v) > 63 {
		return "", errors.New(want)
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return "", errors.New(want)
		}
	}
	return v, nil
}

// parsePartSize accepts a size between MinPartSize and MaxPartSize.
func parsePartSize(v string) (int64, error) {
	const want = "want a size from 5MiB to 5GiB (S3's multipart limits), in bytes or with a KiB, MiB or GiB suffix"
	n, err := parseSize(v)
	if err != nil || n < MinPartSize || n > MaxPartSize {
		return 0, errors.New(want)
	}
	return n, nil
}

// parseConcurrency accepts a positive count.
func parseConcurrency(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("want a positive number of parallel part transfers (default %d)", DefaultConcurrency)
	}
	return n, nil
}

// parseMaxAttempts accepts a positive count, or -1 for no limit.
func parseMaxAttempts(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 && n != -1 {
		return 0, fmt.Errorf("want a positive number of attempts (default %d), or -1 to retry until operation_timeout", DefaultMaxAttempts)
	}
	return n, nil
}

// parseTimeout parses a positive Go duration ("500ms", "30s", "2m");
// "none" turns the timeout off (a negative duration in Options).
func parseTimeout(v string) (time.Duration, error) {
	if v == "none" {
		return -1, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, errors.New("want a positive duration like 500ms, 30s or 2m, or none")
	}
	return d, nil
}

// parseBackoff parses a positive Go duration (no "none": retries always
// back off).
func parseBackoff(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, errors.New("want a positive duration like 500ms, 5s or 1m")
	}
	return d, nil
}

// parseSSE accepts the encryptions New takes.
func parseSSE(v string) (string, error) {
	switch v {
	case "AES256", "aws:kms":
		return v, nil
	}
	return "", errors.New("want AES256 or aws:kms")
}

// parseBool accepts what strconv.ParseBool does, saying so.
func parseBool(v string) (bool, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errors.New("want true or false")
	}
	return b, nil
}
