package sim

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A machine crash keeps what was fsynced (file and directory) and changes
// the boot id; a process crash keeps everything; a full disk says ENOSPC;
// a crashed process writes nothing more.
func TestDisk(t *testing.T) {
	for seed := range uint64(20) {
		d := NewDisk("h1", filepath.Join(t.TempDir(), "h1"), seed)
		fsys, _ := d.Boot("p1")
		disk := fsys.(stateFS)
		boot := disk.BootID()
		synced := filepath.Join(d.Root, "synced")
		f, err := disk.OpenFile(synced, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("durable")); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := disk.SyncDir(d.Root); err != nil {
			t.Fatal(err)
		}
		if err := disk.WriteFile(filepath.Join(d.Root, "unsynced"), []byte("maybe"), 0o644); err != nil {
			t.Fatal(err)
		}

		d.Crash(false)
		if err := disk.WriteFile(filepath.Join(d.Root, "late"), []byte("x"), 0o644); !errors.Is(err, syscall.EIO) {
			t.Fatalf("seed %d: a crashed process's write: %v, want EIO", seed, err)
		}
		fsys, _ = d.Boot("p2")
		disk = fsys.(stateFS)
		if b, err := os.ReadFile(filepath.Join(d.Root, "unsynced")); err != nil || string(b) != "maybe" || disk.BootID() != boot {
			t.Fatalf("seed %d: after a process crash: %q, %v, boot %s (was %s)", seed, b, err, disk.BootID(), boot)
		}

		d.Crash(true)
		fsys, _ = d.Boot("p3")
		disk = fsys.(stateFS)
		if disk.BootID() == boot {
			t.Fatalf("seed %d: the boot id did not change in a machine crash", seed)
		}
		if b, err := os.ReadFile(synced); err != nil || string(b) != "durable" {
			t.Fatalf("seed %d: a synced file after a machine crash: %q, %v", seed, b, err)
		}
		if b, err := os.ReadFile(filepath.Join(d.Root, "unsynced")); err == nil && string(b) != "maybe" && string(b) != "\x00\x00\x00\x00\x00" && len(b) != 0 {
			t.Fatalf("seed %d: an unsynced file after a machine crash: %q", seed, b)
		}

		d.Capacity = 10
		err = disk.WriteFile(filepath.Join(d.Root, "big"), []byte("0123456789"), 0o644)
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("seed %d: a write past the capacity: %v, want ENOSPC", seed, err)
		}
	}
}
