package gitserve

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDefaultDeltaSizeMeasuresTheTipsDifference: the default branch's
// tip two commits past base differs by the paths it changed, added and
// deleted and the bytes of the changed and added files; at base it does
// not differ, and from a commit it does not descend from it says so.
func TestDefaultDeltaSizeMeasuresTheTipsDifference(t *testing.T) {
	repo := newRepo(t)
	commitFile(t, repo, "gone.txt", "bye\n")
	base := commitFile(t, repo, "old.txt", "v1\n")
	commitFile(t, repo, "old.txt", "version 2\n")
	os.WriteFile(filepath.Join(repo, "a b*.txt"), []byte("12345"), 0o644)
	mustGit(t, repo, "rm", "-q", "gone.txt")
	mustGit(t, repo, "add", "-A")
	mustGit(t, repo, "commit", "-q", "-m", "more")
	tip := mustGit(t, repo, "rev-parse", "HEAD")
	s, _ := newService(t, Options{})
	if err := s.Prepare(ctxT(t), repo, "sw1"); err != nil {
		t.Fatal(err)
	}
	d, err := s.DefaultDeltaSize(ctxT(t), "sw1", base)
	if err != nil {
		t.Fatal(err)
	}
	if want := (DeltaSize{Tip: tip, Descends: true, Paths: 3, Bytes: int64(len("version 2\n") + 5)}); d != want {
		t.Errorf("from base: %+v, want %+v", d, want)
	}
	if d, err := s.DefaultDeltaSize(ctxT(t), "sw1", tip); err != nil || d != (DeltaSize{Tip: tip, Descends: true}) {
		t.Errorf("from the tip: %+v, %v", d, err)
	}
	if d, err := s.DefaultDeltaSize(ctxT(t), "sw1", strings.Repeat("f", 40)); err != nil || d.Descends {
		t.Errorf("from an unknown commit: %+v, %v; want it not descending", d, err)
	}
}
