package runner

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/aimi-tools/swarm/contract"
)

// deltaOf is a difference's tar: deleted paths, then entries (a name
// ending in "@" + target is a link).
func deltaOf(t testing.TB, deleted string, entries ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: contract.WorkspaceDeletedEntry, Mode: 0o644, Size: int64(len(deleted)), Typeflag: tar.TypeReg})
	tw.Write([]byte(deleted))
	for _, e := range entries {
		if e[0][0] == '@' {
			tw.WriteHeader(&tar.Header{Name: e[0][1:], Linkname: e[1], Typeflag: tar.TypeSymlink})
			continue
		}
		tw.WriteHeader(&tar.Header{Name: e[0], Mode: 0o644, Size: int64(len(e[1])), Typeflag: tar.TypeReg})
		tw.Write([]byte(e[1]))
	}
	tw.Close()
	return buf.Bytes()
}

// TestApplyDeltaWritesOnlyInTheWorkspace: a difference replaces files and
// links and removes deleted ones; none of its names, nor a link the
// workspace holds, takes a write outside the workspace.
func TestApplyDeltaWritesOnlyInTheWorkspace(t *testing.T) {
	outside := t.TempDir()
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "keep"), []byte("old"), 0o644)
	os.WriteFile(filepath.Join(ws, "gone"), []byte("x"), 0o644)
	os.Symlink(outside, filepath.Join(ws, "out"))
	if err := applyDelta(ws, bytes.NewReader(deltaOf(t, "gone", [2]string{"keep", "new"}, [2]string{"a/b/c", "deep"}, [2]string{"@l", "keep"})), 1<<20, ""); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "keep")); string(b) != "new" {
		t.Errorf("keep = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a", "b", "c")); string(b) != "deep" {
		t.Errorf("a/b/c = %q", b)
	}
	if _, err := os.Stat(filepath.Join(ws, "gone")); !os.IsNotExist(err) {
		t.Errorf("gone stayed: %v", err)
	}
	for _, bad := range [][]byte{
		deltaOf(t, "", [2]string{"../x", "no"}),
		deltaOf(t, "../x", [2]string{"y", "no"}),
		deltaOf(t, "", [2]string{"out/x", "no"}),
		deltaOf(t, "", [2]string{"/abs", "no"}),
	} {
		if err := applyDelta(ws, bytes.NewReader(bad), 1<<20, ""); err == nil {
			t.Error("a difference naming a path outside the workspace was applied")
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) > 0 {
		t.Errorf("written outside the workspace: %v", ents)
	}
	if err := applyDelta(ws, bytes.NewReader(deltaOf(t, "", [2]string{"big", "0123456789"})), 5, ""); err == nil {
		t.Error("a difference past its bound was applied")
	}
}

// FuzzApplyDelta: whatever the difference, nothing is written outside the
// workspace and nothing panics.
func FuzzApplyDelta(f *testing.F) {
	f.Add(deltaOf(f, "a", [2]string{"b", "c"}, [2]string{"@l", "../.."}))
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, data []byte) {
		outside := t.TempDir()
		ws := filepath.Join(outside, "ws")
		os.Mkdir(ws, 0o755)
		_ = applyDelta(ws, bytes.NewReader(data), 1<<20, "own")
		ents, _ := os.ReadDir(outside)
		if len(ents) != 1 {
			t.Fatalf("written outside the workspace: %v", ents)
		}
	})
}
