package container

import (
	"bytes"
	"context"
	"fmt"

	"github.com/aimi-tools/swarm/engine"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
)

// WriteStdin writes one line (a trailing newline is added if missing) to the
// container's stdin through a fresh attach, then closes the attach
// connection. It never half-closes (CloseWrite): on a container created with
// StdinOnce=false that would close the container's stdin for good; closing
// the whole attach connection leaves stdin open for a later attach. The line
// must not contain a newline inside and must fit MaxLineBytes; it is never
// logged (a task-request may carry secrets).
func (d *Docker) WriteStdin(ctx context.Context, id string, line []byte) error {
	return d.WriteStdinLines(ctx, id, [][]byte{line})
}

// WriteStdinLines is WriteStdin of several lines, in order, through one
// attach (engine.Handover): a warm sandbox's claim lines and its
// task-request. Each line is checked as WriteStdin checks one.
func (d *Docker) WriteStdinLines(ctx context.Context, id string, lines [][]byte) error {
	var buf []byte
	for _, line := range lines {
		line = bytes.TrimSuffix(line, []byte("\n"))
		if bytes.IndexByte(line, '\n') >= 0 {
			return fmt.Errorf("write stdin of container %s: the line contains a newline; send one line per call", id)
		}
		if len(line) > engine.MaxLineBytes {
			return fmt.Errorf("write stdin of container %s: line of %d bytes exceeds %d", id, len(line), engine.MaxLineBytes)
		}
		buf = append(append(buf, line...), '\n')
	}
	// The attach ignores ctx once connected: bound it, or an engine that
	// holds the container locked hangs the task-request for good.
	hr, err := bounded(ctx, engineCallTimeout, func(ctx context.Context) (types.HijackedResponse, error) {
		return d.cli.ContainerAttach(ctx, id, container.AttachOptions{Stream: true, Stdin: true})
	}, func(hr types.HijackedResponse) { hr.Close() })
	if err != nil {
		return fmt.Errorf("attach stdin of container %s: %w", id, notFound(err))
	}
	defer hr.Close()
	// The hijacked connection ignores ctx: close it when ctx ends so a
	// stuck write returns.
	stop := context.AfterFunc(ctx, hr.Close)
	defer stop()
	if _, err := hr.Conn.Write(buf); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return fmt.Errorf("write stdin of container %s: %w", id, err)
	}
	return nil
}
