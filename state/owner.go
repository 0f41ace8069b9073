package state

import (
	"bytes"
	"errors"
	"fmt"
	"iter"

	"github.com/cockroachdb/pebble/v2"
)

// Owner is the keyed state of one owner (operator instance) in a Store:
// one Pebble database. Its methods are safe for concurrent use; after the
// Store is closed they fail with ErrClosed.
type Owner struct {
	s      *Store
	id     string
	db     *pebble.DB
	remote *ownerRemote // nil in local mode
}

// KV is one key/value pair yielded by Owner.Scan. Both slices are copies
// the caller may keep and modify.
type KV struct {
	Key   []byte
	Value []byte
}

// ID returns the owner id.
func (o *Owner) ID() string { return o.id }

// Get returns a copy of the value of key, and whether key is present.
func (o *Owner) Get(key []byte) ([]byte, bool, error) {
	if err := o.s.acquire(); err != nil {
		return nil, false, o.errorf("get", key, err)
	}
	defer o.s.release()
	v, closer, err := o.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, o.errorf("get", key, err)
	}
	// v points into Pebble's block cache and is valid only until Close.
	out := bytes.Clone(v)
	if out == nil {
		out = []byte{}
	}
	if err := closer.Close(); err != nil {
		return nil, false, o.errorf("get", key, err)
	}
	return out, true, nil
}

// Set sets key to value. Pebble copies both; the caller may reuse them.
func (o *Owner) Set(key, value []byte) (err error) {
	if err := o.s.acquire(); err != nil {
		return o.errorf("set", key, err)
	}
	defer o.s.release()
	defer o.recoverWrite("set", &err)
	if err := o.db.Set(key, value, o.s.writeOptions()); err != nil {
		return o.errorf("set", key, err)
	}
	return nil
}

// Delete removes key. Deleting a missing key is not an error.
func (o *Owner) Delete(key []byte) (err error) {
	if err := o.s.acquire(); err != nil {
		return o.errorf("delete", key, err)
	}
	defer o.s.release()
	defer o.recoverWrite("delete", &err)
	if err := o.db.Delete(key, o.s.writeOptions()); err != nil {
		return o.errorf("delete", key, err)
	}
	return nil
}

// Batch collects writes that Owner.Apply commits atomically. It is valid
// only inside the function passed to Apply and is not safe for concurrent
// use.
type Batch struct {
	b *pebble.Batch
}

// Set sets key to value in the batch. The batch copies both.
func (b *Batch) Set(key, value []byte) error { return b.b.Set(key, value, nil) }

// Delete removes key in the batch.
func (b *Batch) Delete(key []byte) error { return b.b.Delete(key, nil) }

// Len returns the number of writes in the batch.
func (b *Batch) Len() int { return int(b.b.Count()) }

// Apply runs fn with a new Batch and, if fn returns nil, commits the
// batch atomically: all its writes become visible together or none do.
// If fn returns an error nothing is written and Apply returns it.
func (o *Owner) Apply(fn func(b *Batch) error) (err error) {
	if err := o.s.acquire(); err != nil {
		return o.errorf("apply", nil, err)
	}
	defer o.s.release()
	defer o.recoverWrite("apply", &err)
	pb := o.db.NewBatch()
	defer pb.Close()
	b := &Batch{b: pb}
	if err := fn(b); err != nil {
		return err
	}
	if err := pb.Commit(o.s.writeOptions()); err != nil {
		return o.errorf("apply", nil, err)
	}
	return nil
}

// Scan yields, in key order, every key/value pair whose key starts with
// prefix (every pair for an empty prefix), reading a consistent snapshot
// taken when iteration starts. An error is yielded once, as the last
// element. Breaking out of the loop releases the iterator.
func (o *Owner) Scan(prefix []byte) iter.Seq2[KV, error] {
	var lower []byte // nil for no bound: under -race Pebble reads the
	// first byte of any non-nil bound, so an empty one panics
	if len(prefix) > 0 {
		lower = bytes.Clone(prefix)
	}
	upper := prefixEnd(prefix)
	return func(yield func(KV, error) bool) {
		if err := o.s.acquire(); err != nil {
			yield(KV{}, o.errorf("scan", prefix, err))
			return
		}
		defer o.s.release()
		it, err := o.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
		if err != nil {
			yield(KV{}, o.errorf("scan", prefix, err))
			return
		}
		open := true
		defer func() {
			if open {
				_ = it.Close()
			}
		}()
		for ok := it.First(); ok; ok = it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				yield(KV{}, o.errorf("scan", prefix, err))
				return
			}
			if !yield(KV{Key: bytes.Clone(it.Key()), Value: bytes.Clone(v)}, nil) {
				return
			}
		}
		open = false
		if err := it.Close(); err != nil {
			yield(KV{}, o.errorf("scan", prefix, err))
		}
	}
}

// Flush writes the owner's memtable to an SST. Checkpoint does this
// itself; Flush is for tests and benchmarks that want SSTs on disk.
func (o *Owner) Flush() error {
	if err := o.s.acquire(); err != nil {
		return o.errorf("flush", nil, err)
	}
	defer o.s.release()
	if err := o.db.Flush(); err != nil {
		return o.errorf("flush", nil, err)
	}
	return nil
}

func (o *Owner) errorf(op string, key []byte, err error) error {
	if o.remote != nil {
		err = o.remote.explain(err)
	}
	if key == nil {
		return fmt.Errorf("state: owner %q: %s: %w", o.id, op, err)
	}
	return fmt.Errorf("state: owner %q: %s %q: %w", o.id, op, key, err)
}

// prefixEnd returns the smallest key greater than every key starting with
// prefix, or nil when there is none (prefix empty or all 0xff).
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
