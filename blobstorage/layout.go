package blobstorage

import (
	"path"
	"strconv"
	"strings"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/savepoint"
)

// The key layout (documented in doc.go). Every key is made and parsed in
// this file and nowhere else (pebble's objstorageprovider keeps its object
// naming in one file for the same reason): a change here is a change of
// the layout, and nothing else in the module spells a key.
const (
	dirCheckpoints     = "checkpoints/"
	dirShared          = "shared/"
	dirPins            = "pins/"
	dirRemote          = RemotePrefix + "/"
	recordName         = "checkpoint.json"
	keyLatest          = "_latest"
	keyLatestCompleted = "_latest-completed"
	keyWriter          = "_writer"
	keyMark            = "_tidemark"
	keyReplication     = "_replication" // a replica's status, written by its replicator
	// dirProbe is where s3store's Probe (blobstore.Prober) writes for a
	// moment, before a writer's first write: Tidemark's, though no layout's.
	dirProbe = "_tidemark_probe/"
)

func recordKey(id string) string { return dirCheckpoints + id + "/" + recordName }

func epochSegment(epoch uint64) string { return "e" + strconv.FormatUint(epoch, 10) }

func privateKey(id string, epoch uint64, owner, rel string) string {
	return path.Join(dirCheckpoints+id, "private", epochSegment(epoch), owner, rel)
}

func sharedKey(id string, epoch uint64, owner, rel string) string {
	return path.Join(dirShared+owner, id+"-"+epochSegment(epoch), rel)
}

// partDir is where worker's part of owner in checkpoint id, saved under
// epoch, lives: its record (partKey) and its private files
// (workerPrivateKey). Under checkpoints/<id>/, so GC treats it as the
// checkpoint's; the worker id makes it a zombie's own.
func partDir(id string, epoch uint64, owner, worker string) string {
	return path.Join(dirCheckpoints+id, "parts", epochSegment(epoch), owner, worker)
}

func partKey(id string, epoch uint64, owner, worker string) string {
	return partDir(id, epoch, owner, worker) + "/part.json"
}

// isPartKey reports whether key, under checkpoints/<id>/, is a part
// document (partKey), not one of a part's files (which end in their
// state-relative paths under files/).
func isPartKey(key string) bool {
	rest, ok := strings.CutPrefix(key, dirCheckpoints)
	if !ok {
		return false
	}
	seg := strings.Split(rest, "/")
	return len(seg) == 6 && seg[1] == "parts" && seg[5] == "part.json"
}

func workerPrivateKey(id string, epoch uint64, owner, worker, rel string) string {
	return path.Join(partDir(id, epoch, owner, worker), "files", rel)
}

// workerSharedKey names an immutable file a worker uploads: like
// sharedKey, with the worker id, so that introducedBy still holds.
func workerSharedKey(id string, epoch uint64, owner, worker, rel string) string {
	return path.Join(dirShared+owner, id+"-"+epochSegment(epoch)+"-"+worker, rel)
}

func pinKey(id, nonce string) string { return dirPins + id + "/" + nonce }

// checkpointOfKey parses a key under checkpoints/: the checkpoint id it
// belongs to and whether it is that checkpoint's record. ok is false for
// keys that are not a valid checkpoint's (not ours: left alone).
func checkpointOfKey(key string) (id string, isRecord, ok bool) {
	rest, found := strings.CutPrefix(key, dirCheckpoints)
	if !found {
		return "", false, false
	}
	id, rest, found = strings.Cut(rest, "/")
	if !found || checkpoint.ValidateID(id) != nil {
		return "", false, false
	}
	return id, rest == recordName, true
}

// epochOfCheckpointFile parses the writer epoch of a file saved under
// checkpoints/<id>/private/e<epoch>/ or checkpoints/<id>/parts/e<epoch>/.
func epochOfCheckpointFile(key string) (uint64, bool) {
	rest, found := strings.CutPrefix(key, dirCheckpoints)
	if !found {
		return 0, false
	}
	seg := strings.SplitN(rest, "/", 4)
	if len(seg) < 4 || (seg[1] != "private" && seg[1] != "parts") {
		return 0, false
	}
	e, found := strings.CutPrefix(seg[2], "e")
	if !found {
		return 0, false
	}
	epoch, err := strconv.ParseUint(e, 10, 64)
	return epoch, err == nil
}

// pinOfKey parses a pin's key: the checkpoint id it pins.
func pinOfKey(key string) (id string, ok bool) {
	rest, found := strings.CutPrefix(key, dirPins)
	if !found {
		return "", false
	}
	id, _, ok = strings.Cut(rest, "/")
	return id, ok && checkpoint.ValidateID(id) == nil
}

// remoteOfKey parses the key of an object of state in remote mode,
// remote/<owner>/<locator>/<name> with a locator "e<epoch>-<suffix>"
// (RemoteGeneration, then the random suffix state adds at every open):
// the epoch of the writer that created it. ok is false for keys without
// such a locator (left alone by GC).
func remoteOfKey(key string) (epoch uint64, ok bool) {
	rest, found := strings.CutPrefix(key, dirRemote)
	if !found {
		return 0, false
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) != 3 || parts[0] == "" || parts[2] == "" {
		return 0, false
	}
	gen, suffix, found := strings.Cut(parts[1], "-")
	digits, isEpoch := strings.CutPrefix(gen, "e")
	if !found || suffix == "" || !isEpoch || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	epoch, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || epoch == 0 {
		return 0, false
	}
	return epoch, true
}

// isSharedKey reports whether key holds an immutable, shared file.
func isSharedKey(key string) bool { return strings.HasPrefix(key, dirShared) }

// introducedBy reports whether the file of owner at key was first uploaded
// by checkpoint id (a private file of id, or a shared file id uploaded),
// rather than referenced from an older checkpoint.
func introducedBy(key, owner, id string) bool {
	return strings.HasPrefix(key, dirCheckpoints+id+"/") || strings.HasPrefix(key, dirShared+owner+"/"+id+"-")
}

// KeyClasses lists every class KeyClass returns but "other", for metrics
// that register their series up front.
var KeyClasses = []string{"record", "part", "private", "shared", "remote", "pointer", "writer", "mark", "pin", "savepoint", "replication"}

// KeyClass names the part of the layout a key belongs to, for metrics and
// logs that count operations per kind of object: "record", "part" (a
// worker's part document; its files are "private" or "shared"),
// "private", "shared", "remote", "pointer", "writer", "mark", "pin",
// "savepoint", "replication" (a replica's status), or "other" for a key
// that is not Tidemark's.
func KeyClass(key string) string {
	switch {
	case key == dirCheckpoints:
		return "record" // the listing of records (loads, GC)
	case key == keyLatest || key == keyLatestCompleted:
		return "pointer"
	case key == keyWriter:
		return "writer"
	case key == keyMark:
		return "mark"
	case key == keyReplication:
		return "replication"
	case strings.HasPrefix(key, dirShared):
		return "shared"
	case strings.HasPrefix(key, dirRemote):
		return "remote"
	case strings.HasPrefix(key, dirPins):
		return "pin"
	case strings.HasPrefix(key, checkpoint.SavepointPrefix), savepoint.Class(key) != "":
		return "savepoint" // a label, or the savepoint area's content and locks
	}
	if _, isRecord, ok := checkpointOfKey(key); ok {
		if isRecord {
			return "record"
		}
		if isPartKey(key) {
			return "part"
		}
		return "private"
	}
	return "other"
}

// keyKind is a class of the layout's grammar (parseKey).
type keyKind int

const (
	kindMark keyKind = iota + 1
	kindWriter
	kindPointer
	kindRecord
	kindPrivate  // checkpoints/<id>/private/e<epoch>/<owner>/<path>
	kindPart     // checkpoints/<id>/parts/e<epoch>/<owner>/<worker>/part.json
	kindPartFile // checkpoints/<id>/parts/e<epoch>/<owner>/<worker>/files/<path>
	kindShared   // shared/<owner>/<id>-e<epoch>[-<worker>]/<path>
	kindRemote   // remote/<owner>/e<epoch>-<nonce>/<pebble object name>
	kindPin      // pins/<id>/<nonce>
	kindSavepoint
	kindProbe       // _tidemark_probe/<32 hex>/<path>: s3store's probe, left while it runs
	kindReplication // _replication: a replica's status (Replicator)
)

// parsedKey is what the layout's grammar says of one key.
type parsedKey struct {
	kind  keyKind
	id    string // the checkpoint a record, file, part, shared file or pin belongs to
	epoch uint64 // the writer epoch in the key (private, part, shared, remote)
}

// parseKey parses key under the full layout grammar (the package doc's
// table): ok is false for any key Tidemark would not have written, such
// as checkpoints/old/notes.txt or shared/team/report.pdf. immutable is
// the Storage's Classify: only files it calls immutable live under
// shared/. This, not KeyClass, decides what a store holds: the identity
// of an unmarked store and what GC plans over.
func parseKey(key string, immutable func(string) bool) (parsedKey, bool) {
	switch key {
	case keyMark:
		return parsedKey{kind: kindMark}, true
	case keyWriter:
		return parsedKey{kind: kindWriter}, true
	case keyLatest, keyLatestCompleted:
		return parsedKey{kind: kindPointer}, true
	case keyReplication:
		return parsedKey{kind: kindReplication}, true
	}
	if blobstore.ValidateKey(key) != nil {
		return parsedKey{}, false
	}
	seg := strings.Split(key, "/")
	switch seg[0] + "/" {
	case dirCheckpoints:
		return parseCheckpointKey(seg[1:])
	case dirShared:
		// shared/<owner>/<id>-e<epoch>[-<worker>]/<path>
		if len(seg) < 4 || !validSegment(seg[1]) {
			return parsedKey{}, false
		}
		id, epoch, ok := parseUpload(seg[2])
		if !ok || !immutable(strings.Join(seg[3:], "/")) {
			return parsedKey{}, false
		}
		return parsedKey{kind: kindShared, id: id, epoch: epoch}, true
	case dirRemote:
		epoch, ok := remoteOfKey(key)
		if !ok || len(seg) != 4 || !pebbleObjectName(seg[3]) {
			return parsedKey{}, false
		}
		return parsedKey{kind: kindRemote, epoch: epoch}, true
	case dirPins:
		// Any nonce: a pin GC failed to honour would cost a restore.
		if len(seg) != 3 || checkpoint.ValidateID(seg[1]) != nil || !validSegment(seg[2]) {
			return parsedKey{}, false
		}
		return parsedKey{kind: kindPin, id: seg[1]}, true
	case dirProbe:
		// _tidemark_probe/<32 hex>/<any key>: the probe's own names
		// (object, race-create-N, back\slash…) are its business.
		if len(seg) < 3 || !isHex(seg[1], 32) {
			return parsedKey{}, false
		}
		return parsedKey{kind: kindProbe}, true
	case checkpoint.SavepointPrefix:
		if len(seg) != 2 || checkpoint.ValidateLabel(seg[1]) != nil {
			return parsedKey{}, false
		}
		return parsedKey{kind: kindSavepoint}, true
	}
	// The savepoint area (content by digest, locks) is package
	// savepoint's layout: a store that received a savepoint copy holds
	// only that, and is Tidemark's.
	if savepoint.Class(key) != "" {
		return parsedKey{kind: kindSavepoint}, true
	}
	return parsedKey{}, false
}

// parseCheckpointKey parses the segments after checkpoints/.
func parseCheckpointKey(seg []string) (parsedKey, bool) {
	if len(seg) < 2 || checkpoint.ValidateID(seg[0]) != nil {
		return parsedKey{}, false
	}
	p := parsedKey{id: seg[0]}
	var ok bool
	switch {
	case len(seg) == 2 && seg[1] == recordName:
		p.kind = kindRecord
		return p, true
	case len(seg) >= 5 && seg[1] == "private":
		// <id>/private/e<epoch>/<owner>/<path>
		p.kind = kindPrivate
		p.epoch, ok = parseEpoch(seg[2])
		return p, ok && validSegment(seg[3])
	case len(seg) >= 6 && seg[1] == "parts":
		// <id>/parts/e<epoch>/<owner>/<worker>/part.json or …/files/<path>
		p.epoch, ok = parseEpoch(seg[2])
		if !ok || !validSegment(seg[3]) || !validSegment(seg[4]) {
			return parsedKey{}, false
		}
		switch {
		case len(seg) == 6 && seg[5] == "part.json":
			p.kind = kindPart
			return p, true
		case len(seg) >= 7 && seg[5] == "files":
			p.kind = kindPartFile
			return p, true
		}
	}
	return parsedKey{}, false
}

// sharedOrigin parses a shared file's key: the checkpoint and epoch of
// its first upload.
func sharedOrigin(key string) (id string, epoch uint64, ok bool) {
	rest, found := strings.CutPrefix(key, dirShared)
	seg := strings.SplitN(rest, "/", 3)
	if !found || len(seg) != 3 {
		return "", 0, false
	}
	return parseUpload(seg[1])
}

// parseUpload parses the segment naming a shared file's first upload,
// <id>-e<epoch> or <id>-e<epoch>-<worker> (ids may contain '-').
func parseUpload(s string) (id string, epoch uint64, ok bool) {
	for i := strings.Index(s, "-e"); i > 0; {
		rest := s[i+2:]
		digits, worker, hasWorker := strings.Cut(rest, "-")
		if e, good := parseEpoch("e" + digits); good && checkpoint.ValidateID(s[:i]) == nil && (!hasWorker || worker != "") {
			return s[:i], e, true
		}
		next := strings.Index(s[i+1:], "-e")
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return "", 0, false
}

// parseEpoch parses epochSegment's e<epoch>, epoch > 0.
func parseEpoch(s string) (uint64, bool) {
	digits, ok := strings.CutPrefix(s, "e")
	if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	e, err := strconv.ParseUint(digits, 10, 64)
	return e, err == nil && e > 0
}

// pebbleObjectName reports whether name is one Pebble gives the objects
// it writes to remote storage: <hash>-<creator>-<file>.sst or .blob,
// possibly with a ref marker's .ref.<creator>.<file> suffix.
func pebbleObjectName(name string) bool {
	base, ref, hasRef := strings.Cut(name, ".ref.")
	if hasRef {
		c, f, ok := strings.Cut(ref, ".")
		if !ok || !isDigits(c) || !isDigits(f) {
			return false
		}
	}
	stem, ok := strings.CutSuffix(base, ".sst")
	if !ok {
		stem, ok = strings.CutSuffix(base, ".blob")
	}
	f := strings.Split(stem, "-")
	return ok && len(f) == 3 && isHex(f[0], 4) && isDigits(f[1]) && isDigits(f[2])
}

func validSegment(s string) bool { return s != "" && blobstore.ValidateKey(s) == nil }

func isDigits(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }

func isHex(s string, n int) bool { return len(s) == n && strings.Trim(s, "0123456789abcdef") == "" }
