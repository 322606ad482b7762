package framework

import "syscall"

// sysProcAttr makes the kernel kill a child if the test binary dies without
// running its teardown, so no process outlives the run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
