package gitserve

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/testwait"
)

// commitRandom commits n incompressible bytes as name.
func commitRandom(t *testing.T, dir, name string, n int) {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
	mustGit(t, dir, "add", name)
	mustGit(t, dir, "commit", "-q", "-m", "add "+name)
}

// TestPushLimitsRefuseWithTheKeyToRaise: real git pushes over https. A push
// larger than MaxPush is refused, git shows the reason naming git.max_push,
// and the mirror is unchanged; pushes under it go through until what the
// swarm added would pass MaxMirror, which is refused naming git.max_mirror;
// the mirror never grows past MaxMirror; another swarm still pushes.
func TestPushLimitsRefuseWithTheKeyToRaise(t *testing.T) {
	ctx := ctxT(t)
	repo := newRepo(t)
	s, logs := newService(t, Options{Limits: Limits{MaxPush: 3 << 20, MaxMirror: 5 << 20}})
	if err := s.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	a, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-1", Container: "aimi-a", Branch: "feat/a"}, "")
	if err != nil {
		t.Fatal(err)
	}
	env := clientEnv(a.CAFile, bearer(a.Token))
	work := filepath.Join(t.TempDir(), "work")
	if out, err := gitOut("", env, "clone", "-q", a.RepoURL, work); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	mustGit(t, work, "checkout", "-q", "-b", "feat/a")
	mirror := s.mirrorPath("swarm-1")
	base, err := dirBytes(mirror)
	if err != nil {
		t.Fatal(err)
	}
	push := func() (string, error) { return gitOut(work, env, "push", "origin", "HEAD:refs/heads/feat/a") }

	before := snapshot(t, mirror)
	commitRandom(t, work, "big.bin", 4<<20)
	out, err := push()
	if err == nil || !strings.Contains(out, "git.max_push") || !strings.Contains(out, "remote rejected") {
		t.Fatalf("a 4 MiB push with a 3 MiB limit: err %v, want a refusal naming git.max_push:\n%s", err, out)
	}
	if after := snapshot(t, mirror); after != before {
		t.Errorf("the refused push changed the mirror:\nbefore %s\nafter %s", before, after)
	}
	t.Logf("git said: %s", out)

	mustGit(t, work, "reset", "-q", "--hard", "HEAD~1")
	for i := range 2 {
		commitRandom(t, work, "part"+itoa(i)+".bin", 2<<20)
		if out, err := push(); err != nil {
			t.Fatalf("push %d of 2 MiB (under both limits): %v\n%s", i+1, err, out)
		}
	}
	commitRandom(t, work, "part2.bin", 2<<20)
	out, err = push()
	if err == nil || !strings.Contains(out, "git.max_mirror") {
		t.Fatalf("a third 2 MiB push with a 5 MiB mirror limit: err %v, want a refusal naming git.max_mirror:\n%s", err, out)
	}
	size, err := dirBytes(mirror)
	if err != nil {
		t.Fatal(err)
	}
	if grew := size - base; grew > 5<<20 {
		t.Errorf("the mirror grew by %d bytes, past the 5 MiB limit", grew)
	}
	if !strings.Contains(logs.String(), "git.max_mirror") || !strings.Contains(logs.String(), "git.max_push") {
		t.Errorf("the refusals are not in the daemon's log:\n%s", logs.String())
	}

	// Another swarm has its own share.
	other := newRepo(t)
	b, err := s.Grant(ctx, contract.ContainerBranch{Repo: other, Swarm: "swarm-2", Container: "aimi-b", Branch: "feat/b"}, "")
	if err != nil {
		t.Fatal(err)
	}
	work2 := filepath.Join(t.TempDir(), "work2")
	env2 := clientEnv(b.CAFile, bearer(b.Token))
	if out, err := gitOut("", env2, "clone", "-q", b.RepoURL, work2); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	mustGit(t, work2, "checkout", "-q", "-b", "feat/b")
	commitRandom(t, work2, "b.bin", 2<<20)
	if out, err := gitOut(work2, env2, "push", "origin", "HEAD:refs/heads/feat/b"); err != nil {
		t.Fatalf("push of another swarm: %v\n%s", err, out)
	}
}

func heldConns(s *Service) int { return s.conns.Held() }

// dialFrom opens a TCP connection to addr from the loopback address local.
func dialFrom(t *testing.T, local, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, local, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByServer counts the connections the server closed: a read gets EOF
// (or a reset) rather than waiting out the deadline. The reads run at once
// to one deadline: the kept connections wait it out together, and each
// closed one has until then for the server, on a loaded machine, to
// accept and close it (at 300 ms per read, a late accept counted as kept).
func closedByServer(conns []net.Conn) int {
	deadline := time.Now().Add(3 * time.Second)
	var n atomic.Int32
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			c.SetReadDeadline(deadline)
			var b [1]byte
			_, err := c.Read(b[:])
			var ne net.Error
			if !(errors.As(err, &ne) && ne.Timeout()) {
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return int(n.Load())
}

// TestConnectionFloodHoldsOnlyItsShare: connections from one source address
// past MaxConnsPerPeer are closed as they come, while a client from another
// address is served; past MaxConns in total, every source is refused.
func TestConnectionFloodHoldsOnlyItsShare(t *testing.T) {
	ctx := ctxT(t)
	repo := newRepo(t)
	s, _ := newService(t, Options{Limits: Limits{MaxConnsPerPeer: 8, MaxConns: 20}})
	if err := s.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	g, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-1", Container: "aimi-a", Branch: "feat/a"}, "")
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(strings.TrimSuffix(g.RepoURL, "/swarm-1.git"), "https://")
	var flood []net.Conn
	for range 50 {
		flood = append(flood, dialFrom(t, "127.0.0.2", addr))
	}
	if closed := closedByServer(flood); closed != 50-8 {
		t.Errorf("%d of 50 connections from one address were closed, want %d (all past 8)", closed, 50-8)
	}

	// Another address is served while the flood holds its 8.
	pool := caPool(t, g.CAFile)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext:     (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}}).DialContext,
	}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.RepoURL+"/info/refs?service=git-upload-pack", nil)
	req.Header.Set("Authorization", "Bearer "+g.Token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("a request from another address during the flood: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a request from another address during the flood: %s", resp.Status)
	}
	client.CloseIdleConnections()
	// The server gives that place back once it sees the close.
	testwait.Eventually(t, 5*time.Second, "the flood's 8 connections held, no more", func() error {
		if n := heldConns(s); n != 8 {
			return fmt.Errorf("%d connections held", n)
		}
		return nil
	}, testwait.Every(10*time.Millisecond))

	// The total: 8 held by .2, 8 more from .4, 4 from .5; then .6 gets none.
	var more []net.Conn
	for range 8 {
		more = append(more, dialFrom(t, "127.0.0.4", addr))
	}
	for range 4 {
		more = append(more, dialFrom(t, "127.0.0.5", addr))
	}
	if closed := closedByServer(more); closed != 0 {
		t.Errorf("%d connections under the limits were closed", closed)
	}
	if closed := closedByServer([]net.Conn{dialFrom(t, "127.0.0.6", addr)}); closed != 1 {
		t.Error("a connection past the total limit was kept")
	}
	// Closed connections give their place back.
	for _, c := range more {
		c.Close()
	}
	// No pause between tries: each takes up to closedByServer's 3 s.
	testwait.Eventually(t, 5*time.Second, "the places of closed connections given back", func() error {
		if closedByServer([]net.Conn{dialFrom(t, "127.0.0.6", addr)}) != 0 {
			return errors.New("a new connection from .6 was closed by the server")
		}
		return nil
	}, testwait.Every(0))
}

// TestBackendSlotsPerContainerAndInTotal: a container past its share of
// git processes waits while another container gets one; past the total,
// every container waits until a slot is given back.
func TestBackendSlotsPerContainerAndInTotal(t *testing.T) {
	b := newBackendSlots(Limits{MaxBackends: 2, MaxBackendsPerContainer: 1}.withDefaults())
	a, c, d := contract.Sandbox{Swarm: "s", Container: "a"}, contract.Sandbox{Swarm: "s", Container: "c"}, contract.Sandbox{Swarm: "s", Container: "d"}
	// short bounds the acquires that must wait: one that must succeed
	// gets the test's context, since a select between a free slot and an
	// ended context (a test goroutine held back past 100 ms) picks either.
	short := func() context.Context {
		ctx, cancel := context.WithTimeout(ctxT(t), 100*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	relA, ok := b.acquire(ctxT(t), a)
	if !ok {
		t.Fatal("first slot refused")
	}
	if _, ok := b.acquire(short(), a); ok {
		t.Fatal("a second slot of one container past its share of 1")
	}
	if _, ok := b.acquire(ctxT(t), c); !ok {
		t.Fatal("another container got no slot while one was free")
	}
	if _, ok := b.acquire(short(), d); ok {
		t.Fatal("a slot past the total of 2")
	}
	relA()
	if _, ok := b.acquire(ctxT(t), d); !ok {
		t.Fatal("a slot given back was not taken")
	}
}

// TestTheUsersHistoryDoesNotCountAgainstMaxMirror: what the mirror holds
// of the user's own commits, those it was made from and those a grant
// brings in later (before the swarm's first push and after it), is not
// the swarm's: only what its containers push counts against MaxMirror.
func TestTheUsersHistoryDoesNotCountAgainstMaxMirror(t *testing.T) {
	ctx := ctxT(t)
	repo := newRepo(t)
	commitRandom(t, repo, "history.bin", 3<<20)
	s, _ := newService(t, Options{Limits: Limits{MaxPush: 2 << 20, MaxMirror: 2 << 20}})
	if err := s.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	grant := func(container string) Grant {
		t.Helper()
		g, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-h", Container: container, Branch: "feat/" + container}, "")
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	push := func(g Grant, container, file string) {
		t.Helper()
		env := clientEnv(g.CAFile, bearer(g.Token))
		work := filepath.Join(t.TempDir(), "work")
		if out, err := gitOut("", env, "clone", "-q", g.RepoURL, work); err != nil {
			t.Fatalf("clone: %v\n%s", err, out)
		}
		mustGit(t, work, "checkout", "-q", "-b", "feat/"+container)
		commitRandom(t, work, file, 600<<10)
		if out, err := gitOut(work, env, "push", "origin", "HEAD:refs/heads/feat/"+container); err != nil {
			t.Fatalf("a 600 KiB push with a 2 MiB mirror limit over 3 MiB of the user's history: %v\n%s", err, out)
		}
	}
	a := grant("aimi-a")
	commitRandom(t, repo, "later.bin", 3<<20) // the user commits before the first push
	push(grant("aimi-b"), "aimi-b", "b.bin")
	commitRandom(t, repo, "again.bin", 3<<20) // and after it
	push(grant("aimi-c"), "aimi-c", "c.bin")
	push(a, "aimi-a", "a.bin")
}
