package warmpool

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/internal/testwait"
)

// Claims made at once share their writes: each used to wait for the
// fsyncs of every one before it. A change is back only once a write
// holding it is on disk, and a failed write leaves its changes out.
func TestClaimsMadeAtOnceShareTheirWrites(t *testing.T) {
	c, err := openClaims(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	save := c.write
	var mu sync.Mutex
	writes := 0
	first := make(chan struct{})
	release := make(chan struct{})
	c.write = func(data []byte) error {
		mu.Lock()
		writes++
		n := writes
		mu.Unlock()
		if n == 1 {
			close(first)
			<-release // the others queue up meanwhile
		}
		return save(data)
	}
	const n = 8
	errs := make(chan error, n)
	go func() { errs <- c.put("c0", claim{Phase: phaseClaiming, Name: "n0"}) }()
	<-first
	var queued sync.WaitGroup
	for i := 1; i < n; i++ {
		queued.Add(1)
		go func() {
			queued.Done()
			errs <- c.put(fmt.Sprintf("c%d", i), claim{Phase: phaseClaiming, Name: fmt.Sprintf("n%d", i)})
		}()
	}
	queued.Wait()
	waitQueued(t, c, n-1)
	close(release)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if writes != 2 {
		t.Errorf("%d claims made at once took %d writes, want 2", n, writes)
	}
	again, err := openClaims(filepath.Dir(c.path))
	if err != nil {
		t.Fatal(err)
	}
	if got := again.len(); got != n {
		t.Errorf("the file holds %d claims, want %d", got, n)
	}

	c.write = func([]byte) error { return errors.New("disk full") }
	if err := c.put("c9", claim{Name: "n9"}); err == nil {
		t.Error("a failed write was not reported")
	}
	if _, ok := c.get("c9"); ok || c.len() != n {
		t.Errorf("a failed write's change is kept: %d claims", c.len())
	}
}

// waitQueued waits until n changes wait for the next write.
func waitQueued(t *testing.T, c *claims, n int) {
	t.Helper()
	testwait.Eventually(t, 10*time.Second, fmt.Sprintf("%d changes queued for the next write", n), func() error {
		c.mu.Lock()
		q := len(c.queue)
		c.mu.Unlock()
		if q > n {
			t.Fatalf("%d changes queued, want %d", q, n)
		}
		if q != n {
			return fmt.Errorf("%d changes queued", q)
		}
		return nil
	}, testwait.Every(time.Millisecond))
}
