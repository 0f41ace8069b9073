package blobstorage

import (
	"context"
	"errors"
	"fmt"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/encrypted"
)

// keyIDOf returns the id of the master key the store encrypts rec's files
// under (Record.EncryptionKeyID): "" when it encrypts none of them (no
// encrypting decorator, or one whose predicate leaves them plain). One
// key serves a whole Storage, so the first encrypted key tells.
func (s *Storage) keyIDOf(rec *Record) string {
	for _, files := range rec.Files {
		for _, f := range files {
			if id := encrypted.KeyIDOf(s.bs, f.Key); id != "" {
				return id
			}
		}
	}
	for _, refs := range rec.Remote {
		for _, r := range refs {
			if id := encrypted.KeyIDOf(s.bs, r.Key); id != "" {
				return id
			}
		}
	}
	return ""
}

// checkKey refuses, before a restore downloads or removes anything, a
// store that cannot decrypt rec's files: it has no key, or another than
// the record names. A record without a key id read through a store with
// a key (a record written before the field, or a plain one) costs one
// short read of its first encrypted file, whose header tells; without a
// key, such a record is taken as plain.
func (s *Storage) checkKey(ctx context.Context, rec *Record) error {
	if err := encrypted.CheckKey(s.bs, rec.EncryptionKeyID, fmt.Sprintf("the files of checkpoint %s", rec.ID)); err != nil || rec.EncryptionKeyID != "" {
		return err
	}
	k, ok := blobstore.As[encrypted.Keyed](s.bs)
	if !ok {
		return nil
	}
	for _, files := range rec.Files {
		for _, f := range files {
			if !k.Encrypts(f.Key) {
				continue
			}
			rc, err := s.bs.GetRange(ctx, f.Key, 0, 1)
			if err == nil {
				rc.Close()
			}
			if errors.Is(err, encrypted.ErrWrongKey) || errors.Is(err, encrypted.ErrNotEncrypted) {
				return err
			}
			return nil // anything else is the download's to report
		}
	}
	return nil
}
