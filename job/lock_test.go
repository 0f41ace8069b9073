package job_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/job"
	"github.com/tidemark-io/tidemark/job/jobtest"
)

// idleSource has no records: Next waits for ctx, as a quiet log does.
type idleSource struct{}

func (idleSource) Seek(context.Context, []byte) error { return nil }
func (idleSource) Offsets() ([]byte, error)           { return []byte("0"), nil }
func (idleSource) Next(ctx context.Context) ([]job.Record, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// A second Start on a Dir a running job holds, in the same process, is
// refused with ErrDirLocked naming this pid, and touches nothing: the
// first job goes on and stops cleanly. Once it returned, Dir is free.
func TestSecondStartOnSameDirRefused(t *testing.T) {
	bucket := memstore.New()
	sink := job.NewBlobSink(bucket, "out/")
	dir := t.TempDir()
	cfg := func() job.Config {
		return job.Config{
			Storage: node(t, bucket, dir), Dir: dir, Source: &source{n: 1 << 30, batch: 10},
			Processor: summer{}, Sink: sink, EveryRecords: 100, State: smallState,
		}
	}
	first := startUntil(t, cfg(), 300)
	live := filepath.Join(dir, "live")
	before, err := os.ReadDir(live)
	if err != nil {
		t.Fatal(err)
	}
	_, err = job.Start(t.Context(), cfg())
	if !errors.Is(err, job.ErrDirLocked) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second Start: %v, want ErrDirLocked naming pid %d", err, os.Getpid())
	}
	if _, err := job.Run(t.Context(), cfg()); !errors.Is(err, job.ErrDirLocked) {
		t.Fatalf("Run: %v, want ErrDirLocked", err)
	}
	if _, err := os.Stat(live); err != nil || len(before) == 0 {
		t.Fatalf("the refused Start touched the live state: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Second)
	defer cancel()
	res, err := first.Stop(ctx, job.StopOptions{})
	if err != nil {
		t.Fatalf("first job's stop: %v", err)
	}
	checkExactlyOnce(t, jobtest.BlobOutput(t, sink), int(res.Records))
	again, err := job.Start(t.Context(), cfg())
	if err != nil {
		t.Fatalf("Start after the first job returned: %v", err)
	}
	if _, err := again.Stop(ctx, job.StopOptions{}); err != nil {
		t.Fatal(err)
	}
}

// lockHelperEnv makes the test binary a process that holds a Dir.
const lockHelperEnv = "TIDEMARK_JOB_LOCK_HELPER_DIR"

// TestLockHelperProcess is the other process of TestDirLockedByAnotherProcess:
// it runs an idle job on the Dir the env names until killed.
func TestLockHelperProcess(t *testing.T) {
	dir := os.Getenv(lockHelperEnv)
	if dir == "" {
		return // not the helper: nothing to do
	}
	bucket := memstore.New()
	started := make(chan struct{})
	j, err := job.Start(context.Background(), job.Config{
		Storage: node(t, bucket, dir), Dir: dir, Source: idleSource{},
		Processor: summer{}, Sink: job.NewBlobSink(bucket, "out/"), State: smallState,
		Observe: func(e job.Event) {
			if e.Kind == job.EventStart {
				close(started)
			}
		},
	})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	<-started // the live state is open
	fmt.Println("locked")
	_, _ = j.Wait() // until SIGKILL
}

// A Dir another process's job holds is refused with its pid, touching
// nothing; after that process is killed with SIGKILL, the kernel has
// released the lock and a job starts there.
func TestDirLockedByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHelperProcess$")
	cmd.Env = append(os.Environ(), lockHelperEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("helper: %q %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()

	bucket := memstore.New()
	cfg := job.Config{
		Storage: node(t, bucket, dir), Dir: dir, Source: idleSource{},
		Processor: summer{}, Sink: job.NewBlobSink(bucket, "out/"), State: smallState,
	}
	_, err = job.Start(t.Context(), cfg)
	if !errors.Is(err, job.ErrDirLocked) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("Start on a Dir the helper holds: %v, want ErrDirLocked naming pid %d", err, cmd.Process.Pid)
	}
	if _, err := os.Stat(filepath.Join(dir, "live")); err != nil {
		t.Fatalf("the refused Start touched the helper's live state: %v", err)
	}

	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed = true
	j, err := job.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Start after the holder was killed: %v", err)
	}
	if _, err := j.Stop(t.Context(), job.StopOptions{}); err != nil {
		t.Fatal(err)
	}
}
