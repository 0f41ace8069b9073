package demo

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demofault"
)

// remoteNode is node with the state in remote mode (mode "all" or
// "lower").
func remoteNode(t *testing.T, bs blobstore.Blobstore, mode string) Config {
	cfg := node(t, bs)
	cfg.RemoteState = mode
	return cfg
}

// crashAt runs cfg until its injected crash at offset.
func crashAt(t *testing.T, cfg Config, offset uint64) Result {
	t.Helper()
	res, err := Run(demofault.With(t.Context(), demofault.Faults{CrashAfter: offset}), cfg)
	if !errors.Is(err, ErrCrashed) {
		t.Fatalf("crashing run: %v, want ErrCrashed", err)
	}
	return res
}

// remoteRefs returns the number of remote objects the record of
// checkpoint id references.
func remoteRefs(t *testing.T, cfg Config, id string) int {
	t.Helper()
	rec, err := cfg.Storage.(*blobstorage.Storage).LoadRecord(t.Context(), id)
	if err != nil {
		t.Fatalf("LoadRecord(%s): %v", id, err)
	}
	n := 0
	for _, refs := range rec.Remote {
		n += len(refs)
	}
	return n
}

// TestRemoteStateResumesOnAnEmptyNodeExactlyOnce: in both remote modes,
// a job crashes mid-way and a node with an empty disk resumes it exactly
// once; the checkpoints reference objects under blobstorage.RemotePrefix
// instead of uploading them.
func TestRemoteStateResumesOnAnEmptyNodeExactlyOnce(t *testing.T) {
	for _, mode := range []string{RemoteStateAll, RemoteStateLower} {
		t.Run(mode, func(t *testing.T) {
			bs := fileStore(t)
			crashAt(t, remoteNode(t, bs, mode), 10_200)
			resumed := remoteNode(t, bs, mode)
			res := mustComplete(t, resumed)
			if res.RestoredID == "" || res.StartOffset == 0 || res.StartOffset > 10_200 {
				t.Fatalf("resume %+v: want a restore from a checkpoint at or before the crash", res)
			}
			if len(blobstoretest.ListKeys(t, bs, blobstorage.RemotePrefix+"/")) == 0 {
				t.Fatalf("no object under %s/: the state was not in remote mode", blobstorage.RemotePrefix)
			}
			if mode == RemoteStateAll {
				// Every table is in the store; the demo's state is
				// small, so in lower mode its tables may all be local.
				if n := remoteRefs(t, resumed, res.LastID); n == 0 {
					t.Fatalf("checkpoint %s references no remote object", res.LastID)
				}
				for _, k := range blobstoretest.ListKeys(t, bs, "") {
					if strings.HasSuffix(k, ".sst") && !strings.HasPrefix(k, blobstorage.RemotePrefix+"/") {
						t.Fatalf("checkpoint file %s uploaded: in mode all every table is in the store", k)
					}
				}
			}
		})
	}
}

// TestRemoteStateSwitchingModes: a job started in local mode resumes in
// remote mode (its local tables stay local and are uploaded with the
// checkpoints, new tables go to the store), and a job in remote mode
// resumes with the other level setting.
func TestRemoteStateSwitchingModes(t *testing.T) {
	cases := []struct{ from, to string }{
		{RemoteStateOff, RemoteStateAll},
		{RemoteStateOff, RemoteStateLower},
		{RemoteStateAll, RemoteStateLower},
		{RemoteStateLower, RemoteStateAll},
	}
	for _, c := range cases {
		t.Run(c.from+"-to-"+c.to, func(t *testing.T) {
			bs := fileStore(t)
			crashAt(t, remoteNode(t, bs, c.from), 10_200)
			res := mustComplete(t, remoteNode(t, bs, c.to))
			if res.RestoredID == "" {
				t.Fatalf("resume %+v: want a restore", res)
			}
		})
	}
}

// TestRemoteStateResumedInLocalModeIsRefused: a job whose checkpoint
// holds remote state, resumed in local mode, is refused with
// ErrStateMode before anything in the store changes (the writer role is
// not taken, so the job's writer is not fenced); resumed in remote mode
// it then completes.
func TestRemoteStateResumedInLocalModeIsRefused(t *testing.T) {
	bs := fileStore(t)
	crashAt(t, remoteNode(t, bs, RemoteStateAll), 10_200)
	before := storeContents(t, bs)
	_, err := Run(t.Context(), node(t, bs))
	if !errors.Is(err, ErrStateMode) || !strings.Contains(err.Error(), "--remote-state") {
		t.Fatalf("local resume of remote state: %v, want ErrStateMode naming --remote-state", err)
	}
	if after := storeContents(t, bs); !equalContents(before, after) {
		t.Fatalf("the refused run changed the store")
	}
	mustComplete(t, remoteNode(t, bs, RemoteStateAll))
}

func TestRemoteStateConfigErrors(t *testing.T) {
	cfg := remoteNode(t, fileStore(t), "everything")
	if _, err := Run(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), `"everything"`) {
		t.Fatalf("bad RemoteState: %v", err)
	}
	if _, _, err := ParseRemoteState("lower"); err != nil {
		t.Fatal(err)
	}
}

func storeContents(t *testing.T, bs blobstore.Blobstore) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, k := range blobstoretest.ListKeys(t, bs, "") {
		out[k] = blobstoretest.Get(t, bs, k)
	}
	return out
}

func equalContents(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}
