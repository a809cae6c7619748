package warmpool

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
)

// A pool sandbox's socket directory is made empty and mounted at
// contract.NetDir at its create, found again from its claim record (also
// after a restart: the record keeps the pool name), and removed once no
// pool sandbox or claim has it any more and it is older than sweepAge.
func TestSocketDirsAreMountedFoundAndSwept(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "net", "warm")
	p, err := New(nil, Options{Dir: filepath.Join(base, "pool"), SocketRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing before the first pool sandbox: a daemon without a pool
	// leaves no directory among the sandboxes' socket directories.
	if _, err := os.Stat(root); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the pool's socket directory before any sandbox: %v, want none", err)
	}
	s := engine.Spec{Name: namePrefix + "0a1b2c"}
	if err := p.mountDir(&s); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "0a1b2c")
	if len(s.Mounts) != 1 || s.Mounts[0].Source != dir || s.Mounts[0].Target != contract.NetDir {
		t.Fatalf("mounts %+v, want %s at %s", s.Mounts, dir, contract.NetDir)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Fatalf("the socket directory: %v entries, %v; want it empty", len(ents), err)
	}
	if bad := (engine.Spec{Name: "aimi-one"}); p.mountDir(&bad) != nil || bad.Mounts != nil {
		t.Errorf("a name the pool did not give got a directory: %+v", bad.Mounts)
	}
	if err := p.claims.put("id1", claim{Phase: phaseClaiming, Name: "aimi-one", PoolName: s.Name}); err != nil {
		t.Fatal(err)
	}
	reopened, err := New(nil, Options{Dir: filepath.Join(base, "pool"), SocketRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	if got := reopened.SocketDir("id1"); got != dir {
		t.Errorf("SocketDir after a restart: %q, want %q", got, dir)
	}
	if got := reopened.SocketDir("other"); got != "" {
		t.Errorf("SocketDir of no claim: %q", got)
	}
	old := time.Now().Add(-2 * sweepAge)
	for _, d := range []string{"aaaaaa", "cccccc", "dddddd"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if d != "dddddd" {
			_ = os.Chtimes(filepath.Join(root, d), old, old)
		}
	}
	_ = os.Chtimes(dir, old, old)
	reopened.sweepDirs([]engine.Info{{Name: namePrefix + "aaaaaa"}})
	for d, want := range map[string]bool{"0a1b2c": true, "aaaaaa": true, "cccccc": false, "dddddd": true} {
		_, err := os.Stat(filepath.Join(root, d))
		if got := err == nil; got != want {
			t.Errorf("after the sweep %s exists %v, want %v (kept: a claim's, a listed sandbox's, a new one)", d, got, want)
		}
	}
}
