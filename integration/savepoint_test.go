package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/integration/miniotest"
	"github.com/tidemark-io/tidemark/s3store"
)

func openBucket(t *testing.T, srv *miniotest.Server, bucket string) *s3store.Store {
	t.Helper()
	bs, err := s3store.New(context.Background(), s3store.Options{
		Bucket: bucket, Endpoint: srv.Endpoint, Region: srv.Region, PathStyle: true,
		AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
		PartSize: s3store.MinPartSize,
	})
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

// writeState fills a checkpoint's state directory with a few owners'
// files, one of them larger than a multipart part.
func writeState(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]int{
		"op-0/000001.sst":      12 << 20,
		"op-0/MANIFEST-000001": 300,
		"op-0/OPTIONS-000003":  0,
		"op-1/sub/000002.sst":  1 << 20,
	}
	for rel, size := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, size)
		rand.Read(b)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return map[string]string{"op-0": "op-0", "op-1": "op-1"}
}

// sameTree fails unless every regular file under a and b is byte-identical.
func sameTree(t *testing.T, a, b string) {
	t.Helper()
	read := func(root string) map[string][]byte {
		m := map[string][]byte{}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			m[rel], err = os.ReadFile(p)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ma, mb := read(a), read(b)
	if len(ma) != len(mb) {
		t.Fatalf("%s has %d files, %s has %d", a, len(ma), b, len(mb))
	}
	for rel, da := range ma {
		if !bytes.Equal(da, mb[rel]) {
			t.Fatalf("%s differs between %s and %s", rel, a, b)
		}
	}
}

// TestSavepointAcrossRegionsOnMinIO creates a savepoint in one bucket,
// copies it to another bucket (standing for another region), restores it
// there into an empty directory, and compares every state file.
func TestSavepointAcrossRegionsOnMinIO(t *testing.T) {
	savepointAcrossRegions(t, miniotest.Shared(t), miniotest.Shared(t))
}

// savepointAcrossRegions is the body of the savepoint copy tests: created
// in a bucket of eastSrv, copied to a bucket of westSrv (the same server
// or another implementation), restored from there.
func savepointAcrossRegions(t *testing.T, eastSrv, westSrv *miniotest.Server) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	east := openBucket(t, eastSrv, eastSrv.NewBucket(t))
	west := openBucket(t, westSrv, westSrv.NewBucket(t))

	src := checkpoint.NewFileStorage(t.TempDir())
	id := checkpoint.NewID(1)
	dirs := writeState(t, src.StateDir(id))
	rec := &checkpoint.CheckpointData{
		ID: id, Timestamp: time.Now().UTC(), Status: checkpoint.StatusCompleted,
		Operators: map[string][]byte{"0": []byte("op state")},
		Source:    map[string][]byte{checkpoint.SourceOffsetsKey: []byte("offset=42")},
		StateDirs: dirs, TxnID: "txn-1",
	}
	if err := src.Save(ctx, rec); err != nil {
		t.Fatal(err)
	}
	got, err := checkpoint.CreateSavepoint(ctx, src, east, "before-upgrade")
	if err != nil || got != id {
		t.Fatalf("CreateSavepoint = %q, %v; want %q", got, err, id)
	}
	if err := checkpoint.CopySavepoint(ctx, east, west, "before-upgrade"); err != nil {
		t.Fatalf("CopySavepoint: %v", err)
	}
	labels, err := checkpoint.ListSavepoints(ctx, west)
	if err != nil || len(labels) != 1 || labels[0] != "before-upgrade" {
		t.Fatalf("ListSavepoints(west) = %q, %v", labels, err)
	}

	dst := checkpoint.NewFileStorage(t.TempDir())
	restored, err := checkpoint.RestoreSavepoint(ctx, dst, west, "before-upgrade")
	if err != nil || restored != id {
		t.Fatalf("RestoreSavepoint = %q, %v; want %q", restored, err, id)
	}
	latest, err := dst.LoadLatestCompleted(ctx)
	if err != nil || latest == nil || latest.ID != id {
		t.Fatalf("LoadLatestCompleted after restore = %+v, %v", latest, err)
	}
	if string(latest.Offsets()) != "offset=42" || string(latest.Operators["0"]) != "op state" {
		t.Fatalf("restored record = %+v", latest)
	}
	sameTree(t, src.StateDir(id), dst.StateDir(id))
}
