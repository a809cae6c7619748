package gittest

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// Project shapes a generated project (AddProject).
type Project struct {
	Files, Dirs, Commits int
	FileBytes            int // about each file's size
}

// RealProject is the benchmarks' stand-in for a real repository: 1,000
// files in 80 directories (about 4.5 MB checked out), 200 commits.
var RealProject = Project{Files: 1000, Dirs: 80, Commits: 200, FileBytes: 2600}

// AddProject puts a generated project on top of branch of the repository
// at dir (not bare): a first commit of p.Files text files spread over
// p.Dirs directories two deep, then p.Commits-1 commits each changing five
// of them, all through one git fast-import (seconds, not minutes), then
// checks the branch's tip out again. The content is deterministic.
func AddProject(t testing.TB, dir, branch string, p Project) {
	t.Helper()
	parent := Git(t, dir, "rev-parse", "--verify", "refs/heads/"+branch+"^{commit}")
	w, finish := fastImport(t, dir, "fast-import", "--quiet")
	rng := rand.New(rand.NewPCG(1, 2))
	paths := make([]string, p.Files)
	for i := range paths {
		d := i % max(p.Dirs, 1)
		paths[i] = fmt.Sprintf("src/d%03d/m%d/f%04d.txt", d, d%7, i)
	}
	file := func(path string, round int) {
		var b strings.Builder
		for b.Len() < p.FileBytes {
			fmt.Fprintf(&b, "%s line %d of round %d: %x\n", path, b.Len(), round, rng.Uint64())
		}
		fmt.Fprintf(w, "M 644 inline %s\ndata %d\n%s\n", path, b.Len(), b.String())
	}
	for c := range max(p.Commits, 1) {
		msg := fmt.Sprintf("project %d", c)
		fmt.Fprintf(w, "commit refs/heads/%s\ncommitter test <test@example.com> %d +0000\ndata %d\n%s\n", branch, 1700000000+c, len(msg), msg)
		if c == 0 {
			fmt.Fprintf(w, "from %s\n", parent)
			for _, path := range paths {
				file(path, 0)
			}
		} else {
			for range 5 {
				file(paths[rng.IntN(len(paths))], c)
			}
		}
		w.WriteString("\n")
	}
	finish()
	Git(t, dir, "checkout", "-q", "-f", branch)
}
