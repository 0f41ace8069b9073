package savepoint_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/savepoint"
)

func TestALockOfACrashedProcessIsBrokenOnceStale(t *testing.T) {
	forEachStore(t, func(t *testing.T, bs blobstore.Blobstore) {
		mustPut(t, bs, "a", state(2, 10, "a"))
		lo := savepoint.LockOptions{StaleAfter: 300 * time.Millisecond, Wait: -1}
		l, err := savepoint.Acquire(t.Context(), bs, savepoint.Shared, "create savepoint x", lo)
		if err != nil {
			t.Fatal(err)
		}
		l.Crash()
		_, err = savepoint.Delete(t.Context(), bs, "a", savepoint.Options{Grace: -1, Locks: lo})
		if !errors.Is(err, savepoint.ErrLocked) || !strings.Contains(err.Error(), "create savepoint x") {
			t.Fatalf("delete beside a live lock: %v, want ErrLocked naming its holder", err)
		}
		time.Sleep(time.Second + lo.StaleAfter) // filestore and S3 times have 1 s steps
		if _, err := savepoint.Delete(t.Context(), bs, "a", savepoint.Options{Grace: -1, Locks: lo}); err != nil {
			t.Fatalf("delete beside a stale lock: %v", err)
		}
		if err := l.Held(); !errors.Is(err, savepoint.ErrLockLost) {
			t.Fatalf("the crashed holder's lock: %v, want ErrLockLost", err)
		}
		if keys := locks(t, bs); len(keys) != 0 {
			t.Fatalf("locks left: %v", keys)
		}
	})
}

func TestALiveLockIsRefreshedAndNotBroken(t *testing.T) {
	forEachStore(t, func(t *testing.T, bs blobstore.Blobstore) {
		mustPut(t, bs, "a", state(2, 10, "a"))
		lo := savepoint.LockOptions{StaleAfter: 1500 * time.Millisecond, Refresh: 100 * time.Millisecond, Wait: -1}
		l, err := savepoint.Acquire(t.Context(), bs, savepoint.Shared, "read savepoint a", lo)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release()
		time.Sleep(2 * lo.StaleAfter)
		if err := l.Held(); err != nil {
			t.Fatalf("a refreshed lock: %v", err)
		}
		if _, err := savepoint.Delete(t.Context(), bs, "a", savepoint.Options{Grace: -1, Locks: lo}); !errors.Is(err, savepoint.ErrLocked) {
			t.Fatalf("delete beside a refreshed lock: %v, want ErrLocked", err)
		}
		if _, err := savepoint.Stat(t.Context(), bs, "a"); err != nil {
			t.Fatalf("the refused delete changed something: %v", err)
		}
	})
}

func TestAHolderWhoseLockWasBrokenStopsBeforePublishing(t *testing.T) {
	forEachStore(t, func(t *testing.T, bs blobstore.Blobstore) {
		lo := savepoint.LockOptions{StaleAfter: 200 * time.Millisecond, Refresh: time.Hour, Wait: -1}
		f := state(2, 10, "a")
		defer savepoint.SetHookAfterPresence(func() { time.Sleep(lo.StaleAfter) })()
		_, err := savepoint.Put(t.Context(), bs, "a", f.manifest(), f.open, savepoint.Options{Locks: lo})
		if !errors.Is(err, savepoint.ErrLockLost) {
			t.Fatalf("a put that paused past half the staleness: %v, want ErrLockLost", err)
		}
		if ok, _ := bs.Exists(t.Context(), savepoint.LabelKey("a")); ok {
			t.Fatal("it published")
		}
	})
}

func TestSharedLocksDoNotExcludeEachOther(t *testing.T) {
	forEachStore(t, func(t *testing.T, bs blobstore.Blobstore) {
		lo := savepoint.LockOptions{Wait: -1}
		l, err := savepoint.Acquire(t.Context(), bs, savepoint.Shared, "read", lo)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release()
		mustPut(t, bs, "a", state(2, 10, "a")) // a shared lock beside another
		if _, err := savepoint.Acquire(t.Context(), bs, savepoint.Exclusive, "delete", lo); !errors.Is(err, savepoint.ErrLocked) {
			t.Fatalf("exclusive beside shared: %v, want ErrLocked", err)
		}
	})
}

func TestClassNamesEveryKeyOfTheLayout(t *testing.T) {
	for key, want := range map[string]string{
		"savepoints/v1":                     "label",
		"savepoints/v1/x":                   "",
		"savepoints/":                       "",
		savepoint.ContentKey(digestOf(nil)): "content",
		savepoint.ContentPrefix + "abc":     "",
		savepoint.ContentPrefix + strings.ToUpper(digestOf(nil)): "",
		savepoint.LockPrefix + "shared-0123456789abcdef":         "lock",
		savepoint.LockPrefix + "exclusive-0123456789abcdef":      "lock",
		savepoint.LockPrefix + "other-0123456789abcdef":          "",
		savepoint.LockPrefix + "shared-0123":                     "",
		"savepoint-data/x":                                       "",
		"checkpoints/x/checkpoint.json":                          "",
	} {
		if got := savepoint.Class(key); got != want {
			t.Errorf("Class(%q) = %q, want %q", key, got, want)
		}
	}
}
