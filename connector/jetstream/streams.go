package jetstream

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark-io/tidemark/job"
)

// KeyHeader carries a record's key, base64 (standard, padded) because keys
// are bytes and header values are text. A message without it has a nil key.
const KeyHeader = "Tidemark-Key"

// Errors of the package. Each is wrapped with what it refers to.
var (
	// ErrConfig is a configuration or a stream that cannot work as asked.
	ErrConfig = errors.New("jetstream: invalid configuration")
	// ErrOffsets is an offsets document that does not fit the source.
	ErrOffsets = errors.New("jetstream: invalid offsets")
	// ErrTruncated means messages after a checkpointed sequence were
	// removed from the stream: an exact resume is impossible.
	ErrTruncated = errors.New("jetstream: stream truncated after the checkpointed sequence")
	// ErrNotPrepared means Commit found no prepared staging for a txn that
	// is not committed either.
	ErrNotPrepared = errors.New("jetstream: transaction not prepared")
	// ErrTxnConflict means another transaction (another writer) already
	// committed the same checkpoint id to the output stream.
	ErrTxnConflict = errors.New("jetstream: checkpoint committed by another transaction")
)

// requestTimeout bounds one JetStream API request. nats.go waits for a
// reply until the context's deadline, so a request lost in a leader
// election would otherwise hold a commit for as long as the caller allows.
const requestTimeout = 10 * time.Second

func request(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, requestTimeout)
}

// retryBudget is how long retry keeps trying: longer than a leader
// election, so that a NATS node's death does not fail the job.
const retryBudget = time.Minute

// retry runs the idempotent request f, each attempt bounded by
// requestTimeout, again while it fails for a reason that may pass (a
// timeout, no responders, no leader yet), for up to retryBudget.
func retry(ctx context.Context, f func(context.Context) error) error {
	deadline := time.Now().Add(retryBudget)
	backoff := 100 * time.Millisecond
	for {
		rctx, cancel := request(ctx)
		err := f(rctx)
		cancel()
		if err == nil || !transient(err) || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// transient reports errors of a cluster in transition, worth a retry.
func transient(err error) bool {
	var apiErr *natsjs.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case natsjs.JSErrCodeJetStreamNotEnabled, natsjs.JSErrCodeJetStreamNotEnabledForAccount:
			return false
		}
		// 503-like answers: no leader, cluster not available.
		return apiErr.Code == 503 || apiErr.ErrorCode == 10008 || apiErr.ErrorCode == 10009
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, natsjs.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, nats.ErrDisconnected)
}

// PartitionSubject returns the subject of partition p of a partitioned
// stream whose subject prefix is prefix: "<prefix>.<p>".
func PartitionSubject(prefix string, p int) string { return prefix + "." + strconv.Itoa(p) }

// PartitionOf returns the partition of key among n: FNV-1a modulo n.
func PartitionOf(key []byte, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write(key)
	return int(h.Sum32() % uint32(n))
}

// CreateInputStream creates (or updates) a stream named name whose
// partitions are the subjects "<name>.<p>", file-stored with the given
// replicas (0 means 1). It is what a Source reads.
func CreateInputStream(ctx context.Context, js natsjs.JetStream, name string, replicas int) (natsjs.Stream, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	return js.CreateOrUpdateStream(ctx, natsjs.StreamConfig{
		Name:     name,
		Subjects: []string{name + ".*"},
		Storage:  natsjs.FileStorage,
		Replicas: max(replicas, 1),
	})
}

// NewMsg returns the message that carries rec on subject: the value as
// data, the key in KeyHeader. Producers of a Source's input use it.
func NewMsg(subject string, rec job.Record) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = rec.Value
	if rec.Key != nil {
		m.Header.Set(KeyHeader, base64.StdEncoding.EncodeToString(rec.Key))
	}
	return m
}

// recordOf decodes a message NewMsg (or the sink) produced.
func recordOf(hdr nats.Header, data []byte) (job.Record, error) {
	rec := job.Record{Value: data}
	if k := hdr.Get(KeyHeader); k != "" {
		key, err := base64.StdEncoding.DecodeString(k)
		if err != nil {
			return job.Record{}, fmt.Errorf("jetstream: %s header: %w", KeyHeader, err)
		}
		rec.Key = key
	}
	return rec, nil
}

// validName checks a stream name, which is also its subject prefix.
func validName(name string) error {
	if name == "" || strings.ContainsAny(name, ".*> \t\r\n/\\") {
		return fmt.Errorf("%w: stream name %q: want a non-empty name without '.', '*', '>', '/', '\\' or spaces", ErrConfig, name)
	}
	return nil
}

// token makes s one subject token: kept when it is made of letters,
// digits, '-' and '_', else "=" and its hex (so distinct inputs stay
// distinct). Checkpoint ids ("ckpt-…") and writers ("e3") are kept.
func token(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return fmt.Sprintf("=%x", s)
}
