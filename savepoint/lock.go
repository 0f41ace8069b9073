package savepoint

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
)

// Locks. Operations that make a savepoint reference content already in
// the area (create, copy into a store, import) or that read content (a
// restore, an export, a copy out of a store) hold a shared lock; a delete,
// which removes content no manifest references, holds an exclusive one.
// Each writes its lock with PutIfAbsent, then lists the locks: an
// operation that sees a conflicting live lock removes its own and waits.
// Of two conflicting operations at least one sees the other (each wrote
// before it listed), so a delete never runs beside a create that found a
// file present and skipped uploading it. docs/savepoints.md states the
// argument in full.
//
// A holder rewrites its lock every Refresh with PutIfMatch. A lock that
// has not been rewritten for StaleAfter (by the store's clock: the age is
// the difference of two ModTimes) belongs to a crashed process: another
// operation breaks it with PutIfMatch on the ETag it listed, so a holder
// that refreshed meanwhile keeps it, and one that did not loses it and
// learns so at its next refresh. A holder acts (publishes a manifest,
// deletes content) only while its last refresh was issued less than
// StaleAfter/2 ago by its own monotonic clock.

// kind is a lock's kind.
type kind string

const (
	shared    kind = "shared"
	exclusive kind = "exclusive"
)

// conflicts reports whether locks of kinds a and b exclude each other.
func conflicts(a, b kind) bool { return a == exclusive || b == exclusive }

// ErrLocked is returned (wrapped) when a conflicting operation holds the
// savepoint area for longer than LockOptions.Wait: a delete while a
// create, copy or read is in progress, or the reverse. Nothing was
// changed; the message names the holders.
var ErrLocked = errors.New("savepoint: the savepoint area is in use by another operation")

// ErrLockLost is returned (wrapped) when an operation can no longer prove
// it holds its lock (another process broke it as stale, or refreshes
// failed for StaleAfter/2): it stops before publishing or deleting.
var ErrLockLost = errors.New("savepoint: lock lost")

// Defaults of LockOptions.
const (
	DefaultStaleAfter = 30 * time.Minute
	DefaultLockWait   = time.Minute
)

// LockOptions tune the locks. The zero value takes the defaults.
type LockOptions struct {
	// StaleAfter is how long a lock may go without a refresh before
	// others break it. It must exceed any pause of a holder.
	// Default: DefaultStaleAfter (30m).
	StaleAfter time.Duration
	// Refresh is how often a holder rewrites its lock. Default:
	// StaleAfter/6.
	Refresh time.Duration
	// Wait is how long an operation waits for a conflicting one to end
	// before it fails with ErrLocked. Default: DefaultLockWait (1m);
	// negative: do not wait.
	Wait time.Duration
}

func (o LockOptions) withDefaults() LockOptions {
	if o.StaleAfter <= 0 {
		o.StaleAfter = DefaultStaleAfter
	}
	if o.Refresh <= 0 {
		o.Refresh = o.StaleAfter / 6
	}
	switch {
	case o.Wait == 0:
		o.Wait = DefaultLockWait
	case o.Wait < 0:
		o.Wait = 0
	}
	return o
}

// testNoLocks, set by tests only, makes acquire take no lock: what the
// tests of the race the locks prevent run without, to show it is real.
var testNoLocks bool

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// lockBody is a lock object's content, for the operator who lists it.
type lockBody struct {
	Kind    kind      `json:"kind"`
	Op      string    `json:"op"`
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	// Broken names the operation that found the lock stale and broke it.
	Broken string `json:"broken_by,omitempty"`
}

// lock is a held lock.
type lock struct {
	bs   blobstore.Blobstore
	key  string
	body []byte
	opts LockOptions

	// serverTime is the store's time when the lock was taken (its
	// ModTime): the clock grace periods are measured by.
	serverTime time.Time

	mu      sync.Mutex
	etag    string
	fresh   time.Time // when the last successful write was issued (monotonic)
	lostErr error

	stop chan struct{}
	done chan struct{}
}

// acquire takes a lock of kind k for op, waiting up to opts.Wait for
// conflicting locks to go.
func acquire(ctx context.Context, bs blobstore.Blobstore, k kind, op string, opts LockOptions) (*lock, error) {
	opts = opts.withDefaults()
	if testNoLocks {
		return &lock{bs: bs, opts: opts, serverTime: time.Now(), fresh: time.Now().Add(opts.StaleAfter), stop: make(chan struct{}), done: closed}, nil
	}
	host, _ := os.Hostname()
	body, err := json.Marshal(lockBody{Kind: k, Op: op, Host: host, PID: os.Getpid(), Started: time.Now().UTC()})
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(opts.Wait)
	backoff := 50 * time.Millisecond
	for {
		l := &lock{bs: bs, key: lockKey(k, nonce()), body: body, opts: opts}
		holders, err := l.try(ctx, k, op)
		if err != nil {
			return nil, err
		}
		if len(holders) == 0 {
			l.stop, l.done = make(chan struct{}), make(chan struct{})
			go l.refresh()
			return l, nil
		}
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, strings.Join(holders, "; "))
		}
		d := min(backoff/2+jitter(backoff), time.Until(deadline)+time.Millisecond)
		backoff = min(2*backoff, 2*time.Second)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(d):
		}
	}
}

// try writes l, then lists the locks. It returns the live conflicting
// holders (having removed l again) or none (l is held). Stale conflicting
// locks are broken.
func (l *lock) try(ctx context.Context, k kind, op string) ([]string, error) {
	issued := time.Now()
	etag, err := l.bs.PutIfAbsent(ctx, l.key, bytes.NewReader(l.body))
	if err != nil {
		return nil, fmt.Errorf("savepoint: lock %s: %w", l.key, err)
	}
	l.etag, l.fresh = etag, issued
	own, err := l.bs.Stat(ctx, l.key)
	if err != nil {
		l.remove(ctx)
		return nil, fmt.Errorf("savepoint: lock %s: %w", l.key, err)
	}
	now := own.ModTime // the store's clock
	l.serverTime = now
	var holders []string
	for o, err := range l.bs.List(ctx, LockPrefix) {
		if err != nil {
			l.remove(ctx)
			return nil, fmt.Errorf("savepoint: list locks: %w", err)
		}
		if o.Key == l.key {
			continue
		}
		ok, _, _ := parseLockName(strings.TrimPrefix(o.Key, LockPrefix))
		if ok == "" || !conflicts(k, ok) {
			continue
		}
		if now.Sub(o.ModTime) > l.opts.StaleAfter && breakStale(ctx, l.bs, o, op) {
			continue
		}
		holders = append(holders, describeLock(ctx, l.bs, o))
	}
	if len(holders) > 0 {
		l.remove(ctx)
	}
	return holders, nil
}

// breakStale breaks the stale lock o: it rewrites it (PutIfMatch on the
// listed ETag, so that a holder that refreshed meanwhile keeps it) and
// then deletes it. It reports whether the lock is gone.
func breakStale(ctx context.Context, bs blobstore.Blobstore, o blobstore.ObjectInfo, op string) bool {
	if o.ETag == "" {
		return false
	}
	host, _ := os.Hostname()
	b, _ := json.Marshal(lockBody{Op: "stale", Broken: fmt.Sprintf("%s on %s (pid %d)", op, host, os.Getpid())})
	if _, err := bs.PutIfMatch(ctx, o.Key, o.ETag, bytes.NewReader(b)); err != nil {
		return false
	}
	return bs.Delete(ctx, o.Key) == nil
}

// describeLock says who holds the lock o, for ErrLocked.
func describeLock(ctx context.Context, bs blobstore.Blobstore, o blobstore.ObjectInfo) string {
	desc := o.Key
	rc, err := bs.Get(ctx, o.Key)
	if err != nil {
		return desc
	}
	defer rc.Close()
	var b lockBody
	if json.NewDecoder(io.LimitReader(rc, 4<<10)).Decode(&b) == nil && b.Op != "" {
		desc = fmt.Sprintf("%s on %s (pid %d) since %s", b.Op, b.Host, b.PID, b.Started.Format(time.RFC3339))
	}
	return desc
}

// refresh rewrites the lock every Refresh until release. A failed
// conditional write means the lock was broken: it is lost for good.
func (l *lock) refresh() {
	defer close(l.done)
	t := time.NewTicker(l.opts.Refresh)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		l.mu.Lock()
		etag, lost := l.etag, l.lostErr != nil
		l.mu.Unlock()
		if lost {
			return
		}
		issued := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), l.opts.StaleAfter/4)
		newETag, err := l.bs.PutIfMatch(ctx, l.key, etag, bytes.NewReader(l.body))
		cancel()
		l.mu.Lock()
		switch {
		case err == nil:
			l.etag, l.fresh = newETag, issued
		case errors.Is(err, blobstore.ErrPreconditionFailed), errors.Is(err, blobstore.ErrNotFound):
			l.lostErr = fmt.Errorf("%w: %s was broken or removed by another process", ErrLockLost, l.key)
		}
		l.mu.Unlock()
	}
}

// held returns nil if l is held and may be acted on now: not broken, and
// its last refresh issued less than StaleAfter/2 ago.
func (l *lock) held() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lostErr != nil {
		return l.lostErr
	}
	if age := time.Since(l.fresh); age >= l.opts.StaleAfter/2 {
		return fmt.Errorf("%w: %s not refreshed for %s", ErrLockLost, l.key, age.Round(time.Millisecond))
	}
	return nil
}

// release stops refreshing and removes the lock, even if ctx is done.
func (l *lock) release(ctx context.Context) {
	if l == nil {
		return
	}
	close(l.stop)
	<-l.done
	l.remove(ctx)
}

// remove deletes the lock object, even if ctx is done (a lock left
// behind blocks deletes until it is stale).
func (l *lock) remove(ctx context.Context) {
	if l.key == "" {
		return // testNoLocks
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = l.bs.Delete(ctx, l.key)
}

// jitter returns a random duration in [0, d). It draws from crypto/rand,
// as nonce does, so that a test seeding that (the deterministic
// simulation) replays the same waits.
func jitter(d time.Duration) time.Duration {
	var b [8]byte
	_, _ = crand.Read(b[:])
	return time.Duration(binary.LittleEndian.Uint64(b[:]) % uint64(d))
}

func nonce() string {
	var b [8]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}
