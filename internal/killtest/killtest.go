// Package killtest runs the child process of a kill test: the test binary
// run again with one helper test selected, which appends and prints a line
// "ack <base> <next>" for every batch it acknowledged, until the parent
// kills it with SIGKILL and checks that every acknowledged batch is there.
// log's kill tests and log/remotetest's tiered kill harness use it.
//
//	child := killtest.Start(t, "TestKillHelperProcess", "PARTLOG_KILL_CHILD_DIR="+dir)
//	for line := range child.Lines {
//		if next, ok := killtest.RecordAck(t, round, line, acked); ok && next > stopAt {
//			child.Kill()
//		}
//	}
//	child.Wait()
package killtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Child is a kill test's child process, its standard output read line by
// line.
type Child struct {
	cmd *exec.Cmd
	// Lines are the child's output lines; closed when its output ends.
	Lines  <-chan string
	reader sync.WaitGroup
}

// Kill sends the child SIGKILL.
func (c *Child) Kill() { _ = c.cmd.Process.Signal(syscall.SIGKILL) }

// Wait waits until the child's output has been read to its end and the
// child has exited.
func (c *Child) Wait() {
	c.reader.Wait()
	_ = c.cmd.Wait()
}

// KillAfter hands each of the child's output lines to line, sends the
// child SIGKILL once delay has passed (unless its output ended before),
// and returns when the child's output has been read to its end and the
// child has exited.
func (c *Child) KillAfter(delay time.Duration, line func(string)) {
	timer := time.NewTimer(delay)
	defer timer.Stop()
	for {
		select {
		case l, ok := <-c.Lines:
			if !ok {
				c.Wait()
				return
			}
			line(l)
		case <-timer.C:
			c.Kill()
		}
	}
}

// Start runs the test binary again with -test.run selecting the test named
// helper and env added to its environment, its standard error going to the
// test's.
func Start(t testing.TB, helper string, env ...string) *Child {
	t.Helper()
	c := &Child{cmd: exec.Command(os.Args[0], "-test.run=^"+helper+"$", "-test.count=1")}
	c.cmd.Env = append(os.Environ(), env...)
	stdout, err := c.cmd.StdoutPipe()
	require.NoError(t, err)
	c.cmd.Stderr = os.Stderr
	require.NoError(t, c.cmd.Start())
	lines := make(chan string, 1024)
	c.Lines = lines
	c.reader.Add(1)
	go func() {
		defer c.reader.Done()
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return c
}

// RecordAck reads the child's line "ack <base> <next>" (the batch at base
// acknowledged, the log end next) into acked and returns next. Any other
// line gives ok false; a line starting with "error" (the child's report of
// a failure) fails the test, as does an offset acknowledged twice with
// different ends.
func RecordAck(t testing.TB, round int, line string, acked map[int64]int64) (next int64, ok bool) {
	t.Helper()
	var base int64
	if _, err := fmt.Sscanf(line, "ack %d %d", &base, &next); err != nil {
		require.False(t, strings.HasPrefix(line, "error"), "round %d: child: %s", round, line)
		return 0, false
	}
	if prev, ok := acked[base]; ok {
		require.Equal(t, prev, next, "round %d: offset %d acknowledged twice, with different ends", round, base)
	}
	acked[base] = next
	return next, true
}
