package blobstorage

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// A pointer that does not decode, names an invalid id, or names a record
// that does not exist is damage (ErrCorrupt), for every load that
// follows it; PointerID reads a dangling pointer's id without its record.
func TestADamagedPointerIsCorrupt(t *testing.T) {
	dangling := checkpoint.NewID(99)
	for body, wantNotFound := range map[string]bool{
		`{"id":"` + dangling + `","epoch":1}`: true,
		`{"id":"../../etc","epoch":1}`:        false,
		`{garbage`:                            false,
	} {
		bs := newMem()
		s := newWriter(t, bs, Options{})
		saveState(t, s, checkpoint.NewID(1), checkpoint.StatusCompleted, stateFiles{"op": {"000001.sst": "x"}})
		if err := bs.Put(ctx, keyLatestCompleted, strings.NewReader(body)); err != nil {
			t.Fatal(err)
		}
		r := New(bs, "", Options{})
		_, err := r.PointerRecord(ctx, PointerLatestCompleted)
		if !errors.Is(err, ErrCorrupt) || errors.Is(err, checkpoint.ErrNotFound) != wantNotFound {
			t.Errorf("%s: PointerRecord = %v, want ErrCorrupt (ErrNotFound %v)", body, err, wantNotFound)
		}
		if _, err := r.LoadLatestCompleted(ctx); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: LoadLatestCompleted = %v, want ErrCorrupt", body, err)
		}
		id, err := r.PointerID(ctx, PointerLatestCompleted)
		if wantNotFound && (err != nil || id != dangling) {
			t.Errorf("%s: PointerID = %q, %v, want %s", body, id, err, dangling)
		}
		if !wantNotFound && !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: PointerID = %q, %v, want ErrCorrupt", body, id, err)
		}
		if rec, err := r.PointerRecord(ctx, PointerLatest); err != nil || rec == nil || rec.ID != checkpoint.NewID(1) {
			t.Errorf("%s: the good pointer: %v, %v", body, rec, err)
		}
	}
}

// movingPointer is a store on which the record of from is gone and the
// latest pointer moves on to to as the record is read: a live writer
// saved to and its GC dropped from.
type movingPointer struct {
	blobstore.Blobstore
	from, to string
}

func (m *movingPointer) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if key == recordKey(m.from) {
		if err := m.Blobstore.Put(ctx, keyLatest, strings.NewReader(`{"id":"`+m.to+`","epoch":1}`)); err != nil {
			return nil, err
		}
		return nil, blobstore.ErrNotFound
	}
	return m.Blobstore.Get(ctx, key)
}

// A record that disappears because the pointer moved on while it was read
// is not damage: the load follows the pointer.
func TestALoadFollowsAPointerThatMovedOn(t *testing.T) {
	bs := newMem()
	s := newWriter(t, bs, Options{})
	saveState(t, s, checkpoint.NewID(2), checkpoint.StatusCompleted, stateFiles{"op": {"000001.sst": "x"}})
	if err := bs.Put(ctx, keyLatest, strings.NewReader(`{"id":"`+checkpoint.NewID(1)+`","epoch":1}`)); err != nil {
		t.Fatal(err)
	}
	r := New(&movingPointer{Blobstore: bs, from: checkpoint.NewID(1), to: checkpoint.NewID(2)}, "", Options{})
	if rec, err := r.PointerRecord(ctx, PointerLatest); err != nil || rec == nil || rec.ID != checkpoint.NewID(2) {
		t.Fatalf("PointerRecord = %v, %v, want %s", rec, err, checkpoint.NewID(2))
	}
}
