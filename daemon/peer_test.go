package daemon

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/api"
)

// The user at the other end of the API socket is named by the kernel's
// peer credentials: this process's own uid here.
func TestPeerContextNamesTheSocketsUser(t *testing.T) {
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	who := api.RequesterOf(peerContext(context.Background(), s))
	if !strings.HasSuffix(who, "uid "+strconv.Itoa(os.Getuid())) {
		t.Errorf("requester %q, want this process's uid %d", who, os.Getuid())
	}
	if got := api.RequesterOf(peerContext(context.Background(), &net.TCPConn{})); got != "" {
		t.Errorf("a TCP connection named %q", got)
	}
}
