package runner

import (
	"os/exec"
	"sync"
	"testing"
	"time"
)

// slowWriter stands in for the container's stderr while the daemon holds
// it back: every write takes a while.
type slowWriter struct {
	mu sync.Mutex
	n  int
}

func (w *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(400 * time.Millisecond)
	w.mu.Lock()
	w.n += len(p)
	w.mu.Unlock()
	return len(p), nil
}

func (w *slowWriter) written() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

const burstBytes = 400 << 10

func burstCommand() *exec.Cmd {
	return exec.Command("/bin/sh", "-c", "head -c 409600 /dev/zero; exit 0")
}

// TestDrainedOutputKeepsWhatTheAgentWroteBeforeItExited: an agent that
// prints a burst and exits at once, with the output going to a slow
// stderr. exec's own copy (what the runner used) drops what is still in the
// pipe a WaitDelay after the exit; the drained pipe delivers all of it.
func TestDrainedOutputKeepsWhatTheAgentWroteBeforeItExited(t *testing.T) {
	old := &slowWriter{}
	cmd := burstCommand()
	cmd.Stdout = old
	cmd.WaitDelay = processExitWait
	if err := cmd.Run(); err == nil && old.written() == burstBytes {
		t.Log("exec's own copy kept up this time (the machine was fast enough)")
	} else {
		t.Logf("exec's own copy delivered %d of %d bytes (%v)", old.written(), burstBytes, err)
	}

	w := &slowWriter{}
	cmd = burstCommand()
	d, err := attachDrained(cmd, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		d.abandon()
		t.Fatal(err)
	}
	d.started()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if !d.wait(time.Minute) {
		t.Fatal("the drain did not end within a minute")
	}
	if got := w.written(); got != burstBytes {
		t.Fatalf("delivered %d of %d bytes", got, burstBytes)
	}
}
