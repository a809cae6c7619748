package runner

import (
	"io"
	"os"
	"os/exec"
	"time"
)

// drainedOutput gives a command one pipe for its stdout and stderr and
// copies it to w with a goroutine of ours, instead of exec's own copy,
// which Wait cuts off WaitDelay after the process exits. The agent's
// output goes to the container's stderr, which the daemon holds back while
// it journals a burst: what was still in the pipe when the agent exited
// must go out too, not be dropped after a second.
type drainedOutput struct {
	pr, pw *os.File
	copied chan struct{}
}

func attachDrained(cmd *exec.Cmd, w io.Writer) (*drainedOutput, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	d := &drainedOutput{pr: pr, pw: pw, copied: make(chan struct{})}
	go func() {
		defer close(d.copied)
		_, _ = io.Copy(w, pr)
	}()
	return d, nil
}

// started closes our copy of the write end once the child holds its own,
// so the copy ends when the last process holding the pipe is gone.
func (d *drainedOutput) started() { d.pw.Close() }

// abandon releases the pipe of a command that never started.
func (d *drainedOutput) abandon() {
	d.pw.Close()
	d.pr.Close()
}

// wait waits, once every process holding the pipe is gone (the caller
// kills the process group first), until what is left in it reached w, at
// most limit; it reports whether all of it did.
func (d *drainedOutput) wait(limit time.Duration) bool {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-d.copied:
		d.pr.Close()
		return true
	case <-t.C:
		d.pr.Close()
		return false
	}
}
