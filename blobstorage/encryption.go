package blobstorage

import (
	"fmt"

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
// the record names. A record without a key id (plain, or written before
// the field) is not refused here.
func (s *Storage) checkKey(rec *Record) error {
	return encrypted.CheckKey(s.bs, rec.EncryptionKeyID, fmt.Sprintf("the files of checkpoint %s", rec.ID))
}
