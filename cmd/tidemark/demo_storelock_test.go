package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tidemark-io/tidemark/blobstorage"
)

// lockedBuffer is a bytes.Buffer safe for the command and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// A node resuming a job whose file store's lock is held by a frozen
// process said nothing for 30 s and, interrupted meanwhile, that the
// last completed checkpoint was none although the store had some.
func TestDemoWaitingForAFileStoreLockSaysSoAndNamesTheStoresCheckpoint(t *testing.T) {
	dir, storeDir := t.TempDir(), t.TempDir()
	store := fileURL(storeDir)
	if _, errOut, code := tm(t, "", demoArgs(dir, store, "--crash-after-records", "14000")...); code != exitCrashed {
		t.Fatalf("crashing demo: exit %d\n%s", code, errOut)
	}
	bs := openURL(t, store)
	last, err := blobstorage.New(bs, t.TempDir(), blobstorage.Options{}).PointerID(t.Context(), blobstorage.PointerLatestCompleted)
	if err != nil || last == "" {
		t.Fatalf("the crashed run left no completed checkpoint: %q, %v", last, err)
	}
	// A frozen writer: the store root's lock, held by another open file.
	f, err := os.Open(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, demoArgs(dir, store), env{stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }})
	}()
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(stderr.String(), "waiting for the lock") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	said := stderr.String()
	cancel()
	code := <-done
	out := stderr.String()
	t.Logf("exit %d, stderr:\n%s", code, out)
	if !strings.Contains(said, "waiting for the lock") || !strings.Contains(said, storeDir) {
		t.Errorf("within 15 s of waiting for the store's lock the demo said:\n%s\nwant that it waits for the lock on %s", said, storeDir)
	}
	if code != exitInterrupted {
		t.Errorf("interrupted while waiting: exit %d, want %d", code, exitInterrupted)
	}
	if strings.Contains(out, "checkpoint is none") || !strings.Contains(out, "the last completed checkpoint is "+last) {
		t.Errorf("interrupted while waiting, the demo said:\n%s\nwant the store's last completed checkpoint %s", out, last)
	}
}
