//go:build !linux

package natstest

import "syscall"

// sysProcAttr has no parent-death signal outside Linux: a test binary killed
// before its cleanups run leaves the server running.
func sysProcAttr() *syscall.SysProcAttr { return nil }
