package warmpool

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/internal/atomicfile"
)

// Claim phases.
const (
	phaseClaiming = "claiming" // recorded before the rename (and any join)
	phaseClaimed  = "claimed"  // its swarm's state file holds it
)

// maxClaimsBytes bounds the claims file read at start.
const maxClaimsBytes = 64 << 20

// claim is what the daemon knows of one claimed sandbox: the labels and
// name a created container of its task would have, and its pool name, to
// put it back.
type claim struct {
	Phase    string            `json:"phase"`
	Name     string            `json:"name"`
	PoolName string            `json:"poolName"`
	Network  string            `json:"network"`
	Labels   map[string]string `json:"labels"`
	// ClaimedAt is the sandbox's start as its swarm sees it (Pool.dress):
	// the engine's start is the pool's.
	ClaimedAt time.Time `json:"claimedAt"`
}

// claims is the claim records, kept in one file (written whole and
// atomically: a crash leaves the old or the new one). Changes that arrive
// while the file is written go into the next write together: a start
// claims its sandboxes at once, and each record waited for the fsyncs of
// all those before it.
type claims struct {
	path  string
	write func(data []byte) error // the file's save (atomicfile.WriteFile of path)
	mu    sync.Mutex
	m     map[string]claim // by container id, as the file holds them
	queue []claimChange    // waiting for the next write
	busy  bool             // a caller is writing the file
}

// claimChange is one update waiting for its write.
type claimChange struct {
	apply func(map[string]claim)
	done  chan error
}

func openClaims(dir string) (*claims, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("warm pool: make its directory: %w", err)
	}
	c := &claims{path: filepath.Join(dir, "claims.json"), m: map[string]claim{}}
	c.write = func(data []byte) error { return atomicfile.WriteFile(c.path, data, 0o600) }
	f, err := os.Open(c.path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("warm pool: read the claims: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("warm pool: read the claims: %w", err)
	}
	if st.Size() > maxClaimsBytes {
		return nil, fmt.Errorf("warm pool: %s is larger than %d bytes; move it away to start over (claimed sandboxes then look like pool sandboxes and are removed)", c.path, maxClaimsBytes)
	}
	if err := json.NewDecoder(f).Decode(&c.m); err != nil {
		return nil, fmt.Errorf("warm pool: %s is not a claims file (%v); move it away to start over", c.path, err)
	}
	if c.m == nil {
		c.m = map[string]claim{}
	}
	return c, nil
}

// get returns the claim of container id.
func (c *claims) get(id string) (claim, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl, ok := c.m[id]
	return cl, ok
}

// all returns a copy of every claim.
func (c *claims) all() map[string]claim {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.m)
}

func (c *claims) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// update applies f to the records and saves them; on a failed save the
// records are as before. It returns once a write that holds the change
// is on disk: the caller that finds none running writes, for itself and
// for every change queued meanwhile.
func (c *claims) update(f func(m map[string]claim)) error {
	ch := claimChange{apply: f, done: make(chan error, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, ch)
	if c.busy {
		c.mu.Unlock()
		return <-ch.done
	}
	c.busy = true
	for len(c.queue) > 0 {
		batch := c.queue
		c.queue = nil
		next := maps.Clone(c.m)
		for _, b := range batch {
			b.apply(next)
		}
		c.mu.Unlock()
		err := c.save(next)
		c.mu.Lock()
		if err == nil {
			c.m = next
		}
		for _, b := range batch {
			b.done <- err
		}
	}
	c.busy = false
	c.mu.Unlock()
	return <-ch.done
}

func (c *claims) save(m map[string]claim) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := c.write(b); err != nil {
		return fmt.Errorf("warm pool: save the claims: %w", err)
	}
	return nil
}

func (c *claims) put(id string, cl claim) error {
	return c.update(func(m map[string]claim) { m[id] = cl })
}

func (c *claims) drop(ids ...string) error {
	c.mu.Lock()
	n := 0
	for _, id := range ids {
		if _, ok := c.m[id]; ok {
			n++
		}
	}
	c.mu.Unlock()
	if n == 0 {
		return nil
	}
	return c.update(func(m map[string]claim) {
		for _, id := range ids {
			delete(m, id)
		}
	})
}
