package acpclient

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// An agent can make any file in its workspace (a FIFO, a file of many GiB)
// and then ask to read it: the answer must come, bounded.
func TestReadTextFileRefusesFIFOsAndFilesOverTheCap(t *testing.T) {
	c, ws := newTestClient(t, "allow")
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	big, err := os.Create(filepath.Join(ws, "big"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(MaxReadTextFileBytes + 1); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	big.Close()
	for _, name := range []string{"big", "fifo"} {
		done := make(chan error, 1)
		go func() {
			_, err := c.ReadTextFile(context.Background(), acp.ReadTextFileRequest{SessionId: "s", Path: filepath.Join(ws, name)})
			done <- err
		}()
		select {
		case err := <-done:
			wantInvalidParams(t, err)
		case <-time.After(5 * time.Second):
			t.Fatalf("reading %s blocked", name)
		}
	}
}
