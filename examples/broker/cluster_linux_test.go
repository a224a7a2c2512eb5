package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill the node with SIGKILL when the test
// process ends, also when it dies without cleaning up (a test timeout's
// panic), so no broker outlives its test.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
