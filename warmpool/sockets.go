package warmpool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
)

// namePrefix starts every pool sandbox's name until its claim.
const namePrefix = "aimi-warm-"

// sweepAge is how old a socket directory of no pool sandbox must be to be
// removed: one a fill made a moment ago may not be listed yet.
const sweepAge = time.Minute

// dirOf is the socket directory of the pool sandbox named poolName (""
// without Options.SocketRoot, or for a name the pool did not give).
func (p *Pool) dirOf(poolName string) string {
	hex, ok := strings.CutPrefix(poolName, namePrefix)
	if p.socks == "" || !ok || hex == "" || strings.Trim(hex, "0123456789abcdef") != "" {
		return ""
	}
	return filepath.Join(p.socks, hex)
}

// SocketDir is the host directory mounted at contract.NetDir in claimed
// sandbox id at its create ("" when it is not a claimed sandbox or the
// pool mounts none): the daemon serves the container's sockets there from
// the claim on. A claim record keeps the pool name, so this holds after a
// restart too.
func (p *Pool) SocketDir(id string) string {
	cl, ok := p.claims.get(id)
	if !ok {
		return ""
	}
	return p.dirOf(cl.PoolName)
}

// mountDir makes the empty socket directory of a sandbox about to be
// created as s.Name and mounts it at contract.NetDir (nothing to do
// without Options.SocketRoot). Readable by the container's user, who
// connects to the sockets the claim brings; nothing is there before.
// Options.SocketRoot itself (0700) is made here, at the first sandbox, not
// by New: a daemon that never fills a pool leaves nothing among the
// sandboxes' socket directories, which are gone once their containers are.
func (p *Pool) mountDir(s *engine.Spec) error {
	dir := p.dirOf(s.Name)
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(p.socks, 0o700); err != nil {
		return fmt.Errorf("warm pool: make its socket directory %s: %w", p.socks, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	s.Mounts = []engine.Mount{{Source: dir, Target: contract.NetDir}}
	return nil
}

// emptyDir removes what a socket directory holds (sockets a daemon that
// died left behind), keeping the directory: it is a mount's source.
func (p *Pool) emptyDir(poolName string) {
	dir := p.dirOf(poolName)
	if dir == "" {
		return
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		_ = os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

// removeDir removes the socket directory of a removed pool sandbox.
func (p *Pool) removeDir(poolName string) {
	if dir := p.dirOf(poolName); dir != "" {
		_ = os.RemoveAll(dir)
	}
}

// sweepDirs removes the socket directories no pool sandbox has any more
// (known: the pool names of every sandbox listed, claimed ones included),
// older than sweepAge.
func (p *Pool) sweepDirs(infos []engine.Info) {
	if p.socks == "" {
		return
	}
	known := map[string]bool{}
	for _, in := range infos {
		known[in.Name] = true
	}
	for _, cl := range p.claims.all() {
		known[cl.PoolName] = true
	}
	ents, err := os.ReadDir(p.socks)
	if err != nil {
		return
	}
	for _, e := range ents {
		if known[namePrefix+e.Name()] {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > sweepAge {
			_ = os.RemoveAll(filepath.Join(p.socks, e.Name()))
		}
	}
}
