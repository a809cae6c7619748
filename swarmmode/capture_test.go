package swarmmode

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"strings"
	"testing"
	"time"
)

func frameBytes(stream byte, ts time.Time, text string) []byte {
	p := ts.UTC().Format(time.RFC3339Nano) + " " + text + "\n"
	var h [8]byte
	h[0] = stream
	binary.BigEndian.PutUint32(h[4:], uint32(len(p)))
	return append(h[:], p...)
}

func texts(t *testing.T, rc io.ReadCloser) []string {
	t.Helper()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for len(b) >= 8 {
		n := binary.BigEndian.Uint32(b[4:8])
		p := string(b[8 : 8+n])
		_, text, _ := strings.Cut(strings.TrimSuffix(p, "\n"), " ")
		out = append(out, string(rune('0'+b[0]))+":"+text)
		b = b[8+n:]
	}
	return out
}

// The node replays a followed task's whole log on each of its state
// changes: the capture keeps every line once, in order, including two
// frames of one long line that share a timestamp, and answers since and
// tail as the engine does.
func TestCaptureDropsReplaysAndAnswersSinceAndTail(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Millisecond) }
	var stream bytes.Buffer
	first := [][]byte{
		frameBytes(1, at(1), "a"), frameBytes(2, at(2), "e1"), frameBytes(1, at(3), "long part 1"),
		frameBytes(1, at(3), "long part 2"),
	}
	for _, f := range first {
		stream.Write(f)
	}
	for _, f := range first { // the replay
		stream.Write(f)
	}
	stream.Write(frameBytes(1, at(4), "terminated"))
	stream.Write(frameBytes(1, at(4), "terminated")) // one more replay's last line
	c := &capture{first: make(chan struct{}), ended: make(chan struct{}), done: make(chan struct{}), cancel: func() {}}
	if err := c.read(&stream); err != nil {
		t.Fatal(err)
	}
	close(c.ended)
	c.abort()
	ctx := context.Background()
	all, _ := c.open(ctx, time.Time{}, -1)
	want := "1:a|2:e1|1:long part 1|1:long part 2|1:terminated"
	if got := strings.Join(texts(t, all), "|"); got != want {
		t.Fatalf("all: %s\nwant %s", got, want)
	}
	since, _ := c.open(ctx, at(3), -1)
	if got := strings.Join(texts(t, since), "|"); got != "1:long part 1|1:long part 2|1:terminated" {
		t.Fatalf("since: %s", got)
	}
	tail, _ := c.open(ctx, time.Time{}, 2)
	if got := strings.Join(texts(t, tail), "|"); got != "1:long part 2|1:terminated" {
		t.Fatalf("tail: %s", got)
	}
	if !c.complete() {
		t.Fatal("not complete")
	}
}
