package container

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/internal/dockertest"
)

type countingTransport struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// TestNewClientWrapsTheTransportAndStillAttaches: a wrapped client reaches
// the real engine through the wrapper, and a hijacked stream (attach goes
// through the client's dialer, not the transport) still works.
func TestNewClientWrapsTheTransportAndStillAttaches(t *testing.T) {
	dockertest.Client(t) // skips without an engine
	var n atomic.Int64
	cli, wrapped, err := NewClient(func(next http.RoundTripper) http.RoundTripper { return countingTransport{next, &n} })
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if !wrapped {
		t.Skip("the engine endpoint is not a unix socket or plain TCP: nothing is wrapped")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.ServerVersion(ctx); err != nil {
		t.Fatal(err)
	}
	if got := n.Load(); got < 2 {
		t.Fatalf("the wrapper saw %d requests, want at least 2", got)
	}
	// A hijacked connection: the events stream is not one, but a session
	// dial is; DialHijack on /session exercises the client's dialer.
	conn, err := cli.DialHijack(ctx, "/session", "h2c", nil)
	if err != nil {
		t.Fatalf("hijack through a wrapped client: %v", err)
	}
	conn.Close()
}
