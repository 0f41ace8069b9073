package integration

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/integration/miniotest"
	"github.com/tidemark-io/tidemark/s3store"
	"github.com/tidemark-io/tidemark/savepoint"
)

// contentBytes counts the bytes written to the savepoint area's content
// objects of an observed store, and the objects completed.
type contentBytes struct {
	bytes, objects atomic.Int64
	onObject       func(key string) // called after each content object is written
}

func (c *contentBytes) Transferred(op blobstore.Op, key string, n int) {
	if (op == blobstore.OpPut || op == blobstore.OpPutIfAbsent) && strings.HasPrefix(key, savepoint.ContentPrefix) {
		c.bytes.Add(int64(n))
	}
}

func (c *contentBytes) Done(op blobstore.Op, key string, _ int64, _ time.Duration, err error) {
	if (op == blobstore.OpPut || op == blobstore.OpPutIfAbsent) && strings.HasPrefix(key, savepoint.ContentPrefix) && err == nil {
		c.objects.Add(1)
		if c.onObject != nil {
			c.onObject(key)
		}
	}
}

func (c *contentBytes) take() int64 { return c.bytes.Swap(0) }

// churnState writes files state files of size bytes each, random, into
// checkpoint id of src (two owners), as a completed checkpoint; with a
// previous checkpoint prev, it copies prev's files and rewrites changed
// of them instead.
func churnState(t *testing.T, src *checkpoint.FileStorage, id, prev string, files, size, changed int) {
	t.Helper()
	dirs := map[string]string{"op-0": "op-0", "op-1": "op-1"}
	if prev != "" {
		if err := os.CopyFS(src.StateDir(id), os.DirFS(src.StateDir(prev))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range files {
		if prev != "" && i >= changed {
			break
		}
		p := filepath.Join(src.StateDir(id), fmt.Sprintf("op-%d", i%2), fmt.Sprintf("%06d.sst", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		b := make([]byte, size)
		rand.Read(b)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rec := &checkpoint.CheckpointData{ID: id, Timestamp: time.Now().UTC(), Status: checkpoint.StatusCompleted, StateDirs: dirs, TxnID: "t-" + id}
	if err := src.Save(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
}

// An incremental savepoint after 1 % churn uploads about 1 % of the
// bytes, its copy to a store holding the previous one sends about 1 %,
// and the copy restores byte for byte.
func TestIncrementalSavepointAndCopyOnMinIO(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	srv := miniotest.Shared(t)
	up := &contentBytes{}
	east := blobstore.Observe(openBucket(t, srv, srv.NewBucket(t)), up)
	west := blobstore.Observe(openBucket(t, srv, srv.NewBucket(t)), up)
	src := checkpoint.NewFileStorage(t.TempDir())
	const files, size = 100, 256 << 10
	churnState(t, src, checkpoint.NewID(1), "", files, size, 0)
	if _, err := checkpoint.CreateSavepoint(ctx, src, east, "v1"); err != nil {
		t.Fatal(err)
	}
	full := up.take()
	churnState(t, src, checkpoint.NewID(2), checkpoint.NewID(1), files, size, 1)
	if _, err := checkpoint.CreateSavepoint(ctx, src, east, "v2"); err != nil {
		t.Fatal(err)
	}
	incr := up.take()
	if err := checkpoint.CopySavepoint(ctx, east, west, "v1"); err != nil {
		t.Fatal(err)
	}
	first := up.take()
	if err := checkpoint.CopySavepoint(ctx, east, west, "v2"); err != nil {
		t.Fatal(err)
	}
	copied := up.take()
	t.Logf("full %d B, incremental %d B (%.2f%%), copy of v1 %d B, copy of v2 %d B (%.2f%%)",
		full, incr, 100*float64(incr)/float64(full), first, copied, 100*float64(copied)/float64(first))
	if full != files*size || first != full || incr != size || copied != size {
		t.Fatalf("full %d, incremental %d, copies %d and %d; want %d, %d (one file), %d, %d", full, incr, first, copied, files*size, size, files*size, size)
	}
	dst := checkpoint.NewFileStorage(t.TempDir())
	if _, err := checkpoint.RestoreSavepoint(ctx, dst, west, "v2"); err != nil {
		t.Fatal(err)
	}
	sameTree(t, src.StateDir(checkpoint.NewID(2)), dst.StateDir(checkpoint.NewID(2)))
}

// An old-format savepoint (one archive) in MinIO restores, and copies to
// another bucket, stored there by content.
func TestOldFormatSavepointRestoresAndCopiesOnMinIO(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	srv := miniotest.Shared(t)
	east, west := openBucket(t, srv, srv.NewBucket(t)), openBucket(t, srv, srv.NewBucket(t))
	src := checkpoint.NewFileStorage(t.TempDir())
	id := checkpoint.NewID(1)
	churnState(t, src, id, "", 10, 64<<10, 0)
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(checkpoint.ArchiveCheckpoint(ctx, src, id, pw)) }()
	if err := east.Put(ctx, checkpoint.SavepointKey("old"), pr); err != nil {
		t.Fatal(err)
	}
	dst := checkpoint.NewFileStorage(t.TempDir())
	if _, err := checkpoint.RestoreSavepoint(ctx, dst, east, "old"); err != nil {
		t.Fatal(err)
	}
	sameTree(t, src.StateDir(id), dst.StateDir(id))
	if err := checkpoint.CopySavepoint(ctx, east, west, "old"); err != nil {
		t.Fatal(err)
	}
	if info, err := savepoint.Stat(ctx, west, "old"); err != nil || info.Format != savepoint.FormatManifest || info.Files != 10 {
		t.Fatalf("the copy: %+v, %v", info, err)
	}
	dst2 := checkpoint.NewFileStorage(t.TempDir())
	if _, err := checkpoint.RestoreSavepoint(ctx, dst2, west, "old"); err != nil {
		t.Fatal(err)
	}
	sameTree(t, src.StateDir(id), dst2.StateDir(id))
}

// copyChildEnv holds, as JSON, the savepoint copy a re-executed test
// binary performs instead of running tests (see TestMain), printing a
// line per content object written, until it is killed.
const copyChildEnv = "TIDEMARK_SAVEPOINT_COPY_CHILD"

type copyJob struct {
	Endpoint, Region, AccessKey, SecretKey string
	From, To                               string // buckets
	Label                                  string
}

func (j copyJob) open(ctx context.Context, bucket string) (*s3store.Store, error) {
	return s3store.New(ctx, s3store.Options{Bucket: bucket, Endpoint: j.Endpoint, Region: j.Region, PathStyle: true,
		AccessKey: j.AccessKey, SecretKey: j.SecretKey})
}

// copyChild runs the copy of copyChildEnv; the parent kills it mid-way.
func copyChild() int {
	var job copyJob
	if err := json.Unmarshal([]byte(os.Getenv(copyChildEnv)), &job); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	from, err := job.open(ctx, job.From)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	to, err := job.open(ctx, job.To)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var mu sync.Mutex
	c := &contentBytes{onObject: func(key string) {
		mu.Lock()
		fmt.Printf("uploaded %s\n", key)
		mu.Unlock()
	}}
	_, err = savepoint.Copy(ctx, from, blobstore.Observe(to, c), job.Label, savepoint.Options{Concurrency: 2})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// A savepoint copy killed mid-way (SIGKILL, the process gone) publishes
// nothing; run again, it sends only what had not arrived, and then the
// savepoint is whole.
func TestSavepointCopyKilledMidwayResumesOnMinIO(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	srv := miniotest.Shared(t)
	fromBucket, toBucket := srv.NewBucket(t), srv.NewBucket(t)
	from, to := openBucket(t, srv, fromBucket), openBucket(t, srv, toBucket)
	src := checkpoint.NewFileStorage(t.TempDir())
	const files, size = 60, 256 << 10
	churnState(t, src, checkpoint.NewID(1), "", files, size, 0)
	if _, err := checkpoint.CreateSavepoint(ctx, src, from, "v1"); err != nil {
		t.Fatal(err)
	}
	job, _ := json.Marshal(copyJob{Endpoint: srv.Endpoint, Region: srv.Region, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
		From: fromBucket, To: toBucket, Label: "v1"})
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), copyChildEnv+"="+string(job))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	seen := 0
	for seen < files/3 && sc.Scan() {
		if strings.HasPrefix(sc.Text(), "uploaded ") {
			seen++
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	if seen < files/3 {
		t.Fatalf("the child copied %d objects before it ended: %s", seen, stderr.String())
	}
	if ok, err := to.Exists(ctx, checkpoint.SavepointKey("v1")); ok || err != nil {
		t.Fatalf("the killed copy published its manifest (%v)", err)
	}
	arrived := 0
	for o, err := range to.List(ctx, savepoint.ContentPrefix) {
		if err != nil {
			t.Fatal(err)
		}
		if o.Size != size {
			t.Fatalf("%s holds %d bytes, not a whole file", o.Key, o.Size)
		}
		arrived++
	}
	if arrived < seen || arrived == files {
		t.Fatalf("%d objects in the destination after the kill (the child reported %d of %d)", arrived, seen, files)
	}
	up := &contentBytes{}
	st, err := savepoint.Copy(ctx, from, blobstore.Observe(to, up), "v1", savepoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed after %d of %d objects (%d arrived); the second run sent %d objects, %d bytes", seen, files, arrived, st.Uploaded, up.bytes.Load())
	if st.Uploaded != files-arrived || up.bytes.Load() != int64(files-arrived)*size {
		t.Fatalf("the resumed copy sent %d objects (%d bytes), want the %d that had not arrived", st.Uploaded, up.bytes.Load(), files-arrived)
	}
	dst := checkpoint.NewFileStorage(t.TempDir())
	if _, err := checkpoint.RestoreSavepoint(ctx, dst, to, "v1"); err != nil {
		t.Fatal(err)
	}
	sameTree(t, src.StateDir(checkpoint.NewID(1)), dst.StateDir(checkpoint.NewID(1)))
}

// A savepoint created while the only other savepoint referencing its
// content is deleted, concurrently, on MinIO, round after round: the
// create finds most files present and skips them while the delete, which
// cannot see the new manifest yet, judges them unreferenced. With the
// locks no manifest ever names a missing content object; without them
// (savepoint's TestDeleteBesideACreateThatSkippedPresentContent shows
// the same race deterministically) a round leaves one.
func TestConcurrentSavepointCreateAndDeleteOnMinIO(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	srv := miniotest.Shared(t)
	bs := openBucket(t, srv, srv.NewBucket(t))
	src := checkpoint.NewFileStorage(t.TempDir())
	const files, size, rounds = 20, 64 << 10, 12
	churnState(t, src, checkpoint.NewID(1), "", files, size, 0)
	opts := savepoint.Options{Grace: -1, Locks: savepoint.LockOptions{Wait: time.Minute}}
	if _, _, err := checkpoint.CreateSavepointWith(ctx, src, bs, "r1", opts); err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= rounds; i++ {
		churnState(t, src, checkpoint.NewID(uint64(i)), checkpoint.NewID(uint64(i-1)), files, size, 1)
		var wg sync.WaitGroup
		var cerr, derr error
		wg.Go(func() {
			_, _, cerr = checkpoint.CreateSavepointWith(ctx, src, bs, fmt.Sprintf("r%d", i), opts)
		})
		wg.Go(func() {
			_, derr = savepoint.Delete(ctx, bs, fmt.Sprintf("r%d", i-1), opts)
		})
		wg.Wait()
		if cerr != nil || derr != nil {
			t.Fatalf("round %d: create %v, delete %v", i, cerr, derr)
		}
		verdicts, err := savepoint.Scrub(ctx, bs, savepoint.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(verdicts) != 1 || verdicts[0].Damage != nil {
			t.Fatalf("round %d: %+v", i, verdicts)
		}
	}
	for o, err := range bs.List(ctx, savepoint.LockPrefix) {
		t.Fatalf("lock left: %s (%v)", o.Key, err)
	}
}
