package forward

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
)

// A relay whose task starts after the sandbox's: FromEnv returns only
// once the relay accepts, so the runner's first connection (the clone, a
// model call bounding its TLS handshake) finds it listening instead of
// waiting inside the forward past its client's own timeout.
func TestFromEnvWaitsForALateRelay(t *testing.T) {
	port := freePort(t)
	relay := net.JoinHostPort("127.0.0.2", strconv.Itoa(port))
	const late = 1500 * time.Millisecond
	listening := make(chan net.Listener, 1)
	go func() {
		time.Sleep(late)
		ln, err := net.Listen("tcp", relay)
		if err != nil {
			t.Error(err)
			close(listening)
			return
		}
		listening <- ln
	}()
	env := map[string]string{
		contract.EnvNetForward: strconv.Itoa(port) + "=git",
		contract.EnvNetRelay:   "127.0.0.2",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := FromEnv(ctx, func(k string) string { return env[k] }, slog.Default()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < late {
		t.Fatalf("FromEnv returned after %s, before the relay listened (%s)", took, late)
	}
	ln, ok := <-listening
	if !ok {
		return
	}
	defer ln.Close()
	// The wait's own probe sent nothing; the relay drops it unopened.
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("FromEnv took %s for a relay up after %s", took, late)
	}
}

// WaitRelay is bounded: a relay that never comes delays the runner by
// the bound only, and forwards over sockets do not wait at all.
func TestWaitRelayIsBounded(t *testing.T) {
	start := time.Now()
	WaitRelay(context.Background(), []Forward{{Port: 1, Socket: "/nowhere.sock"}}, time.Minute, slog.Default())
	if took := time.Since(start); took > time.Second {
		t.Fatalf("socket forwards waited %s", took)
	}
	port := freePort(t)
	WaitRelay(context.Background(), []Forward{{Port: port, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}}, time.Second, slog.Default())
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("an absent relay held WaitRelay %s past its 1 s bound", took)
	}
}
