package gittest

import (
	"bufio"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// historyPath is the file the commits of AddHistory rewrite; the last of
// them deletes it, so the branch's tip tree is what it was before.
const historyPath = "aimi-history.bin"

// AddHistory puts commits holding n incompressible blobs of size bytes
// each (random data, stored uncompressed) on top of branch in the
// repository at dir (bare or not), and a last commit that deletes them
// again: the branch's tree is unchanged while its history grows by about
// n*size bytes. It takes seconds for hundreds of megabytes (git
// fast-import, no deltas, no compression).
func AddHistory(t testing.TB, dir, branch string, n, size int) {
	t.Helper()
	parent := Git(t, dir, "rev-parse", "--verify", "refs/heads/"+branch+"^{commit}")
	w, finish := fastImport(t, dir, "-c", "core.compression=0", "-c", "pack.compression=0",
		"fast-import", "--quiet", "--big-file-threshold=1k", "--depth=0")
	commit := func(i int, msg string, body func()) {
		fmt.Fprintf(w, "commit refs/heads/%s\ncommitter test <test@example.com> %d +0000\ndata %d\n%s\n", branch, 1700000000+i, len(msg), msg)
		if i == 0 {
			fmt.Fprintf(w, "from %s\n", parent)
		}
		body()
		w.WriteString("\n")
	}
	for i := range n {
		commit(i, fmt.Sprintf("history %d", i), func() {
			fmt.Fprintf(w, "M 644 inline %s\ndata %d\n", historyPath, size)
			if _, err := io.CopyN(w, rand.Reader, int64(size)); err != nil {
				t.Fatal(err)
			}
			w.WriteString("\n")
		})
	}
	commit(n, "history removed", func() { fmt.Fprintf(w, "D %s\n", historyPath) })
	finish()
}

// fastImport starts git with args (a fast-import) in dir, without the
// user's configuration, and returns its input and the func that ends it
// (failing t when git did).
func fastImport(t testing.TB, dir string, args ...string) (w *bufio.Writer, finish func()) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w = bufio.NewWriterSize(in, 1<<20)
	return w, func() {
		t.Helper()
		if err := w.Flush(); err != nil {
			t.Fatalf("git fast-import: %v: %s", err, stderr.String())
		}
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("git fast-import: %v: %s", err, stderr.String())
		}
	}
}
