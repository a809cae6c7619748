package acceptloop

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// flaky fails its first accepts with EMFILE, then serves a real listener.
type flaky struct {
	net.Listener
	fails int
}

func (f *flaky) Accept() (net.Conn, error) {
	if f.fails > 0 {
		f.fails--
		return nil, syscall.EMFILE
	}
	return f.Listener.Accept()
}

// Failed accepts are waited out and the loop goes on; a closed listener
// ends it.
func TestRunWaitsOutFailuresAndEndsAtClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan net.Conn, 1)
	var failures []error
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(&flaky{Listener: ln, fails: 3}, func(err error, wait time.Duration) { failures = append(failures, err) }, func(c net.Conn) { got <- c })
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case s := <-got:
		s.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("no connection handed on after the failed accepts")
	}
	ln.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end when its listener closed")
	}
	if len(failures) != 3 || !errors.Is(failures[0], syscall.EMFILE) {
		t.Errorf("failures told: %v, want the three EMFILEs", failures)
	}
}
