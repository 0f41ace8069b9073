package natstest

import "syscall"

// sysProcAttr makes the kernel kill the server when the test binary dies, so
// that a crash or a -timeout panic (which skips t.Cleanup) leaks no process.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
