//go:build !linux

package main

import "os/exec"

// dieWithParent does nothing where the kernel has no parent-death signal:
// the tests' cleanup stops the nodes.
func dieWithParent(*exec.Cmd) {}
