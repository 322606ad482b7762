// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import "syscall"

// sysProcAttr makes the kernel kill a child if the test binary dies without
// running its teardown, so no process outlives the run, and puts each child in
// its own process group, so a Ctrl-C in the terminal reaches only the parent
// (the demo), which then stops the children in order by PID.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
