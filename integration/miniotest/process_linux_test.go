package miniotest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProcessServerDiesWithTestBinary kills a test binary that has a
// process-mode server running, without giving it a chance to clean up (as
// the -timeout panic or a crash would), and checks the server goes too.
func TestProcessServerDiesWithTestBinary(t *testing.T) {
	if _, err := binaryPath(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperStartProcessAndHang$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1", EnvEndpoint+"=")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := 0
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MINIO_PID="); ok {
			pid, _ = strconv.Atoi(v)
			break
		}
	}
	if pid == 0 {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("helper did not report a MinIO pid")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	deadline := time.Now().Add(10 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			// Do not leave it behind: this pid is the one the helper started.
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("MinIO pid %d still running 10s after its test binary was killed", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestHelperStartProcessAndHang is the child of
// TestProcessServerDiesWithTestBinary; TestMain leaves it out of normal
// runs.
func TestHelperStartProcessAndHang(t *testing.T) {
	s := startProcessT(t)
	fmt.Printf("MINIO_PID=%d\n", s.PID())
	time.Sleep(time.Minute) // killed by the parent long before
}

// processGone reports whether pid no longer runs: it does not exist, or it
// is a zombie waiting for a reaper that is not its parent's business.
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name: "pid (comm) S ...".
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] == 'Z'
	}
	return false
}
