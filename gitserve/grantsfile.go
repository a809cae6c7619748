package gitserve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/aimi-tools/swarm/internal/atomicfile"
)

// grantsFile is grants.json, written whole and atomically (a crash leaves
// the old or the new one). Saves that arrive while the file is written go
// into the next write together: a start grants its containers at once, on
// the way to each one's first git command, and each grant waited for the
// fsyncs of all those before it.
type grantsFile struct {
	path  string
	write func(data []byte) error // atomicfile.WriteFile of path
	mu    sync.Mutex
	// next is the newest state staged and not yet being written: the file
	// is written whole, so it holds every change staged before it.
	next *persisted
	// waiting are the callers whose change next holds.
	waiting []chan error
	busy    bool // a caller is writing the file
}

func newGrantsFile(path string) *grantsFile {
	g := &grantsFile{path: path}
	g.write = func(data []byte) error { return atomicfile.WriteFile(path, data, 0o600) }
	return g
}

// stage makes p the state the next write saves and returns where that
// write's error comes. Callers stage under Service.mu, so a state staged
// later is always the newer one, and writes never go back in time.
func (g *grantsFile) stage(p *persisted) chan error {
	done := make(chan error, 1)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.next = p
	g.waiting = append(g.waiting, done)
	return done
}

// wait returns once a write holding what was staged with done is on disk
// (or failed): the caller that finds none running writes, for itself and
// for every state staged meanwhile, the newest of them.
func (g *grantsFile) wait(done chan error) error {
	g.mu.Lock()
	if g.busy {
		g.mu.Unlock()
		return <-done
	}
	g.busy = true
	for g.next != nil {
		p, batch := g.next, g.waiting
		g.next, g.waiting = nil, nil
		g.mu.Unlock()
		err := g.save(p)
		for _, b := range batch {
			b <- err
		}
		g.mu.Lock()
	}
	g.busy = false
	g.mu.Unlock()
	return <-done
}

func (g *grantsFile) save(p *persisted) error {
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("encode git service grants: %w", err)
	}
	if err := g.write(data); err != nil {
		return fmt.Errorf("write git service grants: %w", err)
	}
	return nil
}

// load reads grants.json, and the addresses listened on before into the
// listeners.
func (s *Service) load() error {
	data, err := os.ReadFile(s.grants.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read git service grants: %w", err)
	}
	var p persisted
	if err := json.Unmarshal(data, &p); err != nil {
		return fmt.Errorf("git service grants %s are corrupt: %w (move the file away to start over; granted containers then lose access)", s.grants.path, err)
	}
	s.listen.Restore(p.Addresses)
	for _, r := range p.Records {
		if r == nil || r.Container == "" {
			continue
		}
		s.byName[r.sandbox()] = r
		if r.TokenHash == "" {
			r.EarlierHash = ""
		}
		s.addTokensLocked(r)
	}
	return nil
}

// stageLocked takes a copy of the grants for the next write of the file.
// The caller releases s.mu, then calls what it returns: that returns once
// a write holding this copy (or a newer one) is on disk. Writes happen
// without s.mu, so grants, requests and pushes go on meanwhile.
func (s *Service) stageLocked() (saved func() error) {
	p := &persisted{Addresses: s.listen.SavedLocked(), Records: make([]*record, 0, len(s.byName))}
	for _, r := range s.byName {
		c := *r
		p.Records = append(p.Records, &c)
	}
	done := s.grants.stage(p)
	return func() error { return s.grants.wait(done) }
}
