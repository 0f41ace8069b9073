package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/integration/miniotest"
	"github.com/tidemark-io/tidemark/savepoint"
	"github.com/tidemark-io/tidemark/state"
)

// BenchmarkInspect times `tidemark inspect` (the CLI, as an operator runs
// it) on a checkpoint and on a savepoint of TIDEMARK_BENCH_STATE_MIB MiB
// (default 256) of state in remote mode on MinIO, from the command's start
// to its listing of the first keys:
//
//	TIDEMARK_MINIO=process TIDEMARK_BENCH_STATE_MIB=4096 go test -run '^$' -bench BenchmarkInspect -benchtime=1x -timeout 60m ./integration/
func BenchmarkInspect(b *testing.B) {
	stateMiB := envInt(b, "TIDEMARK_BENCH_STATE_MIB", 256)
	const valueSize = 1024
	ids := []string{"op-0", "op-1"}
	keysPerOwner := uint64(stateMiB) << 20 / valueSize / uint64(len(ids))
	ctx := context.Background()
	srv := miniotest.Shared(b)
	bucket := srv.NewBucket(b)
	raw, _ := openCountedBucket(b, srv, bucket, 0)
	bs, err := blobstore.WithPrefix(raw, jobPrefix)
	if err != nil {
		b.Fatal(err)
	}
	w := blobstorage.New(bs, b.TempDir(), blobstorage.Options{})
	epoch, err := w.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	live := filepath.Join(b.TempDir(), "live")
	st, err := state.Open(live, state.Options{MemTableSize: 64 << 20, CacheSize: 64 << 20, Remote: state.RemoteOptions{
		Store: bs, Prefix: blobstorage.RemotePrefix, Generation: blobstorage.RemoteGeneration(epoch),
	}})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	w.UseRemote(st.CheckpointRemote())
	took := buildBenchState(b, st, live, ids, keysPerOwner, valueSize)
	id := checkpoint.NewID(1)
	dirs, err := st.Checkpoint(ctx, w.StateDir(id))
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Save(ctx, completedRecord(id, dirs)); err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	if _, _, err := checkpoint.CreateSavepointWith(ctx, w, bs, "big", savepoint.Options{}); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d MiB of remote state built in %v, its savepoint created in %v", stateMiB, took.Round(time.Second), time.Since(t0).Round(time.Second))

	bin := buildTidemark(ctx, b)
	store := fmt.Sprintf("s3://%s/%s?endpoint=%s&path_style=true&region=%s", bucket, jobPrefix, srv.Endpoint, srv.Region)
	fmt.Printf("tidemark inspect of %d MiB of state in remote mode on MinIO, from the command's start to its listing:\n| what | time |\n|---|---|\n", stateMiB)
	for _, name := range []string{"latest-completed", "big"} {
		cmd := exec.CommandContext(ctx, bin, "inspect", name, "--limit", "10", "--store", store)
		cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+srv.AccessKey, "AWS_SECRET_ACCESS_KEY="+srv.SecretKey)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		elapsed := time.Since(start)
		if err != nil || !strings.Contains(string(out), "read in place") || strings.Count(string(out), "\n  op-") != 10 {
			b.Fatalf("tidemark inspect %s: %v\n%s", name, err, out)
		}
		kind := "checkpoint"
		if name == "big" {
			kind = "savepoint"
		}
		fmt.Printf("| %s (%s) | %.2f s |\n", kind, name, elapsed.Seconds())
	}
}
