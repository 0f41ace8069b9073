package state

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
)

// statCounter counts the Stat calls made through it.
type statCounter struct {
	blobstore.Blobstore
	stats atomic.Int64
}

func (c *statCounter) Stat(ctx context.Context, key string) (blobstore.ObjectInfo, error) {
	c.stats.Add(1)
	return c.Blobstore.Stat(ctx, key)
}

// TestRemoteRestoreOpensTablesWithoutStat: a restored database knows its
// remote tables' sizes from its MANIFEST, so reading every key (which
// opens every table) sends no Stat.
func TestRemoteRestoreOpensTablesWithoutStat(t *testing.T) {
	bs := memstore.New()
	live, cp, objs := checkpointRemote(t, bs, RemoteAllLevels, "op-a")
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	if len(objs) == 0 {
		t.Fatal("no remote objects")
	}
	counted := &statCounter{Blobstore: bs}
	s, err := OpenCheckpoint(t.Context(), copyLocalPart(t, cp), filepath.Join(t.TempDir(), "work"), remoteOpts(counted, "e2", RemoteAllLevels))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := checkRemote(t, s, 1, "op-a"); err != nil {
		t.Fatal(err)
	}
	if n := counted.stats.Load(); n != 0 {
		t.Fatalf("%d Stat calls to read a restored state of %d tables, want 0", n, len(objs))
	}
}
