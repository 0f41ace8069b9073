package filestore_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/filestore"
)

// lockHolderEnv makes the test binary a process that starts a conditional
// write to "jobs/_writer" in the directory it names and, inside the
// write's lock (between its check and its rename), prints "LOCKED" and
// waits forever: a writer frozen at the worst moment.
const lockHolderEnv = "FILESTORE_TEST_LOCK_HOLDER"

func lockHolder(dir string) error {
	s, err := filestore.New(dir)
	if err != nil {
		return err
	}
	filestore.SetBeforeRenameHook(s, func() {
		fmt.Println("LOCKED")
		select {}
	})
	_, err = s.PutIfAbsent(context.Background(), "jobs/_writer", strings.NewReader("zombie"))
	return err
}

// stoppedLockHolder starts a lock holder on dir, waits until it holds the
// lock, SIGSTOPs it, and in t.Cleanup resumes it (SIGCONT), kills it and
// reaps it, all by its PID.
func stoppedLockHolder(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockHolderEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pid := cmd.Process.Pid
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Errorf("SIGCONT %d: %v", pid, err)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Errorf("kill %d: %v", pid, err)
		}
		_ = cmd.Wait() // reap; the error is the SIGKILL
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
	}()
	select {
	case l := <-line:
		if l != "LOCKED" {
			t.Fatalf("lock holder said %q, want LOCKED", l)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("lock holder did not take the lock within 30 s")
	}
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %d: %v", cmd.Process.Pid, err)
	}
	return cmd
}

// returnsWithin runs f and fails the test unless it returns within limit.
func returnsWithin(t *testing.T, limit time.Duration, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("%s still blocked after %v behind a stopped process", what, limit)
		return nil
	}
}

func TestStoppedProcessHoldingTheLockGivesABoundedClearError(t *testing.T) {
	// Finding 7: a SIGSTOPped process holding the directory lock blocked
	// the new writer silently for as long as it stayed stopped.
	dir := t.TempDir()
	stoppedLockHolder(t, dir)
	s, err := filestore.NewWithOptions(dir, filestore.Options{LockTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	writes := map[string]func() error{
		"PutIfAbsent": func() error {
			_, err := s.PutIfAbsent(t.Context(), "jobs/_writer", strings.NewReader("new writer"))
			return err
		},
		"PutIfMatch": func() error {
			// Against the current ETag, so that only the lock stands in
			// the way (a stale one fails before the lock is needed).
			if err := os.WriteFile(filepath.Join(dir, "jobs", "cas"), []byte("v1"), 0o644); err != nil {
				return err
			}
			info, err := s.Stat(t.Context(), "jobs/cas")
			if err != nil {
				return err
			}
			_, err = s.PutIfMatch(t.Context(), "jobs/cas", info.ETag, strings.NewReader("v2"))
			return err
		},
		"Put":    func() error { return s.Put(t.Context(), "jobs/other", strings.NewReader("x")) },
		"Delete": func() error { return s.Delete(t.Context(), "jobs/other") },
	}
	lockPath := filepath.Join(dir, "jobs")
	for name, write := range writes {
		t.Run(name, func(t *testing.T) {
			if name == "Delete" {
				// Delete locks only when the key exists: make it exist.
				if err := os.WriteFile(filepath.Join(lockPath, "other"), []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := returnsWithin(t, 20*time.Second, name, write)
			if !errors.Is(err, filestore.ErrLocked) {
				t.Fatalf("%s: got %v, want ErrLocked", name, err)
			}
			for _, want := range []string{lockPath, "another process"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: error does not say %q: %v", name, want, err)
				}
			}
		})
	}
	// Reads take no lock.
	if _, err := s.Stat(t.Context(), "jobs/other"); err != nil {
		t.Fatalf("Stat behind a stopped lock holder: %v", err)
	}
	if got := blobstoretestKeys(t, s); strings.Contains(strings.Join(got, ","), "_writer") {
		t.Fatalf("the stopped writer's object is visible: %q", got)
	}
}

func TestWaitForTheLockEndsWithTheContext(t *testing.T) {
	// With no lock timeout, cancelling the context (Ctrl-C) still ends the
	// wait at once: the blocked writer ignored SIGTERM before.
	dir := t.TempDir()
	stoppedLockHolder(t, dir)
	s, err := filestore.NewWithOptions(dir, filestore.Options{LockTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	err = returnsWithin(t, 20*time.Second, "PutIfAbsent", func() error {
		_, err := s.PutIfAbsent(ctx, "jobs/_writer", strings.NewReader("new writer"))
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	t.Logf("returned %v after the cancel", time.Since(start)-300*time.Millisecond)
	if ok, err := s.Exists(t.Context(), "jobs/_writer"); err != nil || ok {
		t.Fatalf("Exists = %v, %v after a cancelled write", ok, err)
	}
}

func TestLockIsTakenOnceTheHolderGoesOn(t *testing.T) {
	// The lock is only waited for, not broken: once the stopped holder is
	// resumed and finishes, the waiting writer proceeds and loses the
	// condition to it, as it must.
	dir := t.TempDir()
	holder := stoppedLockHolder(t, dir)
	s := newStore(t, dir)
	done := make(chan error, 1)
	go func() {
		_, err := s.PutIfAbsent(t.Context(), "jobs/_writer", strings.NewReader("new writer"))
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("PutIfAbsent returned %v while the lock was held", err)
	default:
	}
	// Let the holder finish its write: resume it and end its hook by
	// killing it, which releases the lock without the rename.
	if err := syscall.Kill(holder.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := holder.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("PutIfAbsent after the holder died: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("PutIfAbsent still waiting after the holder died")
	}
	if got := get(t, s, "jobs/_writer"); got != "new writer" {
		t.Fatalf("stored %q", got)
	}
}

func blobstoretestKeys(t *testing.T, bs blobstore.Blobstore) []string {
	t.Helper()
	var keys []string
	for info, err := range bs.List(t.Context(), "") {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, info.Key)
	}
	return keys
}

func TestWaitingForTheLockIsSaidAtOnce(t *testing.T) {
	// A frozen holder left the waiting writer silent for the whole lock
	// timeout (30 s by default): it must say at once what it waits for.
	dir := t.TempDir()
	stoppedLockHolder(t, dir)
	var logs syncBuffer
	s, err := filestore.NewWithOptions(dir, filestore.Options{
		LockTimeout: 20 * time.Second,
		Logger:      slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := s.PutIfAbsent(ctx, "jobs/_writer", strings.NewReader("new writer"))
		done <- err
	}()
	lockPath := filepath.Join(dir, "jobs")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "waiting for the lock") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("PutIfAbsent: %v, want context.Canceled", err)
	}
	out := logs.String()
	if !strings.Contains(out, "waiting for the lock") || !strings.Contains(out, lockPath) || !strings.Contains(out, "20s") {
		t.Fatalf("within 10 s of waiting the store said %q; want that it waits for the lock on %s, for up to 20s", out, lockPath)
	}
	if n := strings.Count(out, "waiting for the lock"); n != 1 {
		t.Errorf("said %d times that it waits, want once:\n%s", n, out)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
