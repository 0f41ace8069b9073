package blobstorage

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

var errInjected = errors.New("injected write failure")

// spy decorates a Blobstore: it counts writes and uploaded bytes per
// key, can fail the n-th write, and can run a hook before a write.
type spy struct {
	blobstore.Blobstore
	mu     sync.Mutex
	writes int            // Put, PutIfAbsent and PutIfMatch calls so far
	failAt int            // 1-based write to fail; 0: none
	puts   map[string]int // key → successful writes
	bytes  map[string]int64
	before func(op, key string) // called (outside the lock) before each write
	failIf func(op, key string) bool
}

func newBlobSpy(bs blobstore.Blobstore) *spy {
	return &spy{Blobstore: bs, puts: map[string]int{}, bytes: map[string]int64{}}
}

func (b *spy) write(op, key string, r io.Reader, do func(io.Reader) error) error {
	b.mu.Lock()
	b.writes++
	fail := (b.failAt != 0 && b.writes == b.failAt) || (b.failIf != nil && b.failIf(op, key))
	hook := b.before
	b.mu.Unlock()
	if hook != nil {
		hook(op, key)
	}
	if fail {
		return errInjected
	}
	cr := &countingReader{r: r}
	if err := do(cr); err != nil {
		return err
	}
	b.mu.Lock()
	b.puts[key]++
	b.bytes[key] += cr.n
	b.mu.Unlock()
	return nil
}

func (b *spy) Put(ctx context.Context, key string, r io.Reader) error {
	return b.write("put", key, r, func(r io.Reader) error { return b.Blobstore.Put(ctx, key, r) })
}

func (b *spy) PutIfAbsent(ctx context.Context, key string, r io.Reader) (etag string, err error) {
	err = b.write("put-if-absent", key, r, func(r io.Reader) (err error) {
		etag, err = b.Blobstore.PutIfAbsent(ctx, key, r)
		return err
	})
	return etag, err
}

func (b *spy) PutIfMatch(ctx context.Context, key, match string, r io.Reader) (etag string, err error) {
	err = b.write("put-if-match", key, r, func(r io.Reader) (err error) {
		etag, err = b.Blobstore.PutIfMatch(ctx, key, match, r)
		return err
	})
	return etag, err
}

// uploads returns the keys under prefix written since the last reset, and
// the bytes written to them.
func (b *spy) uploads(prefix string) (keys []string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, c := range b.puts {
		if strings.HasPrefix(k, prefix) && c > 0 {
			keys = append(keys, k)
			n += b.bytes[k]
		}
	}
	return keys, n
}

func (b *spy) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes, b.failAt = 0, 0
	clear(b.puts)
	clear(b.bytes)
}

// stateFiles describes state directories: owner → slash path → content.
type stateFiles map[string]map[string]string

// newWriter returns a Storage on bs with its own local directory,
// after Acquire.
func newWriter(t *testing.T, bs blobstore.Blobstore, opts Options) *Storage {
	t.Helper()
	s := New(bs, t.TempDir(), opts)
	if _, err := s.Acquire(t.Context()); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	return s
}

// writeState creates StateDir(id)/<owner>/<path> for every file. A
// content of "link:<id>" hard-links the same file of checkpoint <id>
// instead, the way Pebble checkpoints share unchanged tables.
func writeState(t *testing.T, s checkpoint.Storage, id string, files stateFiles) map[string]string {
	t.Helper()
	dirs := map[string]string{}
	for owner, fm := range files {
		dirs[owner] = owner
		root := filepath.Join(s.StateDir(id), owner)
		if err := os.MkdirAll(root, 0o755); err != nil {
			t.Fatal(err)
		}
		for p, content := range fm {
			dst := filepath.Join(root, filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			if from, ok := strings.CutPrefix(content, "link:"); ok {
				if err := os.Link(filepath.Join(s.StateDir(from), owner, filepath.FromSlash(p)), dst); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := os.WriteFile(dst, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dirs
}

// saveState writes files as the state of checkpoint id and saves it.
func saveState(t *testing.T, s checkpoint.Storage, id string, status checkpoint.Status, files stateFiles) *checkpoint.CheckpointData {
	t.Helper()
	d := record(id, status)
	d.StateDirs = writeState(t, s, id, files)
	if err := s.Save(t.Context(), d); err != nil {
		t.Fatalf("Save(%s): %v", id, err)
	}
	return d
}

// readTree returns every regular file under root: slash path → content.
func readTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatalf("read %s: %v", root, err)
	}
	return out
}

// flatten turns stateFiles (after resolving links against earlier
// checkpoints' contents in prev) into readTree's form.
func flatten(files stateFiles, resolve func(owner, p, content string) string) map[string]string {
	out := map[string]string{}
	for owner, fm := range files {
		for p, c := range fm {
			if resolve != nil {
				c = resolve(owner, p, c)
			}
			out[owner+"/"+p] = c
		}
	}
	return out
}

// restoreElsewhere restores checkpoint id from bs on a fresh node (an
// empty local directory) and returns the restored files.
func restoreElsewhere(t *testing.T, bs blobstore.Blobstore, id string) map[string]string {
	t.Helper()
	s := New(bs, t.TempDir(), Options{})
	if err := s.Restore(t.Context(), id); err != nil {
		t.Fatalf("Restore(%s) on a fresh node: %v", id, err)
	}
	return readTree(t, s.StateDir(id))
}

func newMem() *memstore.Store { return memstore.New() }

// readSpy decorates a Blobstore: it counts Stat and Get calls per key and
// can fail a Get, and can run a hook after a Stat returns.
type readSpy struct {
	blobstore.Blobstore
	mu        sync.Mutex
	stats     map[string]int
	gets      map[string]int
	failGet   func(key string) bool
	afterStat func(key string)
}

func newReadSpy(bs blobstore.Blobstore) *readSpy {
	return &readSpy{Blobstore: bs, stats: map[string]int{}, gets: map[string]int{}}
}

func (r *readSpy) Stat(ctx context.Context, key string) (blobstore.ObjectInfo, error) {
	r.mu.Lock()
	r.stats[key]++
	hook := r.afterStat
	r.mu.Unlock()
	info, err := r.Blobstore.Stat(ctx, key)
	if hook != nil {
		hook(key)
	}
	return info, err
}

func (r *readSpy) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	r.mu.Lock()
	r.gets[key]++
	fail := r.failGet != nil && r.failGet(key)
	r.mu.Unlock()
	if fail {
		return nil, errInjected
	}
	return r.Blobstore.Get(ctx, key)
}

// requests returns the Stat and Get calls so far, and resets the counts.
func (r *readSpy) requests() (stats, gets int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.stats {
		stats += n
	}
	for _, n := range r.gets {
		gets += n
	}
	clear(r.stats)
	clear(r.gets)
	return stats, gets
}

// ctx is the context of helpers that run outside a test's own context
// (rapid state machines); tests use t.Context().
var ctx = context.Background()

// record is a completed-or-prepared record with the fields tests compare.
func record(id string, status checkpoint.Status) *checkpoint.CheckpointData {
	return &checkpoint.CheckpointData{
		JobID:     "job-test",
		ID:        id,
		Timestamp: time.Date(2026, 7, 19, 10, 0, 0, 0, time.UTC),
		Operators: map[string][]byte{"0": []byte("op-" + id)},
		Source:    map[string][]byte{checkpoint.SourceOffsetsKey: []byte("off-" + id)},
		Status:    status,
		TxnID:     "txn",
	}
}

func idOf(d *checkpoint.CheckpointData) string {
	if d == nil {
		return "<nil>"
	}
	return d.ID
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
