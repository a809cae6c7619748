package swarmmode

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"sync"
	"time"

	containertypes "github.com/docker/docker/api/types/container"

	"github.com/aimi-tools/swarm/internal/ctxutil"
)

const (
	// captureMaxBytes bounds the output a stop keeps of one task: past it
	// the oldest lines are dropped (the daemon journals lines as they
	// come, so only a reader starting late from the beginning misses
	// them).
	captureMaxBytes = 4 << 20
	// captureMaxFrame bounds one log message; the engine splits lines at
	// 16 KiB, so a larger frame means the stream is not what it seems.
	captureMaxFrame = 1 << 20
	// captureFirst is how long Stop waits for the capture's first line
	// before it ends the task, so that the subscription reaches the node
	// while the container is still there. A task that printed nothing
	// costs this much.
	captureFirst = 2 * time.Second
	// captureQuiet and captureLinger: after the task ended, the capture
	// reads on until no line came for captureQuiet, at most captureLinger
	// (the cluster never ends a followed log stream by itself).
	captureQuiet  = 750 * time.Millisecond
	captureLinger = 5 * time.Second
)

// capture is a task's log read as it is written, from before Stop ends the
// task until it has ended: the cluster deletes a stopped job's task and its
// container moments after it ends, and with them the only copy of its
// output.
type capture struct {
	cancel context.CancelFunc
	first  chan struct{} // closed at the first frame or when reading ends
	ended  chan struct{} // closed when the reading goroutine returned
	done   chan struct{} // closed when the capture holds all it will

	mu        sync.Mutex
	frames    []capFrame
	size      int
	truncated bool
	err       error // why reading ended early, if it did
	lastAt    time.Time
	gotFirst  bool
	// Per stream: the newest timestamp kept, and hashes of the frames kept
	// at exactly that time. The node replays a followed task's whole log
	// each time the task's state changes, so anything older, or the same
	// frame again, is a repeat.
	newest [3]time.Time
	atNew  [3][]uint64
}

type capFrame struct {
	stream  byte
	ts      time.Time
	payload []byte // timestamp, space, text
}

// startCapture follows the task's log (all of it, timestamps on) until
// finish or abort.
func (e *Engine) startCapture(ctx context.Context, taskID string) *capture {
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := &capture{cancel: cancel, first: make(chan struct{}), ended: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.ended)
		defer c.markFirst()
		rc, err := e.cli.TaskLogs(cctx, taskID, containertypes.LogsOptions{ShowStdout: true, ShowStderr: true, Timestamps: true, Follow: true, Tail: "all"})
		if err != nil {
			c.fail(fmt.Errorf("follow the logs of task %s: %w", taskID, err))
			return
		}
		defer rc.Close()
		if err := c.read(rc); err != nil && cctx.Err() == nil {
			c.fail(err)
		}
	}()
	return c
}

func (c *capture) markFirst() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.gotFirst {
		c.gotFirst = true
		close(c.first)
	}
}

func (c *capture) fail(err error) {
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
}

// read parses the multiplexed stream: an 8-byte header (stream, 3 zero
// bytes, big-endian size) before each message.
func (c *capture) read(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var h [8]byte
	for {
		if _, err := io.ReadFull(br, h[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read a log frame: %w", err)
		}
		n := binary.BigEndian.Uint32(h[4:])
		if n > captureMaxFrame {
			return fmt.Errorf("log frame of %d bytes: more than %d", n, captureMaxFrame)
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(br, p); err != nil {
			return fmt.Errorf("read a log frame: %w", err)
		}
		if h[0] == 1 || h[0] == 2 {
			c.add(h[0], p)
		}
		c.markFirst()
	}
}

func (c *capture) add(stream byte, p []byte) {
	ts := frameTime(p)
	sum := fnv.New64a()
	_, _ = sum.Write(p)
	key := sum.Sum64()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastAt = time.Now()
	switch {
	case ts.Before(c.newest[stream]):
		return
	case ts.Equal(c.newest[stream]):
		for _, k := range c.atNew[stream] {
			if k == key {
				return
			}
		}
		c.atNew[stream] = append(c.atNew[stream], key)
	default:
		c.newest[stream], c.atNew[stream] = ts, append(c.atNew[stream][:0], key)
	}
	c.frames = append(c.frames, capFrame{stream: stream, ts: ts, payload: p})
	c.size += len(p) + 8
	if c.size > captureMaxBytes {
		drop := 0
		for c.size > captureMaxBytes*3/4 {
			c.size -= len(c.frames[drop].payload) + 8
			drop++
		}
		c.frames = append([]capFrame(nil), c.frames[drop:]...)
		c.truncated = true
	}
}

// frameTime is the timestamp a frame's payload starts with.
func frameTime(p []byte) time.Time {
	i := bytes.IndexByte(p[:min(len(p), 64)], ' ')
	if i < 0 {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, string(p[:i]))
	if err != nil {
		return time.Time{}
	}
	return t
}

// waitFirst waits until the capture has its first frame (the subscription
// reached the node), at most captureFirst.
func (c *capture) waitFirst(ctx context.Context) {
	t := time.NewTimer(captureFirst)
	defer t.Stop()
	select {
	case <-c.first:
	case <-t.C:
	case <-ctx.Done():
	}
}

// finish reads on until the stream is quiet (the task has ended), then
// closes it; the capture then holds all it will.
func (c *capture) finish(ctx context.Context) {
	start := time.Now()
	for time.Since(start) < captureLinger && ctx.Err() == nil {
		c.mu.Lock()
		quiet := time.Since(c.lastAt) >= captureQuiet && time.Since(start) >= captureQuiet
		c.mu.Unlock()
		select {
		case <-c.ended:
			quiet = true
		default:
		}
		if quiet {
			break
		}
		_ = ctxutil.Sleep(ctx, 50*time.Millisecond)
	}
	c.abort()
}

// abort ends the capture with what it holds.
func (c *capture) abort() {
	c.cancel()
	<-c.ended
	select {
	case <-c.done:
	default:
		close(c.done)
	}
}

// complete reports whether the capture holds the task's whole output.
func (c *capture) complete() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err == nil && !c.truncated
}

// open is the captured log as the engine would answer it: the last tail
// frames (all for a negative tail) at or after since. It waits until the
// capture is done.
func (c *capture) open(ctx context.Context, since time.Time, tail int) (io.ReadCloser, error) {
	select {
	case <-c.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var sel []capFrame
	for _, f := range c.frames {
		if since.IsZero() || !f.ts.Before(since) {
			sel = append(sel, f)
		}
	}
	if tail >= 0 && len(sel) > tail {
		sel = sel[len(sel)-tail:]
	}
	var b bytes.Buffer
	for _, f := range sel {
		var h [8]byte
		h[0] = f.stream
		binary.BigEndian.PutUint32(h[4:], uint32(len(f.payload)))
		b.Write(h[:])
		b.Write(f.payload)
	}
	return io.NopCloser(&b), nil
}
