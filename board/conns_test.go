package board

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/testwait"
)

// TestAFloodOfParkedConnectionsLeavesThePageAnswering: another local user
// parks 3,000 connections on the board (silent, half a header, or a refused
// request kept alive). The board keeps at most its bound of them open, the
// owner's live stream opened before goes on, and the owner's next requests
// answer within the deadline.
func TestAFloodOfParkedConnectionsLeavesThePageAnswering(t *testing.T) {
	const parked = 3000
	answerWithin := 10 * time.Second // a shared test machine; unloaded it is milliseconds
	f := &fakeDaemon{events: make(chan api.Event, 1), list: fakeSwarm()}
	base, _ := serveBoard(t, f)
	addr := strings.TrimPrefix(base, "http://")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The owner's live stream, open before the flood.
	waitLine := openOwnerStream(t, ctx, base)
	waitLine("event: list")

	var open atomic.Int64
	parkConnections(t, addr, parked, &open)

	// The owner's page and data answer on new connections, at once.
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: answerWithin}
	for _, path := range []string{"/", "/api/swarms"} {
		start := time.Now()
		req, _ := http.NewRequestWithContext(ctx, "GET", base+path, nil)
		req.Header.Set(TokenHeader, testToken)
		resp, err := fresh.Do(req)
		if err != nil {
			t.Fatalf("the owner's GET %s under %d parked connections: %v", path, parked, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("the owner's GET %s under the flood: %d", path, resp.StatusCode)
		}
		t.Logf("GET %s under %d parked connections answered in %s", path, parked, time.Since(start).Round(time.Millisecond))
	}
	// The board holds at most its bound of them.
	bound := int64(Limits{}.withDefaults().MaxConns)
	testwait.Eventually(t, answerWithin, fmt.Sprintf("at most %d of the parked connections open", bound), func() error {
		if n := open.Load(); n > bound {
			return fmt.Errorf("%d of %d parked connections still open", n, parked)
		}
		return nil
	}, testwait.Every(50*time.Millisecond))
	// The owner's stream, opened before the flood, still delivers.
	f.events <- api.Event{Time: time.Now().UTC(), RepoPath: "/home/dev/web", ContainerName: "aimi-web", Kind: api.EventProgress, Status: "running", StoryID: "US-002", StoryStatus: "completed"}
	waitLine("event: changes")
}

// openOwnerStream opens the owner's live stream; the function it returns
// waits for a line of it starting with prefix.
func openOwnerStream(t *testing.T, ctx context.Context, base string) func(prefix string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/events", nil)
	req.Header.Set(TokenHeader, testToken)
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != 200 {
		t.Fatalf("open the live stream: %v %v", err, stream)
	}
	t.Cleanup(func() { stream.Body.Close() })
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return func(prefix string) {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the owner's live stream ended while waiting for %q", prefix)
				}
				if strings.HasPrefix(l, prefix) {
					return
				}
			case <-ctx.Done():
				t.Fatalf("no %q on the owner's live stream", prefix)
			}
		}
	}
}

// parkConnections opens parked connections to addr and leaves them: a third
// idle, a third with half a header, a third with a refused request; open
// counts those the board has not closed.
func parkConnections(t *testing.T, addr string, parked int, open *atomic.Int64) {
	t.Helper()
	conns := make([]net.Conn, 0, parked)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := range parked {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("park connection %d: %v", i, err)
		}
		conns = append(conns, c)
		switch i % 3 {
		case 1: // half a header
			_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+addr+"\r\n")
		case 2: // a request refused, and the connection kept
			_, _ = io.WriteString(c, "GET /api/swarms HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
		}
		open.Add(1)
		go func() { _, _ = io.Copy(io.Discard, c); open.Add(-1) }()
	}
}
