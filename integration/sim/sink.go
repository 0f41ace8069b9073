package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/tidemark-io/tidemark/blobstore"
)

// Txn is a sink transaction: a checkpoint id and the writer that opened it.
type Txn struct{ ID, Writer string }

func (t Txn) String() string { return t.ID + "@" + t.Writer }

// Sink is a roll-forward transactional sink in the store (the contract
// of job.Sink): Prepare stages a batch, durable and invisible; Commit
// publishes it by create-if-absent, idempotently; Abort discards a
// staged batch no prepared record names.
type Sink struct {
	bs    blobstore.Blobstore
	world *World
}

func stagedKey(t Txn) string        { return "staged/" + t.String() }
func committedKey(id string) string { return "committed/" + id }

type batch struct {
	Txn      string `json:"txn"`
	From, To int
}

// Prepare stages the output of records [from, to) for txn.
func (s *Sink) Prepare(ctx context.Context, t Txn, from, to int) error {
	return s.bs.Put(ctx, stagedKey(t), bytes.NewReader(encode(batch{Txn: t.String(), From: from, To: to})))
}

// Commit publishes txn's batch. Committing again, from any process,
// succeeds and changes nothing.
func (s *Sink) Commit(ctx context.Context, t Txn) error {
	staged, err := s.read(ctx, stagedKey(t))
	if err != nil {
		return fmt.Errorf("sink: commit %s: %w", t, err)
	}
	_, err = s.bs.PutIfAbsent(ctx, committedKey(t.ID), bytes.NewReader(staged))
	if errors.Is(err, blobstore.ErrPreconditionFailed) {
		have, rerr := s.read(ctx, committedKey(t.ID))
		if rerr != nil {
			return fmt.Errorf("sink: commit %s: %w", t, rerr)
		}
		if !bytes.Equal(have, staged) {
			s.world.Violation("sink: %s committed while another transaction of the id is: %s", t, have)
			return fmt.Errorf("sink: commit %s: another transaction of the id committed", t)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("sink: commit %s: %w", t, err)
	}
	return nil
}

// Abort discards txn's staged batch.
func (s *Sink) Abort(ctx context.Context, t Txn) error {
	return s.bs.Delete(ctx, stagedKey(t))
}

func (s *Sink) read(ctx context.Context, key string) ([]byte, error) {
	rc, err := s.bs.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}
