package gitserve

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/testwait"
)

// TestGrantsMadeAtOnceShareTheirWrites: a start grants its containers at
// once; those that arrive while grants.json is written are saved together
// by the next write, and each Grant returns only once the file holds its
// token. When that write fails, each of them fails and its token works
// nowhere.
func TestGrantsMadeAtOnceShareTheirWrites(t *testing.T) {
	ctx := ctxT(t)
	repo := newRepo(t)
	s, _ := newService(t, Options{DataDir: filepath.Join(t.TempDir(), "data")})
	if err := s.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	const n = 8
	gate := blockFirstWrite(s, s.grants.write)
	errs := grantAtOnce(t, s, gate, repo, "ok", n)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := gate.count(); got != 2 {
		t.Errorf("%d grants made at once took %d writes of %s, want 2", n, got, stateName)
	}

	failed := errors.New("disk full")
	gate = blockFirstWrite(s, func([]byte) error { return failed })
	errs = grantAtOnce(t, s, gate, repo, "bad", 4)
	for range 4 {
		if err := <-errs; !errors.Is(err, failed) {
			t.Errorf("a grant whose save failed returned %v, want the write's error", err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, rec := range s.byName {
		if strings.HasPrefix(key.Container, "bad") && s.byToken[rec.TokenHash] != nil {
			t.Errorf("%s: the token of a grant whose save failed works", key.Container)
		}
	}
	if len(s.byToken) != n {
		t.Errorf("%d tokens work, want the %d saved ones", len(s.byToken), n)
	}
}

// writeGate holds the first write of the grants file until the grants
// made meanwhile queue up behind it, and counts the writes.
type writeGate struct {
	mu      sync.Mutex
	writes  int
	first   chan struct{}
	release chan struct{}
}

func (g *writeGate) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.writes
}

// blockFirstWrite makes the service's writes of the grants file go
// through save behind a new gate.
func blockFirstWrite(s *Service, save func([]byte) error) *writeGate {
	g := &writeGate{first: make(chan struct{}), release: make(chan struct{})}
	s.grants.write = func(data []byte) error {
		g.mu.Lock()
		g.writes++
		k := g.writes
		g.mu.Unlock()
		if k == 1 {
			close(g.first)
			<-g.release
		}
		return save(data)
	}
	return g
}

// grantAtOnce grants n containers named prefix<i>: the first one's write
// held until the others wait for theirs. A grant that succeeds checks
// that the file holds its token before it reports.
func grantAtOnce(t *testing.T, s *Service, gate *writeGate, repo, prefix string, n int) <-chan error {
	t.Helper()
	errs := make(chan error, n)
	grant := func(i int) {
		name := fmt.Sprintf("%s%d", prefix, i)
		g, err := s.Grant(ctxT(t), contract.ContainerBranch{Repo: repo, Swarm: "swarm-g", Container: name, Branch: "feat-" + name}, "")
		if err == nil {
			data, rerr := os.ReadFile(filepath.Join(s.dir, stateName))
			if rerr != nil || !strings.Contains(string(data), hashToken(g.Token)) {
				err = fmt.Errorf("grant of %s returned before %s held its token (%v)", name, stateName, rerr)
			}
		}
		errs <- err
	}
	var once sync.Once
	open := func() { once.Do(func() { close(gate.release) }) }
	t.Cleanup(open) // a failed wait must not leave the service stuck
	go grant(0)
	<-gate.first
	for i := 1; i < n; i++ {
		go grant(i)
	}
	waitQueued(t, s, n-1)
	open()
	return errs
}

// waitQueued waits until n saves wait for the next write.
func waitQueued(t *testing.T, s *Service, n int) {
	t.Helper()
	testwait.Eventually(t, 30*time.Second, fmt.Sprintf("%d saves queued behind a write", n), func() error {
		s.grants.mu.Lock()
		q := len(s.grants.waiting)
		s.grants.mu.Unlock()
		if q > n {
			t.Fatalf("%d saves queued, want %d", q, n)
		}
		if q != n {
			return fmt.Errorf("%d saves queued", q)
		}
		return nil
	}, testwait.Every(time.Millisecond))
}
