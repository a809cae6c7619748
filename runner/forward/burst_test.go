package forward

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
)

// daemonLike serves HTTPS on a unix socket the way the daemon serves a
// sandbox's git socket: at most conns connections at once (more wait in
// the socket's backlog), a TLS handshake and headers bounded by
// headerTime. It returns the socket and a client that trusts it.
func daemonLike(t *testing.T, conns int, headerTime time.Duration) (string, *http.Client) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "git.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	srv.Listener = &waitingListener{Listener: ln, sem: make(chan struct{}, conns)}
	srv.Config.ReadHeaderTimeout = headerTime
	srv.Config.ErrorLog = slog.NewLogLogger(slog.DiscardHandler, slog.LevelDebug)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: tr.TLSClientConfig.RootCAs, ServerName: "127.0.0.1"}
	tr.DisableKeepAlives = true
	return sock, &http.Client{Transport: tr, Timeout: 3 * time.Second}
}

// waitingListener accepts at most cap(sem) connections at once.
type waitingListener struct {
	net.Listener
	sem chan struct{}
}

func (l *waitingListener) Accept() (net.Conn, error) {
	l.sem <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &releasing{Conn: c, release: func() { <-l.sem }}, nil
}

type releasing struct {
	net.Conn
	release func()
}

func (c *releasing) Close() error {
	err := c.Conn.Close()
	if c.release != nil {
		c.release()
		c.release = nil
	}
	return err
}

// burst opens n connections to addr and holds them (every third has
// begun a TLS handshake it never finishes), until the test ends.
func burst(t *testing.T, addr string, n int) int {
	t.Helper()
	held := 0
	for i := range n {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			continue
		}
		if i%3 == 0 {
			_, _ = c.Write([]byte{0x16, 0x03, 0x01})
		}
		held++
		t.Cleanup(func() { c.Close() })
	}
	return held
}

// getWithin asks url until it answers 200 or d passes; it returns how long
// that took and the last failure.
func getWithin(c *http.Client, url string, d time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(start), nil
			}
		}
		if time.Since(start) > d {
			return time.Since(start), err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A burst of connections through a forward, every one held open without
// a word, leaves the forward answering within seconds once the burst is
// over (the connections still held): the forward gives back the places
// of those that said nothing, and queues none of them in the daemon's
// socket where they would wait ahead of every later request.
func TestForwardAnswersSoonAfterABurstOfHeldConnections(t *testing.T) {
	sock, client := daemonLike(t, 32, 2*time.Second)
	port := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := Start(ctx, []Forward{{Port: port, Name: "git", Socket: sock}}, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	held := burst(t, addr, 1000)
	t.Logf("the burst holds %d connections", held)
	took, err := getWithin(client, "https://"+addr+"/", 20*time.Second)
	if err != nil {
		t.Fatalf("no answer through the forward %s after the burst: %v", took.Round(time.Millisecond), err)
	}
	t.Logf("answered %s after the burst", took.Round(time.Millisecond))
}

// While the agent's processes keep opening connections to a forward and
// hold every one, the runner's own requests (Channels.DialContext) are
// answered at once, every time: they do not queue behind the burst, and
// the forward leaves the daemon the places they need.
func TestTheRunnersOwnRequestsGetThroughDuringABurst(t *testing.T) {
	sock, client := daemonLike(t, contract.ChannelConns(contract.ServiceGit), 2*time.Second)
	port := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := Start(ctx, []Forward{{Port: port, Name: contract.ServiceGit, Socket: sock}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	burstCtx, stopBurst := context.WithCancel(ctx)
	defer stopBurst()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for burstCtx.Err() == nil && len(held) < 1500 {
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				held = append(held, c)
			}
		}
		<-burstCtx.Done()
	}()
	own := client.Transport.(*http.Transport).Clone()
	own.DialContext = ch.DialContext
	runner := &http.Client{Transport: own, Timeout: 3 * time.Second}
	for i := range 8 {
		t0 := time.Now()
		resp, err := runner.Get("https://" + addr + "/")
		if err != nil {
			t.Fatalf("request %d of the runner's own during the burst: %v", i, err)
		}
		resp.Body.Close()
		t.Logf("request %d answered in %s", i, time.Since(t0).Round(time.Millisecond))
		time.Sleep(500 * time.Millisecond)
	}
}

// A failed accept (out of file descriptors) is waited out: the forward
// goes on accepting, it does not leave its port dead.
func TestAcceptLoopOutlivesAFailedAccept(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	ln := &failingListener{errs: []error{syscall.EMFILE, syscall.EMFILE}, conn: a}
	got := make(chan net.Conn, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		acceptLoop(ln, "git", &quietLog{log: slog.New(slog.DiscardHandler)}, func(c net.Conn) { got <- c })
	}()
	select {
	case c := <-got:
		c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("no connection handed on after failed accepts")
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not end when its listener closed")
	}
}

// failingListener fails with errs, then hands conn once, then is closed.
type failingListener struct {
	net.Listener
	errs []error
	conn net.Conn
}

func (l *failingListener) Accept() (net.Conn, error) {
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: err}
	}
	if c := l.conn; c != nil {
		l.conn = nil
		return c, nil
	}
	return nil, net.ErrClosed
}

// A connection whose client says nothing is closed after FirstByte, and
// one whose daemon side ended is closed Linger after its last byte: both
// give their place back to the next connection.
func TestSilentAndOrphanedConnectionsGiveTheirPlaceBack(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// Answers the first line, then ends its side.
			go func() {
				buf := make([]byte, 64)
				n, _ := c.Read(buf)
				_, _ = c.Write(buf[:n])
				c.Close()
			}()
		}
	}()
	port := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lim := Limits{Conns: 1, Waiting: 1, Wait: 10 * time.Second, FirstByte: 300 * time.Millisecond, Idle: time.Minute, Linger: 300 * time.Millisecond}
	if _, err := Start(ctx, []Forward{{Port: port, Name: "echo", Socket: sock, Limits: lim}}, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// echo sends a line through the forward, reads it back and keeps its
	// connection open.
	echo := func(what string) time.Duration {
		t0 := time.Now()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "ping"); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("%s: %q %v", what, buf, err)
		}
		return time.Since(t0)
	}
	// The silent one holds the only place until its FirstByte.
	if took := echo("after a silent connection"); took > 3*time.Second {
		t.Errorf("answered after %s, want within a few FirstBytes", took)
	}
	// That one stays open on the client's side, its daemon side gone: the
	// next one gets the place after Linger.
	if took := echo("after an orphaned connection"); took > 3*time.Second {
		t.Errorf("answered after %s, want within a few Lingers", took)
	}
}
