package blobstorage

import (
	"path"
	"strconv"
	"strings"

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
var KeyClasses = []string{"record", "part", "private", "shared", "remote", "pointer", "writer", "mark", "pin", "savepoint"}

// KeyClass names the part of the layout a key belongs to, for metrics and
// logs that count operations per kind of object: "record", "part" (a
// worker's part document; its files are "private" or "shared"),
// "private", "shared", "remote", "pointer", "writer", "mark", "pin",
// "savepoint", or "other" for a key that is not Tidemark's.
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
