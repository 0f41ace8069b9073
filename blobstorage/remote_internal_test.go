package blobstorage

import (
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/checkpoint"
)

func TestRemoteOfKey(t *testing.T) {
	for key, want := range map[string]uint64{
		"remote/op/e7-0123abcd/000012.sst":    7,
		"remote/op/e12-x/a/b.sst":             12,
		"remote/op/e7/000012.sst":             0, // no suffix: not a locator state makes
		"remote/op/g-0123/000012.sst":         0,
		"remote/op/e0-1/000012.sst":           0,
		"remote/op/e-1/000012.sst":            0,
		"remote/op/e1x-1/000012.sst":          0,
		"remote/op/e1-1/":                     0,
		"remote/e1-1":                         0,
		"shared/op/e1-1/x":                    0,
		"remote/op/e99999999999999999999-1/x": 0, // overflows
	} {
		got, ok := remoteOfKey(key)
		if got != want || ok != (want != 0) {
			t.Errorf("remoteOfKey(%q) = %d, %v; want %d", key, got, ok, want)
		}
	}
	if c := KeyClass("remote/op/e7-0123abcd/000012.sst"); c != "remote" {
		t.Errorf("KeyClass of a remote object: %q", c)
	}
}

func TestDecodeRecordChecksRemoteRefs(t *testing.T) {
	base := `{"id":"` + checkpoint.NewID(1) + `","status":"completed","state_dirs":{"op":"op"},"epoch":1,"files":{"op":[]},"remote":`
	if _, err := decodeRecord([]byte(base + `{"op":[{"key":"remote/op/e1-a/1.sst","size":3}]}}`)); err != nil {
		t.Fatalf("a good record: %v", err)
	}
	for what, remote := range map[string]string{
		"unknown owner":      `{"other":[{"key":"remote/other/e1-a/1.sst","size":3}]}`,
		"outside remote/":    `{"op":[{"key":"shared/op/x","size":3}]}`,
		"invalid key":        `{"op":[{"key":"remote/op/../x","size":3}]}`,
		"negative size":      `{"op":[{"key":"remote/op/e1-a/1.sst","size":-1}]}`,
		"listed twice":       `{"op":[{"key":"remote/op/e1-a/1.sst","size":3},{"key":"remote/op/e1-a/1.sst","size":3}]}`,
		"not a list of refs": `{"op":"remote/op/e1-a/1.sst"}`,
	} {
		if _, err := decodeRecord([]byte(base + remote + "}")); err == nil || !strings.Contains(err.Error(), "record") {
			t.Errorf("%s: decoded (%v)", what, err)
		}
	}
}

// An archived remote object's path is its key (remoteArchiveFiles,
// SaveImported).
func TestArchiveRemotePrefixIsTheKeyPrefix(t *testing.T) {
	if archive.RemotePrefix != dirRemote {
		t.Fatalf("archive.RemotePrefix %q, remote objects live under %q", archive.RemotePrefix, dirRemote)
	}
}
