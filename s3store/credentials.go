package s3store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go/logging"
)

// ErrNoCredentials is returned when the AWS chain found no credentials to
// sign a request with (no environment variables, no shared profile, no
// SSO session, no web identity, container or instance role). The message
// says how to provide them.
var ErrNoCredentials = errors.New("s3store: no AWS credentials found")

// credentialsHint is what ErrNoCredentials tells the user to do.
const credentialsHint = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, " +
	"or AWS_PROFILE naming a profile in ~/.aws/credentials or ~/.aws/config (aws configure; aws sso login for SSO), " +
	"or run with an instance, task or web-identity role"

// credentialsFailure marks an error of the credential chain, so that wrap
// can tell "could not sign" from the server's "access denied" (the
// instance metadata service answers a missing role with 403 or 404,
// which would otherwise read as either).
type credentialsFailure struct{ err error }

func (e *credentialsFailure) Error() string { return e.err.Error() }
func (e *credentialsFailure) Unwrap() error { return e.err }

// markCredentials wraps a credentials provider so that its failures are
// credentialsFailure.
type markCredentials struct{ p aws.CredentialsProvider }

func (m markCredentials) Retrieve(ctx context.Context) (aws.Credentials, error) {
	c, err := m.p.Retrieve(ctx)
	if err != nil {
		return c, &credentialsFailure{err: err}
	}
	return c, nil
}

// noCredentials wraps err as ErrNoCredentials if the credential chain
// failed, or returns nil.
func (s *Store) noCredentials(op, key string, err error) error {
	var cf *credentialsFailure
	if !errors.As(err, &cf) {
		return nil
	}
	return fmt.Errorf("s3store: %s %q: %w for bucket %q at %s (%s): %w", op, key, ErrNoCredentials, s.bucket, s.endpoint, credentialsHint, cf.err)
}

// sdkLogger sends the SDK's own log lines (warnings such as falling back
// to IMDSv1, or a response without a checksum to validate) to l: Warn at
// slog.LevelWarn, Debug at slog.LevelDebug, under the attribute
// component=aws-sdk. A nil l discards them.
func sdkLogger(l *slog.Logger) logging.Logger {
	if l == nil {
		return logging.Nop{}
	}
	return logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
		level := slog.LevelInfo
		switch c {
		case logging.Warn:
			level = slog.LevelWarn
		case logging.Debug:
			level = slog.LevelDebug
		}
		msg := fmt.Sprintf(format, v...)
		if level == slog.LevelWarn && strings.Contains(msg, "falling back to IMDSv1") {
			// Said on every machine that is not on EC2, before the
			// missing-credentials error that says what to set: noise
			// at Warn. The fallback itself is no problem.
			level = slog.LevelDebug
		}
		ctx := context.Background()
		if l.Enabled(ctx, level) {
			l.Log(ctx, level, msg, "component", "aws-sdk")
		}
	})
}
