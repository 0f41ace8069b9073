// Package sim is Tidemark's deterministic simulation harness: a simulated
// object store with an S3-like fault model, a seeded scheduler that lets
// one store call proceed at a time, and a world of writers, zombies and an
// operator running the real checkpoint code against it. Only tests import
// it; see docs/simulation.md.
package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
)

// Errors a faulted call returns. None wraps a blobstore sentinel: to the
// caller they are indeterminate failures, as S3's are.
var (
	// ErrInjected is a call that failed before it applied (a 500).
	ErrInjected = errors.New("sim: injected failure (500 InternalError)")
	// ErrSlowDown is a throttled call (a 503 SlowDown); it did not apply.
	ErrSlowDown = errors.New("sim: 503 SlowDown")
	// ErrLostResponse is a call that applied but whose response was lost.
	ErrLostResponse = errors.New("sim: connection reset: response lost")
	// ErrTimeout is a call that stalled past the caller's patience.
	ErrTimeout = errors.New("sim: request timed out")
	// ErrCrashed is any call of a process that crashed.
	ErrCrashed = errors.New("sim: process crashed")
)

// Kind is what happens to one store call.
type Kind int

// The fault kinds.
const (
	OK         Kind = iota // applies, the caller hears of it
	FailBefore             // fails before applying
	Lost                   // applies, the response is lost
	Stall                  // stalls, then applies or not, and times out
	SlowDown               // 503: does not apply
	Cut                    // a read whose body breaks midway
	Crash                  // the calling process dies during the call
	numKinds
)

var kindNames = [...]string{"ok", "fail-before", "lost-response", "stall", "503-slowdown", "cut-body", "crash"}

func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Fault is the scheduler's decision for one call.
type Fault struct {
	Kind Kind
	// Applied says, for a Stall or Crash, whether the call applies.
	Applied bool
	// Stall is how long a stalled call blocks (fake time).
	Stall time.Duration
	// StaleBy is how far in the past a List sees the store (0: now).
	StaleBy time.Duration
	// Freeze makes a Stall the freeze of the calling process: the call
	// goes through, successfully, once the process wakes.
	Freeze bool
	// Step is the scheduler step that released the call; Issued, the
	// last step released before the caller made it.
	Step, Issued int
}

// Call describes one store call to the Gate.
type Call struct {
	Proc string // the calling process (see WithProc), "" outside one
	Op   string // put, put-if-absent, put-if-match, get, stat, list, delete, abort-uploads, probe, and the scheduler's own
	Key  string // the key or prefix
	Size int64  // bytes written, for puts
}

func (c Call) String() string { return c.Proc + " " + c.Op + " " + c.Key }

// Gate decides when and how each call proceeds. Enter blocks until the
// call may apply and returns its fault. A nil Gate lets every call
// through at once, faultless (the conformance suite runs so).
type Gate interface {
	Enter(ctx context.Context, c Call) Fault
	// Done reports the outcome of a call Enter let through.
	Done(ctx context.Context, ev Event)
}

// Event is what one call did, as the store saw it.
type Event struct {
	Call
	Fault   Fault
	Applied bool   // the call changed the store (writes and deletes)
	Err     error  // what the caller got
	ETag    string // the ETag written, or read by stat/get
	Match   string // the ETag a put-if-match required
	Body    []byte // what was written or read, for small objects
	Found   bool   // reads: the object existed
	Prev    []byte // writes and deletes: the object replaced, if any
}

type object struct {
	data    []byte
	etag    string
	modTime time.Time
}

// tomb is an object deleted or replaced recently, still seen by a stale
// listing.
type tomb struct {
	info    blobstore.ObjectInfo
	present bool // the key held an object before
	at      time.Time
}

// Store is the simulated object store. It implements blobstore.Blobstore,
// blobstore.UploadAborter (multipart uploads a crash left half done) and
// blobstore.Prober. It is safe for concurrent use.
type Store struct {
	gate Gate
	// MultipartSize is the size from which a Put is a multipart upload
	// (a crash during it leaves an incomplete upload). Default 1 KiB.
	MultipartSize int64
	// Behind is how far the store's clock runs behind the hosts': the
	// LastModified it stamps looks that much older to a GC run's clock,
	// the skew --grace must exceed (docs/gc.md).
	Behind time.Duration

	mu      sync.Mutex
	objects map[string]object
	history map[string][]tomb      // key → past states, newest last, for stale lists
	uploads map[string][]time.Time // key → incomplete uploads' start
	version uint64
}

var (
	_ blobstore.Blobstore     = (*Store)(nil)
	_ blobstore.UploadAborter = (*Store)(nil)
	_ blobstore.Prober        = (*Store)(nil)
)

// clock is the store's time, which stamps LastModified.
func (s *Store) clock() time.Time { return time.Now().Add(-s.Behind) }

// NewStore returns an empty store whose calls pass through gate (nil: no
// scheduling, no faults).
func NewStore(gate Gate) *Store {
	return &Store{gate: gate, MultipartSize: 1 << 10, objects: map[string]object{},
		history: map[string][]tomb{}, uploads: map[string][]time.Time{}}
}

// staleWindow bounds how long history is kept for stale listings.
const staleWindow = 10 * time.Minute

func (s *Store) enter(ctx context.Context, c Call) Fault {
	c.Proc = ProcName(ctx)
	if s.gate == nil || ungated(ctx) {
		return Fault{}
	}
	return s.gate.Enter(ctx, c)
}

func (s *Store) done(ctx context.Context, ev Event) {
	ev.Proc = ProcName(ctx)
	if s.gate != nil {
		s.gate.Done(ctx, ev)
	}
}

// failure returns the error a faulted call reports and whether it
// applies. A stalled call enters the gate again when it wakes, so that
// it applies as a step of its own.
func (s *Store) failure(ctx context.Context, c Call, f Fault) (applies bool, err error) {
	switch f.Kind {
	case FailBefore:
		return false, ErrInjected
	case SlowDown:
		return false, ErrSlowDown
	case Lost:
		return true, ErrLostResponse
	case Crash:
		return f.Applied, ErrCrashed
	case Stall:
		t := time.NewTimer(f.Stall)
		defer t.Stop()
		if f.Freeze {
			<-t.C
		} else {
			select {
			case <-t.C:
			case <-ctx.Done():
			}
		}
		c.Op = "stalled"
		if again := s.enter(ctx, c); again.Kind == Crash {
			return f.Applied && !f.Freeze, ErrCrashed
		}
		if f.Freeze {
			return true, nil
		}
		if err := ctx.Err(); err != nil {
			return f.Applied, fmt.Errorf("%w: %w", ErrTimeout, err)
		}
		return f.Applied, ErrTimeout
	}
	return true, nil
}

// drain reads r to EOF without looking at ctx: the body is read before the
// call enters the gate, and a crashed process must still go through it.
func drain(r io.Reader) ([]byte, error) {
	var buf bytes.Buffer
	_, err := io.Copy(&buf, r)
	return buf.Bytes(), err
}

// maxBody is the largest body kept in an Event (pointers, records).
const maxBody = 64 << 10

func small(b []byte) []byte {
	if len(b) > maxBody {
		return nil
	}
	return slices.Clone(b)
}

func (s *Store) put(ctx context.Context, op, key, match string, r io.Reader, cond func(cur object, ok bool) bool) (string, error) {
	if err := blobstore.ValidateKey(key); err != nil {
		return "", fmt.Errorf("sim: %s: %w", op, err)
	}
	data, rerr := drain(r)
	c := Call{Op: op, Key: key, Size: int64(len(data))}
	f := s.enter(ctx, c)
	ev := Event{Call: c, Fault: f, Match: match}
	defer func() { s.done(ctx, ev) }()
	if rerr != nil {
		// The body failed: S3 aborts the upload, nothing is visible.
		ev.Err = fmt.Errorf("sim: %s %q: %w", op, key, rerr)
		return "", ev.Err
	}
	if err := ctx.Err(); err != nil && f.Kind == OK {
		ev.Err = fmt.Errorf("sim: %s %q: %w", op, key, err)
		return "", ev.Err
	}
	applies, ferr := s.failure(ctx, c, f)
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Kind == Crash && !applies && int64(len(data)) >= s.MultipartSize {
		// The process died mid-upload: the multipart upload stays
		// pending, invisible, until someone aborts it.
		s.uploads[key] = append(s.uploads[key], s.clock())
	}
	if !applies {
		ev.Err = fmt.Errorf("sim: %s %q: %w", op, key, ferr)
		return "", ev.Err
	}
	cur, ok := s.objects[key]
	if cond != nil && !cond(cur, ok) {
		if ferr == nil {
			ferr = blobstore.ErrPreconditionFailed
		}
		ev.Err = fmt.Errorf("sim: %s %q: %w", op, key, ferr)
		return "", ev.Err
	}
	s.version++
	etag := `"` + strconv.FormatUint(s.version, 10) + `"`
	s.remember(key, cur, ok)
	s.objects[key] = object{data: data, etag: etag, modTime: s.clock()}
	ev.Applied, ev.ETag, ev.Body = true, etag, small(data)
	if ok {
		ev.Prev = small(cur.data)
	}
	if ferr != nil {
		ev.Err = fmt.Errorf("sim: %s %q: %w", op, key, ferr)
		return "", ev.Err
	}
	return etag, nil
}

// remember keeps the state of key before a change, for stale listings.
func (s *Store) remember(key string, cur object, ok bool) {
	now := time.Now()
	h := s.history[key]
	for len(h) > 0 && now.Sub(h[0].at) > staleWindow {
		h = h[1:]
	}
	s.history[key] = append(h, tomb{info: info(key, cur), present: ok, at: now})
}

func info(key string, o object) blobstore.ObjectInfo {
	return blobstore.ObjectInfo{Key: key, Size: int64(len(o.data)), ETag: o.etag, ModTime: o.modTime}
}

// Put implements blobstore.Blobstore.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	_, err := s.put(ctx, "put", key, "", r, nil)
	return err
}

// PutIfAbsent implements blobstore.Blobstore.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader) (string, error) {
	return s.put(ctx, "put-if-absent", key, "", r, func(_ object, ok bool) bool { return !ok })
}

// PutIfMatch implements blobstore.Blobstore.
func (s *Store) PutIfMatch(ctx context.Context, key, etag string, r io.Reader) (string, error) {
	return s.put(ctx, "put-if-match", key, etag, r, func(cur object, ok bool) bool { return ok && cur.etag == etag })
}

// Get implements blobstore.Blobstore.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.get(ctx, "get", key, 0, -1)
}

// GetRange implements blobstore.Blobstore.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	return s.get(ctx, "get-range", key, offset, length)
}

func (s *Store) get(ctx context.Context, op, key string, offset, length int64) (io.ReadCloser, error) {
	if err := blobstore.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("sim: %s: %w", op, err)
	}
	if offset < 0 {
		return nil, fmt.Errorf("sim: %s %q: negative offset %d", op, key, offset)
	}
	c := Call{Op: op, Key: key}
	f := s.enter(ctx, c)
	ev := Event{Call: c, Fault: f}
	defer func() { s.done(ctx, ev) }()
	if err := ctx.Err(); err != nil {
		ev.Err = fmt.Errorf("sim: %s %q: %w", op, key, err)
		return nil, ev.Err
	}
	cut := f.Kind == Cut
	if cut {
		f.Kind = OK
	}
	if _, err := s.failure(ctx, c, f); err != nil {
		ev.Err = fmt.Errorf("sim: %s %q: %w", op, key, err)
		return nil, ev.Err
	}
	s.mu.Lock()
	o, ok := s.objects[key]
	s.mu.Unlock()
	if !ok {
		ev.Err = fmt.Errorf("sim: %s %q: %w", op, key, blobstore.ErrNotFound)
		return nil, ev.Err
	}
	ev.Found, ev.ETag = true, o.etag
	// Objects are never changed in place, so the reader shares the bytes.
	data := o.data[min(offset, int64(len(o.data))):]
	if length >= 0 && length < int64(len(data)) {
		data = data[:length]
	}
	if offset == 0 && length < 0 {
		ev.Body = small(data)
	}
	if cut && len(data) > 1 {
		return io.NopCloser(io.MultiReader(bytes.NewReader(data[:len(data)/2]), errReader{})), nil
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) {
	return 0, fmt.Errorf("sim: body cut: %w", io.ErrUnexpectedEOF)
}

// Stat implements blobstore.Blobstore.
func (s *Store) Stat(ctx context.Context, key string) (blobstore.ObjectInfo, error) {
	if err := blobstore.ValidateKey(key); err != nil {
		return blobstore.ObjectInfo{}, fmt.Errorf("sim: stat: %w", err)
	}
	c := Call{Op: "stat", Key: key}
	f := s.enter(ctx, c)
	ev := Event{Call: c, Fault: f}
	defer func() { s.done(ctx, ev) }()
	if err := ctx.Err(); err != nil {
		ev.Err = fmt.Errorf("sim: stat %q: %w", key, err)
		return blobstore.ObjectInfo{}, ev.Err
	}
	if f.Kind == Cut {
		f.Kind = OK
	}
	if _, err := s.failure(ctx, c, f); err != nil {
		ev.Err = fmt.Errorf("sim: stat %q: %w", key, err)
		return blobstore.ObjectInfo{}, ev.Err
	}
	s.mu.Lock()
	o, ok := s.objects[key]
	s.mu.Unlock()
	if !ok {
		ev.Err = fmt.Errorf("sim: stat %q: %w", key, blobstore.ErrNotFound)
		return blobstore.ObjectInfo{}, ev.Err
	}
	ev.Found, ev.ETag = true, o.etag
	return info(key, o), nil
}

// Exists implements blobstore.Blobstore.
func (s *Store) Exists(ctx context.Context, key string) (bool, error) {
	_, err := s.Stat(ctx, key)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, blobstore.ErrNotFound) {
		return false, nil
	}
	return false, err
}

// List implements blobstore.Blobstore. A stale listing (Fault.StaleBy)
// shows the store as it was that long ago: new keys missing, deleted ones
// still there.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[blobstore.ObjectInfo, error] {
	return func(yield func(blobstore.ObjectInfo, error) bool) {
		if err := blobstore.ValidatePrefix(prefix); err != nil {
			yield(blobstore.ObjectInfo{}, fmt.Errorf("sim: list: %w", err))
			return
		}
		c := Call{Op: "list", Key: prefix}
		f := s.enter(ctx, c)
		ev := Event{Call: c, Fault: f}
		defer func() { s.done(ctx, ev) }()
		cut := f.Kind == Cut
		if cut {
			f.Kind = OK
		}
		if _, err := s.failure(ctx, c, f); err != nil {
			ev.Err = fmt.Errorf("sim: list %q: %w", prefix, err)
			yield(blobstore.ObjectInfo{}, ev.Err)
			return
		}
		infos := s.snapshot(prefix, f.StaleBy)
		for i, in := range infos {
			if err := ctx.Err(); err != nil {
				ev.Err = fmt.Errorf("sim: list %q: %w", prefix, err)
				yield(blobstore.ObjectInfo{}, ev.Err)
				return
			}
			if cut && i == len(infos)/2 {
				// A later page fails.
				ev.Err = fmt.Errorf("sim: list %q: %w", prefix, ErrInjected)
				yield(blobstore.ObjectInfo{}, ev.Err)
				return
			}
			if !yield(in, nil) {
				return
			}
		}
	}
}

// snapshot returns the sorted listing of prefix as of staleBy ago.
func (s *Store) snapshot(prefix string, staleBy time.Duration) []blobstore.ObjectInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	asOf := time.Now().Add(-staleBy)
	var infos []blobstore.ObjectInfo
	seen := map[string]bool{}
	for k, o := range s.objects {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		seen[k] = true
		if in, ok := s.pastLocked(k, asOf, staleBy); ok {
			if in != nil {
				infos = append(infos, *in)
			}
			continue
		}
		infos = append(infos, info(k, o))
	}
	if staleBy > 0 {
		for k := range s.history {
			if seen[k] || !strings.HasPrefix(k, prefix) {
				continue
			}
			if in, ok := s.pastLocked(k, asOf, staleBy); ok && in != nil {
				infos = append(infos, *in)
			}
		}
	}
	slices.SortFunc(infos, func(a, b blobstore.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return infos
}

// pastLocked returns the state of key at asOf when it changed since then:
// ok with a nil info when it did not exist.
func (s *Store) pastLocked(key string, asOf time.Time, staleBy time.Duration) (*blobstore.ObjectInfo, bool) {
	if staleBy <= 0 {
		return nil, false
	}
	for _, t := range s.history[key] {
		if t.at.After(asOf) {
			if !t.present {
				return nil, true
			}
			in := t.info
			return &in, true
		}
	}
	return nil, false
}

// Delete implements blobstore.Blobstore.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := blobstore.ValidateKey(key); err != nil {
		return fmt.Errorf("sim: delete: %w", err)
	}
	c := Call{Op: "delete", Key: key}
	f := s.enter(ctx, c)
	ev := Event{Call: c, Fault: f}
	defer func() { s.done(ctx, ev) }()
	if err := ctx.Err(); err != nil && f.Kind == OK {
		ev.Err = fmt.Errorf("sim: delete %q: %w", key, err)
		return ev.Err
	}
	if f.Kind == Cut {
		f.Kind = OK
	}
	applies, ferr := s.failure(ctx, c, f)
	if applies {
		s.mu.Lock()
		if cur, ok := s.objects[key]; ok {
			s.remember(key, cur, true)
			delete(s.objects, key)
			ev.Applied, ev.Prev = true, small(cur.data)
		}
		s.mu.Unlock()
	}
	if ferr != nil {
		ev.Err = fmt.Errorf("sim: delete %q: %w", key, ferr)
	}
	return ev.Err
}

// AbortIncompleteUploads implements blobstore.UploadAborter.
func (s *Store) AbortIncompleteUploads(ctx context.Context, prefix string, olderThan time.Duration) (int, error) {
	if err := blobstore.ValidatePrefix(prefix); err != nil {
		return 0, fmt.Errorf("sim: abort uploads: %w", err)
	}
	c := Call{Op: "abort-uploads", Key: prefix}
	f := s.enter(ctx, c)
	ev := Event{Call: c, Fault: f}
	defer func() { s.done(ctx, ev) }()
	if f.Kind == Cut {
		f.Kind = OK
	}
	applies, ferr := s.failure(ctx, c, f)
	n := 0
	if applies {
		s.mu.Lock()
		now := s.clock()
		for k, starts := range s.uploads {
			if !strings.HasPrefix(k, prefix) {
				continue
			}
			kept := starts[:0]
			for _, t := range starts {
				if now.Sub(t) > olderThan {
					n++
				} else {
					kept = append(kept, t)
				}
			}
			if len(kept) == 0 {
				delete(s.uploads, k)
			} else {
				s.uploads[k] = kept
			}
		}
		s.mu.Unlock()
		ev.Applied = n > 0
	}
	if ferr != nil {
		ev.Err = fmt.Errorf("sim: abort uploads %q: %w", prefix, ferr)
		return 0, ev.Err
	}
	return n, nil
}

// Probe implements blobstore.Prober: the simulated store enforces its
// conditions, but the probe is a call that can fail like any other.
func (s *Store) Probe(ctx context.Context) error {
	c := Call{Op: "probe"}
	f := s.enter(ctx, c)
	ev := Event{Call: c, Fault: f}
	defer func() { s.done(ctx, ev) }()
	if f.Kind == Cut {
		f.Kind = OK
	}
	if _, err := s.failure(ctx, c, f); err != nil {
		ev.Err = fmt.Errorf("sim: probe: %w", err)
	}
	return ev.Err
}

// Keys returns every key with prefix, sorted, as the store holds them
// now (no gate, no faults: for the invariant checks).
func (s *Store) Keys(prefix string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k := range s.objects {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// Object returns the object at key now (no gate, no faults).
func (s *Store) Object(key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[key]
	return o.data, ok
}

// IncompleteUploads returns how many uploads under prefix are pending.
func (s *Store) IncompleteUploads(prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, starts := range s.uploads {
		if strings.HasPrefix(k, prefix) {
			n += len(starts)
		}
	}
	return n
}
