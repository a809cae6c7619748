package acpclient

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
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

// fs/write_text_file onto a FIFO the agent made must answer, not wait for
// a reader that never comes.
func TestWriteTextFileRefusesAFIFO(t *testing.T) {
	c, ws := newTestClient(t, "allow")
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.WriteTextFile(context.Background(), acp.WriteTextFileRequest{SessionId: "s", Path: filepath.Join(ws, "fifo"), Content: "x"})
		done <- err
	}()
	select {
	case err := <-done:
		wantInvalidParams(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("writing onto a FIFO blocked")
	}
	if err := c.root.WriteFile("ok.txt", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteTextFile(context.Background(), acp.WriteTextFileRequest{SessionId: "s", Path: filepath.Join(ws, "ok.txt"), Content: "x"}); err != nil {
		t.Fatalf("write over a regular file: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "ok.txt")); string(b) != "x" {
		t.Fatalf("ok.txt = %q, want x", b)
	}
}

// The agent's outputByteLimit is its wish, not the runner's memory.
func TestTerminalOutputLimitIsCappedWhateverTheAgentAsks(t *testing.T) {
	c, _ := newTestClient(t, "allow")
	ctx := context.Background()
	n := MaxOutputByteLimit + 1<<20
	term, err := c.CreateTerminal(ctx, acp.CreateTerminalRequest{SessionId: "s", Command: "head", Args: []string{"-c", strconv.Itoa(n), "/dev/zero"}, OutputByteLimit: acp.Ptr(1 << 40)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitForTerminalExit(ctx, acp.WaitForTerminalExitRequest{SessionId: "s", TerminalId: term.TerminalId}); err != nil {
		t.Fatal(err)
	}
	out, err := c.TerminalOutput(ctx, acp.TerminalOutputRequest{SessionId: "s", TerminalId: term.TerminalId})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Output) > MaxOutputByteLimit || !out.Truncated {
		t.Fatalf("output of %d bytes (truncated %v), want at most %d and truncated", len(out.Output), out.Truncated, MaxOutputByteLimit)
	}
}

// Each terminal keeps output and a process: an agent that never releases
// them gets a clear refusal past maxTerminals, and a place once it does.
func TestTerminalsAreBoundedUntilReleased(t *testing.T) {
	c, _ := newTestClient(t, "allow")
	ctx := context.Background()
	var ids []string
	for range maxTerminals {
		term, err := c.CreateTerminal(ctx, acp.CreateTerminalRequest{SessionId: "s", Command: "sleep", Args: []string{"60"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, term.TerminalId)
	}
	_, err := c.CreateTerminal(ctx, acp.CreateTerminalRequest{SessionId: "s", Command: "sleep", Args: []string{"60"}})
	wantInvalidParams(t, err)
	if _, err := c.ReleaseTerminal(ctx, acp.ReleaseTerminalRequest{SessionId: "s", TerminalId: ids[0]}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTerminal(ctx, acp.CreateTerminalRequest{SessionId: "s", Command: "true"}); err != nil {
		t.Fatalf("create after a release: %v", err)
	}
}
