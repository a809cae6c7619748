package dockertest

import (
	"bytes"
	"context"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
)

// RunWithStdin runs the created container id the way the daemon runs a
// runner: stdin attached before the start and kept open, line written to
// it, then the exit waited for. It returns the exit code and what the
// container wrote to stdout and stderr.
func RunWithStdin(t testing.TB, ctx context.Context, cli *client.Client, id string, line []byte) (code int64, stdout, stderr string) {
	t.Helper()
	att, err := cli.ContainerAttach(ctx, id, container.AttachOptions{Stream: true, Stdin: true})
	if err != nil {
		t.Fatalf("attach to %.12s: %v", id, err)
	}
	defer att.Close()
	waitC, errC := cli.ContainerWait(ctx, id, container.WaitConditionNextExit)
	if err := cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		t.Fatalf("start %.12s: %v", id, err)
	}
	if _, err := att.Conn.Write(append(line, '\n')); err != nil {
		t.Fatalf("write to the stdin of %.12s: %v", id, err)
	}
	select {
	case w := <-waitC:
		code = w.StatusCode
	case err := <-errC:
		t.Fatalf("wait for %.12s: %v", id, err)
	}
	logs, err := cli.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatalf("logs of %.12s: %v", id, err)
	}
	defer logs.Close()
	var out, errOut bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &errOut, logs); err != nil {
		t.Fatalf("read the logs of %.12s: %v", id, err)
	}
	return code, out.String(), errOut.String()
}
