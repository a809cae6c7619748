package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO or a link to a device where the state file goes: status without a
// daemon answers at once with exit 1 and says what is wrong.
func TestStatusWithoutDaemonRefusesAStateFileThatIsNoRegularFile(t *testing.T) {
	for _, kind := range []string{"fifo", "zero"} {
		t.Run(kind, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, ".aimi")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "swarm-state.json")
			var err error
			if kind == "fifo" {
				err = syscall.Mkfifo(path, 0o600)
			} else {
				err = os.Symlink("/dev/zero", path)
			}
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				code     int
				out, err string
			}
			done := make(chan result, 1)
			go func() {
				var out, errOut bytes.Buffer
				code := Run(context.Background(), []string{"swarm", "status", "--repo", root, "--socket", filepath.Join(root, "no-daemon.sock")},
					Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
				done <- result{code, out.String(), errOut.String()}
			}()
			select {
			case r := <-done:
				if r.code != ExitInvalid || !strings.Contains(r.err, "regular file") {
					t.Fatalf("exit %d (want %d), want the file named as no regular file in:\n%s\n%s", r.code, ExitInvalid, r.out, r.err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("aimi swarm status blocked on the state file")
			}
			if _, err := os.Lstat(path); err != nil {
				t.Fatalf("the state file was moved: %v", err)
			}
		})
	}
}
