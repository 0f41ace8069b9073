package miniotest

import "syscall"

// sysProcAttr makes the kernel kill the server when the test binary dies, so
// that a crash or a -timeout panic (which skips t.Cleanup) leaks no process.
// The signal is tied to the OS thread that started the child, not to the
// process; the Go runtime retires an OS thread only when a goroutine locked to
// it with runtime.LockOSThread exits, which nothing in these tests does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
